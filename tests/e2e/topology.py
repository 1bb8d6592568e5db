"""Inventory files for the lab's live topology on day 2 (tests/e2e/inventories/topology.py): the
joined VMs in their groups and each group's primary where a runbook moved it, as the operator
updates inventories/lab.py after a switchover, a failover or a new replica."""

from pathlib import Path

from lab.definition import STATE

from tests.e2e.conftest import REPO

TEMPLATE = '''"""Written by tests/e2e/topology.py: {what}."""
import runpy

_groups = runpy.run_path({module!r})["groups"]({primaries!r}, {joined!r})
mariadb = _groups["mariadb"]
postgresql = _groups["postgresql"]
monitoring = _groups["monitoring"]
'''


def inventory(mariadb: str = "db1", postgresql: str = "pg1", joined: tuple[str, ...] = ()) -> Path:
    """The path of an inventory with these primaries and joined VMs (written once, kept in .lab)."""
    primaries = {"mariadb": mariadb, "postgresql": postgresql}
    name = "-".join([mariadb, postgresql, *joined])
    path = STATE / "inventories" / f"{name.replace('-', '_')}.py"
    what = f"primaries {mariadb} and {postgresql}" + (f", {', '.join(joined)} joined" if joined else "")
    text = TEMPLATE.format(
        what=what,
        module=str(REPO / "tests" / "e2e" / "inventories" / "topology.py"),
        primaries=primaries,
        joined=list(joined),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path
