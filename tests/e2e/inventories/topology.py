"""inventories/lab.py as the operator keeps it on day 2: VMs that joined (lab.yaml's joining_vms)
added to their groups, and each group's primary where the live topology has it. Not an inventory
itself: tests/e2e/topology.py writes small inventory files that call `groups()`."""

import runpy
import sys
from pathlib import Path

_repo = Path(__file__).resolve().parents[3]
if str(_repo) not in sys.path:
    sys.path.insert(0, str(_repo))

from lab.definition import load  # noqa: E402

LAB = runpy.run_path(str(_repo / "inventories" / "lab.py"))


def with_primary(hosts: list, primary: str) -> list:
    """One group's hosts with `primary` its primary and every other member its replica."""
    out = []
    for name, data in hosts:
        data = {k: v for k, v in data.items() if k != "primary"}
        if name == primary:
            data["role"] = "primary"
        else:
            data.update(role="replica", primary=primary)
        out.append((name, data))
    return out


def groups(primaries: dict[str, str], joined: list[str]) -> dict[str, list]:
    """{"mariadb": [...], "postgresql": [...], "monitoring": [...]} with `joined` added and each
    group named in `primaries` ({"mariadb": "db2"}) led by that host."""
    lab = load()
    out = {"mariadb": list(LAB["mariadb"]), "postgresql": list(LAB["postgresql"])}
    for name in joined:
        vm = lab.joining[name]
        assert vm.engine == "mariadb", "only MariaDB VMs join the lab (lab.yaml joining_vms)"
        out["mariadb"].append(LAB["_mariadb_host"](vm))
    for group, primary in primaries.items():
        out[group] = with_primary(out[group], primary)
    out["monitoring"] = LAB["monitoring"]
    return out
