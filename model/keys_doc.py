"""docs/keys.md, the reference of every host data key, rendered from their definitions (model/keys.py).

    python -m model.keys_doc > docs/keys.md

tests/unit/test_keys.py fails when docs/keys.md is not this rendering.
"""

from __future__ import annotations

from model.keys import KEYS, NUMBER, SECTIONS, Key

COMMAND = "python -m model.keys_doc > docs/keys.md"

INTRO = f"""\
# Host data keys

Generated from the key definitions in `model/keys.py` by `{COMMAND}`
(from the repository's root, with `.venv/bin/python`); a unit test fails when this file differs,
so edit the definitions, never this file.

Every key is host data. `group_data/all.py` gives every host each key's default (it is made from
the same definitions); an inventory overrides any key per host, or a group_data file per group.
Keys are flat on purpose: pyinfra merges host data shallowly, so a nested mapping in an inventory
replaces the key's whole default. `./dbzfs validate INVENTORY` checks every key before any host is
touched, each problem naming the host, the key, the value and the fix; a misspelt key (close to
a known one, or with one of the toolkit's prefixes) is an error, not a silent default. "Read by"
names the code that reads the key (in `HostConfig`, model/hostdata.py, under the field given when
it differs from the key). Secrets (passwords, SSH keys) are never host data: [secrets.md](secrets.md).
"""


def _kind(k: Key) -> str:
    kind = "number (integer or float)" if k.kind == NUMBER else k.kind
    return f"{kind}, or None" if k.nullable else kind


def _py(value: object, indent: int = 0, column: int = 0) -> str:
    """A default as Python source, strings double-quoted; a mapping too long for one line (from
    `column` on) is laid out one item a line, as ruff formats it."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    if not isinstance(value, dict):
        return repr(value)
    flat = "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    if column + len(flat) <= 96 or not value:
        return flat
    pad = " " * (indent + 4)
    items = [f"{pad}{_py(k)}: {_py(v, indent + 4, len(pad) + len(_py(k)) + 2)}," for k, v in value.items()]
    return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"


def _short(value: object) -> str:
    text = _py(value)
    return f"`{text}`" if len(text) <= 40 else "(see below)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _example(text: str) -> str:
    return text if text.startswith(("the ", "a ")) else f"`{text}`"


def _key(k: Key) -> list[str]:
    lines = [f"### `{k.name}`", "", k.doc[0].upper() + k.doc[1:] + "."]
    if k.notes:
        lines += ["", k.notes]
    lines += ["", f"- Type: {_kind(k)}"]
    text = _py(k.default)
    if "\n" not in text:
        lines.append(f"- Default: `{text}`")
    else:
        lines += ["- Default:", "", "  ```python", *[f"  {line}" for line in text.splitlines()], "  ```", ""]
    if k.choices:
        lines.append(f"- Values: {', '.join(f'`{_py(c)}`' for c in k.choices)}")
    if k.required:
        lines.append(f"- Required: {k.required}")
    lines.append(f"- Example: {_example(k.example)}")
    field = f" (`HostConfig.{k.field}`)" if k.field != k.name else ""
    lines.append(f"- Read by: `{k.owner}`{field}")
    return lines


def markdown() -> str:
    lines = [INTRO, "| Key | Type | Default | What it does |", "|---|---|---|---|"]
    for k in KEYS.values():
        lines.append(
            f"| [`{k.name}`](#{k.name}) | {_kind(k)} | {_cell(_short(k.default))} | {_cell(k.doc)} |"
        )
    for section, (title, intro) in SECTIONS.items():
        keys = [k for k in KEYS.values() if k.section == section]
        lines += ["", f"## {title}"]
        if intro:
            lines += ["", intro]
        for k in keys:
            lines += ["", *_key(k)]
    while lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(markdown())
