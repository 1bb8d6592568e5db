"""inventories/lab.py with each engine's primary and replica swapped: what an inventory looks like
to a converge after a switchover that the inventory does not show yet (the live servers still run
the lab's topology)."""

import runpy
from pathlib import Path

_lab = runpy.run_path(str(Path(__file__).resolve().parents[3] / "inventories" / "lab.py"))


def _swapped(hosts: list) -> list:
    primary = next(name for name, data in hosts if data["role"] == "primary")
    replica = next(name for name, data in hosts if data.get("primary") == primary)
    out = []
    for name, data in hosts:
        data = {k: v for k, v in data.items() if k != "primary"}
        if name == primary:
            data.update(role="replica", primary=replica)
        elif name == replica:
            data["role"] = "primary"
        out.append((name, data))
    return out


mariadb = _swapped(_lab["mariadb"])
postgresql = _swapped(_lab["postgresql"])
monitoring = _lab["monitoring"]
