"""inventories/lab.py as the operator updates it after the PostgreSQL switchover to pg2 (the
change runbooks/switchover.py prints): pg2 the primary, pg1 its standby; MariaDB as it was."""

import runpy
from pathlib import Path

_swap = runpy.run_path(str(Path(__file__).resolve().parent / "swapped.py"))

mariadb = _swap["LAB"]["mariadb"]
postgresql = _swap["swapped"](_swap["LAB"]["postgresql"])
monitoring = _swap["LAB"]["monitoring"]
