"""A planned switchover (runbooks/switchover.py): the primary of a replication group moves to one
of its replicas, with no acknowledged write lost, and the time writes were refused measured.

MariaDB (GTID):
  1. the old primary stops taking writes (``read_only = ON``, live);
  2. the new primary waits until it has applied the old primary's last GTID, stops replicating
     and takes writes (roles.operations.mariadb_topology.promote);
  3. it gets the replication account of every host that will follow it;
  4. the old primary and the other replicas follow it (``follow``);
  5. every host's role file (91-dbzfs-role.cnf) is rewritten for its new role, so that a restart
     keeps the new roles and a converge with the updated inventory changes nothing;
  6. every follower is checked to replicate (``mariadb.replica``, which never re-seeds).

Pre-checks, before any host is changed: the inventory matches the live topology (roles/topology),
`new_primary` names a replica of the group's primary, every host of the group answers and is
converged in this run (no --limit that leaves one out), and the new primary replicates with both
threads running and at most `max_lag` seconds behind.

The report: how long writes were refused (from the old primary's read_only to the new primary
taking writes, measured on the machine that runs pyinfra) and the inventory change to make.
"""

from __future__ import annotations

import time
from dataclasses import replace

from pyinfra import host, inventory, logger, state
from pyinfra.api import BaseStateCallback
from pyinfra.api.exceptions import PyinfraError

from roles import engine, mariadb, preflight, render, secrets
from roles.facts.mariadb import MariadbReplicaStatus
from roles.hostdata import HostConfig
from roles.operations import mariadb as mariadb_ops, mariadb_topology
from roles.validation import Problem, format_problems

PARAMETERS = ("new_primary", "max_lag")
DEFAULT_MAX_LAG = 30  # seconds a candidate may be behind before the switchover refuses


def parse_max_lag(value: object) -> int:
    """The `max_lag` runbook argument (seconds, default DEFAULT_MAX_LAG); stops the run, naming
    it, on anything but a whole number of seconds."""
    if value is None or value == "":
        return DEFAULT_MAX_LAG
    if str(value).isdigit():
        return int(str(value))
    problem = Problem(None, "max_lag", value, "not a whole number of seconds", "e.g. --data max_lag=30")
    raise PyinfraError("\n" + format_problems([problem], what="before the switchover"))


def new_roles(group: engine.Group, new_primary: str) -> dict[str, HostConfig]:
    """Every host of the group with the role it has after the switchover."""
    out = {}
    for member in group.members:
        if member.name == new_primary:
            out[member.name] = replace(member, role="primary", primary=None)
        else:
            out[member.name] = replace(member, role="replica", primary=new_primary)
    return out


def inventory_change(group: engine.Group, new_primary: str) -> list[str]:
    """The lines to change in the inventory, one per host whose role or primary changes."""
    lines = []
    for name, after in new_roles(group, new_primary).items():
        before = next(m for m in group.members if m.name == name)
        if (before.role, before.primary) == (after.role, after.primary):
            continue
        if after.role == "primary":
            lines.append(f"{name}: role 'primary' (and no 'primary' key)")
        else:
            lines.append(f"{name}: role 'replica', primary {after.primary!r}")
    return lines


def plan_problems(
    cfg: HostConfig, group: engine.Group, new_primary: str | None, active: set[str]
) -> list[Problem]:
    """What stops the switchover before anything is read from the hosts (pure)."""
    if not new_primary:
        return [Problem(None, "new_primary", None, "missing", "run with --data new_primary=HOST")]
    names = {m.name: m for m in group.members}
    if new_primary not in names:
        return [
            Problem(
                None,
                "new_primary",
                new_primary,
                f"not a host of {cfg.name}'s replication group ({', '.join(names)})",
                "name a replica of the group's primary",
            )
        ]
    candidate = names[new_primary]
    if cfg.engine != "mariadb":
        return [Problem(cfg.name, "engine", cfg.engine, "no switchover runbook for this engine yet", "")]
    problems = []
    if (
        candidate.role != "replica"
        or candidate.primary not in names
        or names[candidate.primary].role != "primary"
    ):
        problems.append(
            Problem(
                new_primary, "role", candidate.role, "the new primary must be a replica of the primary", ""
            )
        )
    missing = sorted(set(names) - active)
    if missing:
        problems.append(
            Problem(
                None,
                "--limit",
                sorted(active),
                f"leaves out {', '.join(missing)} of the replication group",
                "run without --limit, or limit to the whole group",
            )
        )
    return problems


def live_problems(new_primary: str, status: dict | None, max_lag: int, primary_address: str) -> list[Problem]:
    """What the new primary's live replication status says against switching to it (pure)."""
    if status is None:
        return [Problem(new_primary, "new_primary", new_primary, "MariaDB does not answer", "start it first")]
    problems = []
    if status.get("Master_Host") != primary_address:
        problems.append(
            Problem(
                new_primary,
                "new_primary",
                new_primary,
                f"replicates from {status.get('Master_Host') or 'nobody'}, "
                f"not from the primary {primary_address}",
                "",
            )
        )
    threads = (status.get("Slave_IO_Running"), status.get("Slave_SQL_Running"))
    if threads != ("Yes", "Yes"):
        error = status.get("Last_SQL_Error") or status.get("Last_IO_Error") or "not running"
        problems.append(
            Problem(
                new_primary,
                "new_primary",
                new_primary,
                f"replication threads IO {threads[0]}, SQL {threads[1]}: {error}",
                "repair replication first",
            )
        )
    lag = status.get("Seconds_Behind_Master")
    if threads == ("Yes", "Yes") and (not str(lag).isdigit() or int(lag) > max_lag):
        problems.append(
            Problem(
                new_primary,
                "max_lag",
                max_lag,
                f"the new primary is {lag} s behind",
                "wait until it has caught up, or raise max_lag",
            )
        )
    return problems


