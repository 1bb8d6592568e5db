"""The restore runbook's dispatcher (runbooks/restore.py): a PostgreSQL host is restored by
day2/restore.py (pgBackRest), a MariaDB one by day2/restore_mariadb.py (ZFS copies and binlogs),
which builds on day2/restore.py's checks."""

from __future__ import annotations

from pyinfra import inventory

from day2 import restore, restore_mariadb
from model.hostdata import HostConfig


def run(args: dict) -> None:
    """The restore's steps on the host restored; nothing on the other hosts (MariaDB: on it and
    the backup host). `args`: kit.start(restore.RUNBOOK)."""
    configs = {h.name: HostConfig.from_data(h.name, h.data) for h in inventory}
    params = {p.name: args.get(p.name) for p in restore.RUNBOOK.parameters}
    target = configs.get(params["host"] or "")
    if target is not None and target.engine == "mariadb":
        restore_mariadb.run(configs, params)
        return
    restore.run(configs, params)
