"""The inventory file, loaded exactly as `pyinfra INVENTORY ...` loads it (group_data/ included),
with every mistake in the file itself (missing, not Python, raising, no host, a host twice, a group
pyinfra would ignore) reported as one message naming the file, the line or the host.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from model.problems import InventoryError, Problem

REPO_ROOT = Path(__file__).resolve().parent.parent


def load_inventory(path: str) -> dict[str, dict]:
    """Host name -> merged host data, loaded exactly as `pyinfra INVENTORY ...` loads it.

    Raises InventoryError, naming the file, the line or the host, when the file is missing, is
    not Python, raises, holds no host, lists a host twice or holds a group pyinfra would ignore.
    """
    from pyinfra.api import State
    from pyinfra.context import ctx_state
    from pyinfra_cli.inventory import make_inventory
    from pyinfra_cli.util import exec_file

    file = Path(path)
    if not file.exists():
        raise InventoryError(
            [
                Problem(
                    None,
                    "inventory",
                    path,
                    "no such file",
                    "give the path of an inventory file, e.g. inventories/prod.py",
                )
            ],
            path,
        )
    if not file.is_file() or file.suffix != ".py":
        raise InventoryError(
            [
                Problem(
                    None,
                    "inventory",
                    path,
                    "not a Python file",
                    "give the path of an inventory file, e.g. inventories/prod.py",
                )
            ],
            path,
        )
    with ctx_state.use(State()):
        try:
            # pyinfra's own reading of the file, for its group lists: pyinfra merges a host listed
            # twice without a word, and ignores a group holding anything but hosts.
            module = exec_file(str(file), return_locals=True)
            _check_groups(module, path)
            inventory = make_inventory(str(file), cwd=str(REPO_ROOT))
        except InventoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure of user code becomes one message
            raise InventoryError([_code_problem(exc, file)], path) from None
    hosts = {host.name: host.data.dict() for host in inventory}
    if not hosts:
        raise InventoryError(
            [
                Problem(
                    None,
                    "inventory",
                    path,
                    "no hosts",
                    'list hosts in groups, e.g. mariadb = [("db01", {...})]',
                )
            ],
            path,
        )
    return hosts


def _check_groups(module: Mapping[str, Any], path: str) -> None:
    """The inventory module's groups as pyinfra reads them (pyinfra_cli.inventory): every public
    list or tuple of host names or (name, data) tuples is a group; a tuple (hosts, data) is a
    group with group data."""
    problems: list[Problem] = []
    seen: dict[str, list[tuple[str, bool]]] = defaultdict(list)  # host -> [(group, has data)]
    for group, value in module.items():
        if group.startswith("_") or not isinstance(value, (list, tuple)):
            continue
        hosts = value
        if isinstance(value, tuple):
            if len(value) != 2 or not isinstance(value[0], list) or not isinstance(value[1], dict):
                if any(isinstance(v, (list, tuple, dict)) for v in value):
                    problems.append(
                        Problem(
                            None,
                            group,
                            value,
                            "pyinfra ignores or misreads it: a group is a list of "
                            "hosts, or a tuple (list of hosts, group data)",
                            f'{group} = [("name", {{...}}), ...] or ([...], {{...}})',
                        )
                    )
                continue
            hosts = value[0]
        looks_like_hosts = any(isinstance(h, (str, tuple, list, dict)) for h in hosts)
        for i, entry in enumerate(hosts):
            where = f"{group}[{i}]"
            if isinstance(entry, str):
                seen[entry].append((group, False))
            elif (
                isinstance(entry, tuple)
                and len(entry) == 2
                and isinstance(entry[0], str)
                and isinstance(entry[1], dict)
            ):
                seen[entry[0]].append((group, bool(entry[1])))
            elif looks_like_hosts:
                problems.append(
                    Problem(
                        None,
                        where,
                        entry,
                        f"not a host entry (pyinfra would ignore the whole group {group} or fail on it)",
                        'write "name" or ("name", {...data...})',
                    )
                )
    for host, entries in seen.items():
        groups = [g for g, _ in entries]
        with_data = [g for g, has_data in entries if has_data]
        twice_in_one = sorted({g for g in groups if groups.count(g) > 1})
        if len(with_data) > 1 or twice_in_one:
            problems.append(
                Problem(
                    host,
                    "inventory",
                    groups,
                    f"listed {len(entries)} times (groups: {', '.join(groups)}); pyinfra keeps one "
                    "host and merges the entries' data key by key, the last one winning",
                    "keep one entry per host with all its data; to add it to another group, list "
                    "its bare name there",
                )
            )
    if problems:
        raise InventoryError(problems, path)


def _code_problem(exc: BaseException, inventory: Path) -> Problem:
    """One message for an exception from the inventory's code (or the group data's): the file
    and line, what was raised; never a traceback."""
    from pyinfra_cli.exceptions import UnexpectedExternalError

    user_file = inventory
    if isinstance(exc, UnexpectedExternalError):  # pyinfra's wrapper around user code's errors
        user_file, exc = Path(exc.filename), exc.exception
    if isinstance(exc, SyntaxError):
        file, line = exc.filename, exc.lineno
        message = f"Python syntax error: {exc.msg}"
        fix = "correct the syntax there"
    else:
        file, line = str(user_file), None
        tb = getattr(exc, "_traceback", None) or exc.__traceback__
        frames = []
        while tb is not None:
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
            tb = tb.tb_next
        ours = [f for f in frames if _is_ours(f[0], user_file)]
        if ours:
            in_file = [f for f in ours if Path(f[0]).resolve() == user_file.resolve()]
            file, line = (in_file or ours)[-1]
        message = f"{type(exc).__name__}: {exc}"
        fix = "correct the code or the data it reads"
    # The header names the inventory: its own lines are "line N", other files' are named.
    same = bool(file) and Path(file).resolve() == inventory.resolve()
    where = "" if same or not file else _relative(file) + " "
    key = f"{where}line {line}" if line else (where.strip() or "inventory")
    text = _source_line(file, line)
    return Problem(None, key, text, message, fix)


def _is_ours(filename: str, inventory: Path) -> bool:
    """The inventory itself, or a file of this repository (not of its .venv)."""
    path = Path(filename).resolve()
    if path == inventory.resolve():
        return True
    return REPO_ROOT in path.parents and (REPO_ROOT / ".venv") not in path.parents


def _relative(file: str) -> str:
    try:
        return str(Path(file).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(file)


def _source_line(file: str | None, line: int | None) -> str | None:
    """The line of an inventory or group data file a problem is at (these hold no secrets)."""
    if not file or not line:
        return None
    try:
        lines = Path(file).read_text(errors="replace").splitlines()
    except OSError:
        return None
    return lines[line - 1].strip() if 0 < line <= len(lines) else None


def load_inventory_isolated(path: str) -> dict[str, dict]:
    """load_inventory in a child process: importing pyinfra_cli monkey-patches the whole
    interpreter for gevent, which breaks a process that already runs threads (testinfra)."""
    import json
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "validation", "--dump-data", path],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"cannot load inventory {path}: {result.stderr.strip()}")
    return json.loads(result.stdout)