class Report(BaseStateCallback):
    """Times the switchover from the machine that runs pyinfra and prints the report at its end."""

    def __init__(
        self, stop_hash: str, promote_hash: str, last_hash: str, group: engine.Group, new_primary: str
    ) -> None:
        self.stop_hash, self.promote_hash, self.last_hash = stop_hash, promote_hash, last_hash
        self.group, self.new_primary = group, new_primary
        self.times: dict[str, float] = {}

    def operation_start(self, state, op_hash) -> None:  # noqa: ANN001 - pyinfra's callback signature
        if op_hash == self.stop_hash:
            self.times["writes stopped"] = time.monotonic()

    def operation_end(self, state, op_hash) -> None:  # noqa: ANN001 - pyinfra's callback signature
        if op_hash == self.promote_hash:
            self.times["writes taken"] = time.monotonic()
        if op_hash == self.last_hash and len(self.times) == 2:
            refused = self.times["writes taken"] - self.times["writes stopped"]
            old = self.group.primary.name if self.group.primary else "?"
            lines = [
                f"==> switchover done: {self.new_primary} is the primary of {self.group.me.cluster} "
                f"({self.group.me.engine}), {old} and the other hosts follow it",
                f"    writes were refused for {refused:.1f} s "
                f"({old} read-only until {self.new_primary} took writes)",
                "    update the inventory (a converge refuses until it matches):",
                *[f"      {line}" for line in inventory_change(self.group, self.new_primary)],
            ]
            logger.info("\n".join(lines))


def _checked(cfg: HostConfig, group: engine.Group, new_primary: str | None, max_lag: int) -> None:
    def compute() -> list[Problem]:
        active = {h.name for h in inventory.get_active_hosts()}
        problems = plan_problems(cfg, group, new_primary, active)
        if problems:
            return problems
        members = [inventory.get_host(m.name) for m in group.members]
        statuses = preflight.on_every_host(members, lambda h: h.get_fact(MariadbReplicaStatus))
        by_name = dict(zip([m.name for m in group.members], statuses, strict=True))
        found = [
            Problem(name, "host", name, "MariaDB does not answer", "start it first")
            for name, status in by_name.items()
            if status is None
        ]
        primary = next(m for m in group.members if m.role == "primary")
        return found + live_problems(new_primary, by_name[new_primary], max_lag, primary.replication_address)

    problems = preflight.once_per_run(f"switchover {cfg.engine} {cfg.cluster}", compute)
    if problems:
        raise PyinfraError("\n" + format_problems(problems, what="before the switchover"))


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
    max_lag = parse_max_lag(host.data.get("max_lag"))
    _checked(cfg, group, new_primary, max_lag)
    old = next(m for m in group.members if m.role == "primary")
    after = new_roles(group, new_primary)
    me_after = after[cfg.name]
    repl_user = render.REPLICATION_USER["mariadb"]
    password = engine.secret(secrets.REPLICATION_PASSWORD)
    is_old, is_new = cfg.name == old.name, cfg.name == new_primary
    followers = [m for m in group.members if m.name != new_primary]
    new = next(m for m in group.members if m.name == new_primary)

    stop = engine.step(
        is_old, "not the old primary", mariadb_ops.read_only, name=f"{old.name} stops taking writes", on=True
    )
    promote = engine.step(
        is_new,
        "not the new primary",
        mariadb_topology.promote,
        name=f"{new_primary} applies {old.name}'s last transaction and takes writes",
        old_primary_address=old.replication_address,
        replication_user=repl_user,
        password=password,
        port=render.MARIADB_PORT,
    )
    for follower in followers:
        engine.step(
            is_new,
            "not the new primary",
            mariadb_ops.user,
            name=f"{repl_user}@{follower.replication_address} on {new_primary} for {follower.name}",
            user=repl_user,
            user_host=follower.replication_address,
            password=password,
        )
        engine.step(
            is_new,
            "not the new primary",
            mariadb_ops.grants,
            name=f"Privileges of {repl_user}@{follower.replication_address} on {new_primary}",
            user=repl_user,
            user_host=follower.replication_address,
            privileges=mariadb_ops.REPLICATION_PRIVILEGES,
        )
    # The replication account on the new primary, as every follower uses it.
    to_new = {
        "primary_address": new.replication_address,
        "replication_user": repl_user,
        "password": password,
        "port": render.MARIADB_PORT,
    }
    engine.step(
        not is_new,
        "the new primary",
        mariadb_topology.follow,
        name=f"Follow {new_primary} ({new.replication_address})",
        **to_new,
    )
    mariadb.role_config(me_after)
    last = engine.step(
        not is_new,
        "the new primary",
        mariadb_ops.replica,
        name=f"Replicates from {new_primary}",
        **to_new,
    )
    key = (id(state), "switchover report")
    if key not in _reported:
        _reported.add(key)
        state.add_callback_handler(Report(stop._hash, promote._hash, last._hash, group, new_primary))


_reported: set[tuple[int, str]] = set()
