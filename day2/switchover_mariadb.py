"""The MariaDB switchover (GTID), run by day2/switchover.py:
1. the old primary stops taking writes (``read_only = ON``, live);
2. the new primary waits until it has applied the old primary's last GTID, stops replicating
   and takes writes (operations.mariadb_topology.promote);
3. it gets the replication account of every host that will follow it;
4. the old primary and the other replicas follow it (``follow``);
5. every host's role file (91-dbzfs-role.cnf) is rewritten for its new role, so that a restart
   keeps the new roles and a converge with the updated inventory changes nothing;
6. every follower is checked to replicate (``mariadb_topology.replicates_from``: a check, which
   neither seeds nor re-points, and under --dry plans the check rather than judging facts read
   before the re-pointing).
"""

from __future__ import annotations

from pyinfra import inventory
from pyinfra.api.operation import OperationMeta

from day2 import kit, switchover
from facts.mariadb import MariadbReplicaStatus
from model import secrets
from model.hostdata import HostConfig
from model.problems import Problem
from operations import mariadb as mariadb_ops, mariadb_topology, runtime
from roles import engine, mariadb, render


def candidate_problems(
    new_primary: str, status: dict | None, max_lag: int, primary_address: str
) -> list[Problem]:
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
    else:
        problems += switchover.lag_problem(new_primary, status.get("Seconds_Behind_Master"), max_lag)
    return problems


def live_problems(group: engine.Group, new_primary: str, max_lag: int) -> list[Problem]:
    """Every host of the group answers; the new primary replicates, caught up (reads the hosts)."""
    members = [inventory.get_host(m.name) for m in group.members]
    statuses = runtime.on_every_host(members, lambda h: h.get_fact(MariadbReplicaStatus))
    by_name = dict(zip([m.name for m in group.members], statuses, strict=True))
    found = [
        Problem(name, "host", name, "MariaDB does not answer", "start it first")
        for name, status in by_name.items()
        if status is None
    ]
    primary = next(m for m in group.members if m.role == "primary")
    return found + candidate_problems(new_primary, by_name[new_primary], max_lag, primary.replication_address)


def steps(cfg: HostConfig, group: engine.Group, new_primary: str) -> None:
    old = next(m for m in group.members if m.role == "primary")
    repl_user = render.REPLICATION_USER["mariadb"]
    password = engine.secret(secrets.REPLICATION_PASSWORD)
    is_old, is_new = cfg.name == old.name, cfg.name == new_primary

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
    last = follow_new_primary(cfg, group, new_primary)
    steps = {"stop": stop, "promote": promote, "last": last}
    kit.report_once("switchover report", switchover.Report(steps, group, new_primary, refusing="read-only"))


def follow_new_primary(cfg: HostConfig, group: engine.Group, new_primary: str) -> OperationMeta:
    """Once `new_primary` takes writes (a switchover or a failover): it holds the replication
    account of every other member of `group`, they follow it, every host's role file says its
    new role, and every follower is checked to replicate. Returns the last step."""
    repl_user = render.REPLICATION_USER["mariadb"]
    password = engine.secret(secrets.REPLICATION_PASSWORD)
    is_new = cfg.name == new_primary
    new = next(m for m in group.members if m.name == new_primary)
    for follower in [m for m in group.members if m.name != new_primary]:
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
    mariadb.role_config(switchover.new_roles(group, new_primary)[cfg.name])
    # A check that never seeds: under --dry the facts predate the re-pointing above
    # (mariadb_topology.replicates_from; the converge's mariadb.replica would plan a dump-seed of
    # the old primary, or refuse one that holds a database the inventory does not declare).
    return engine.step(
        not is_new,
        "the new primary",
        mariadb_topology.replicates_from,
        name=f"Replicates from {new_primary}",
        primary_address=new.replication_address,
        port=render.MARIADB_PORT,
    )
