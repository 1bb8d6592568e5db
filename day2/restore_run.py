"""The restore runbook's dispatcher (runbooks/restore.py): a PostgreSQL target is restored by
day2/restore.py (pgBackRest), a MariaDB one by day2/restore_mariadb.py (ZFS copies and binlogs),
which builds on day2/restore.py's checks."""

from __future__ import annotations

from pyinfra import host, inventory

from day2 import restore, restore_mariadb
from model.hostdata import HostConfig


def run() -> None:
    """The restore's steps on the target; nothing on the other hosts (MariaDB: on the target and
    the backup host)."""
    configs = {h.name: HostConfig.from_data(h.name, h.data) for h in inventory}
    params = {k: host.data.get(k) for k in restore.PARAMETERS}
    target = configs.get(params["target"] or "")
    if target is not None and target.engine == "mariadb":
        restore_mariadb.run(configs, params)
        return
    restore.run(configs, params)
