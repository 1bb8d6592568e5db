"""inventories/lab.py with a group's primary and replica swapped, for the inventories beside it."""

import runpy
from pathlib import Path

LAB = runpy.run_path(str(Path(__file__).resolve().parents[3] / "inventories" / "lab.py"))


def swapped(hosts: list) -> list:
    """The hosts of one group, the primary and its (first) replica trading roles."""
    primary = next(name for name, data in hosts if data["role"] == "primary")
    replica = next(name for name, data in hosts if data.get("primary") == primary)
    out = []
    for name, data in hosts:
        data = {k: v for k, v in data.items() if k != "primary"}
        if name == primary:
            data.update(role="replica", primary=replica)
        elif name == replica:
            data["role"] = "primary"
        else:
            data["primary"] = replica
        out.append((name, data))
    return out
