"""inventories/lab.py as the operator updates it after the MariaDB switchover to db2 (the change
runbooks/switchover.py prints): db2 the primary, db1 its replica; PostgreSQL as it was."""

import runpy
from pathlib import Path

_swap = runpy.run_path(str(Path(__file__).resolve().parent / "swapped.py"))

mariadb = _swap["swapped"](_swap["LAB"]["mariadb"])
postgresql = _swap["LAB"]["postgresql"]
monitoring = _swap["LAB"]["monitoring"]
