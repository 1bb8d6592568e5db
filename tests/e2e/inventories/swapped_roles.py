"""inventories/lab.py with each engine's primary and replica swapped: what an inventory looks like
to a converge after a switchover that the inventory does not show yet (the live servers still run
the lab's topology)."""

import runpy
from pathlib import Path

_swap = runpy.run_path(str(Path(__file__).resolve().parent / "swapped.py"))

mariadb = _swap["swapped"](_swap["LAB"]["mariadb"])
postgresql = _swap["swapped"](_swap["LAB"]["postgresql"])
monitoring = _swap["LAB"]["monitoring"]
