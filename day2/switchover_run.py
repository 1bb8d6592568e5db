"""The switchover runbook's dispatcher (runbooks/switchover.py): the group of `new_primary` checked,
then its engine's procedure (day2/switchover_mariadb.py, day2/switchover_postgresql.py), both built
on day2/switchover.py."""

from __future__ import annotations

from pyinfra import host, inventory
from pyinfra.api.exceptions import PyinfraError

from day2 import switchover, switchover_mariadb, switchover_postgresql
from model.hostdata import HostConfig
from model.problems import Problem, format_problems
from roles import engine, snapshots


def run() -> None:
    """The switchover's steps for this host (every host of the group passes every step; hosts of
    other groups take no part)."""
    cfg = engine.host_config()
    new_primary = host.data.get("new_primary")
    configs = {h.name: HostConfig.from_data(h.name, h.data) for h in inventory}
    if new_primary not in configs:
        problem = Problem(None, "new_primary", new_primary, "not a host of the inventory", "")
        if not new_primary:
            problem = Problem(None, "new_primary", None, "missing", "run with --data new_primary=HOST")
        raise PyinfraError("\n" + format_problems([problem], what="before the switchover"))
    target = configs[new_primary]
    if (cfg.engine, cfg.cluster) != (target.engine, target.cluster):
        return
    group = engine.group(cfg)
    max_lag = switchover.parse_max_lag(host.data.get("max_lag"))
    procedure = {"mariadb": switchover_mariadb, "postgresql": switchover_postgresql}.get(cfg.engine)
    if procedure is None:
        switchover.checked(cfg, group, new_primary, list)
        return
    switchover.checked(cfg, group, new_primary, lambda: procedure.live_problems(group, new_primary, max_lag))
    procedure.steps(cfg, group, new_primary)
    snapshots.follow_role(cfg)
