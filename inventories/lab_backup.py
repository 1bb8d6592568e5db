"""The lab plus its backup host (lab/lab.yaml `backup_vms`) as a pyinfra inventory:
`pyinfra inventories/lab_backup.py deploy.py`.

inventories/lab.py's groups `mariadb`, `postgresql` and `monitoring` unchanged, and `backup`: the
backup VMs (role "backup", no engine), which pull the database VMs' snapshots (roles/backup.py).
They are not booted by `python -m lab up`: `./dbzfs lab up backup1` (or the backup e2e test) first.
Connection data as in inventories/lab.py; importable without the lab running.
"""

import runpy
import sys
from pathlib import Path

_repo = Path(__file__).resolve().parent.parent
if str(_repo) not in sys.path:
    sys.path.insert(0, str(_repo))

_LAB = runpy.run_path(str(_repo / "inventories" / "lab.py"))

mariadb = _LAB["mariadb"]
postgresql = _LAB["postgresql"]
monitoring = _LAB["monitoring"]
backup = [_LAB["_backup_host"](vm) for vm in _LAB["_lab"].backup.values()]
