"""The code's shape: packages by concern, dependencies in one direction, no import circle.

The import graph is computed from the source (every `import` and `from ... import`, at any depth
of a module, lazy imports included), so a circle cannot hide in a function body."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Lower layers never import higher ones. A package may import its own layer's modules and any
# lower layer's. model is the pure input model; facts and operations are pyinfra-shaped; engines
# describe each server; roles are what deploy.py converges; validation checks the inventory
# before any host is touched (it reads the roles' own rules); day2 holds the procedures behind
# runbooks/; the entry points sit on top.
LAYERS = [
    {"model", "host_scripts"},
    {"facts"},
    {"operations"},
    {"engines"},
    {"roles"},
    {"validation"},
    {"day2"},
    {"runbooks", "deploy", "lab", "bench", "zfsrepo", "tests"},
]
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}
CODE = ["model", "host_scripts", "facts", "operations", "engines", "roles", "validation", "day2", "runbooks"]


def modules() -> dict[str, Path]:
    found = {"deploy": REPO / "deploy.py"}
    for top in (*CODE, "lab", "bench", "zfsrepo"):
        for path in sorted((REPO / top).rglob("*.py")):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module (or a module importing
    itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_packages():
    edges = graph()
    assert {"model.hostdata", "roles.zfs", "day2.seeding", "validation", "facts.zfs"} <= set(edges)
    assert "model.hostdata" in edges["roles.zfs"]


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    found = cycles(graph())
    assert not found, "import circles (break each: move what both sides need below them):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_dependencies_go_one_way():
    wrong = []
    for name, targets in graph().items():
        for target in targets:
            here, there = RANK[name.split(".")[0]], RANK[target.split(".")[0]]
            if there > here:
                wrong.append(f"{name} imports {target} (a higher layer)")
    assert not wrong, "\n".join(sorted(wrong))


def test_the_model_never_imports_pyinfra():
    for path in sorted((REPO / "model").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n == "pyinfra" or n.startswith("pyinfra.") for n in names), path


MAX_LINES = 800


def test_no_module_of_the_code_is_over_800_lines():
    """A module over 800 lines holds more than one concern: split it by concern (as validation/
    was, its rules now next to the code that owns each key)."""
    long = {}
    for path in modules().values():  # model, ..., day2, runbooks, lab, bench, zfsrepo, deploy.py
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            long[str(path.relative_to(REPO))] = lines
    assert not long, f"modules over {MAX_LINES} lines (split each by concern): {long}"
