"""The switchover runbook's dispatcher (runbooks/switchover.py): the group of `new_primary` checked,
then its engine's procedure (day2/switchover_mariadb.py, day2/switchover_postgresql.py), both built
on day2/switchover.py."""

from __future__ import annotations

from pyinfra import inventory

from day2 import kit, switchover, switchover_mariadb, switchover_postgresql
from model.hostdata import HostConfig
from model.problems import Problem
from roles import engine, snapshots


def run(args: dict) -> None:
    """The switchover's steps for this host (every host of the group passes every step; hosts of
    other groups take no part). The pre-checks run first, whichever host's deploy gets there:
    a --limit that leaves the group out is refused, not a run that plans nothing.
    `args`: kit.start(switchover.RUNBOOK)."""
    cfg = engine.host_config()
    new_primary = args.get("new_primary")
    configs = {h.name: HostConfig.from_data(h.name, h.data) for h in inventory}
    if new_primary not in configs:
        problem = Problem(None, "new_primary", new_primary, "not a host of the inventory", "")
        if not new_primary:
            problem = Problem(None, "new_primary", None, "missing", "run with --data new_primary=HOST")
        kit.refuse([problem], switchover.RUNBOOK.what)
    target = configs[new_primary]
    target_group = engine.group(target)
    max_lag = switchover.parse_max_lag(args.get("max_lag"))
    procedure = {"mariadb": switchover_mariadb, "postgresql": switchover_postgresql}.get(target.engine)
    live = list if procedure is None else lambda: procedure.live_problems(target_group, new_primary, max_lag)
    switchover.checked(target, target_group, new_primary, live)
    if (cfg.engine, cfg.cluster) != (target.engine, target.cluster):
        return
    procedure.steps(cfg, engine.group(cfg), new_primary)
    snapshots.follow_role(cfg)
