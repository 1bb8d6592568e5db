"""The PostgreSQL switchover, run by day2/switchover.py:
  1. the new primary, still a standby, gets a physical slot for every host that will follow it
     (a slot made before the promotion keeps every WAL record they will ask for);
  2. every follower-to-be has the replication password file a standby uses;
  3. the old primary shuts down cleanly (fast shutdown: its shutdown checkpoint goes to every
     connected standby) — writes are refused from here;
  4. the new primary is checked to have replayed that shutdown checkpoint, and is promoted
     (operations.postgresql_topology.promote) — writes are taken again;
  5. the other standbys re-point and reload; the old primary gets standby.signal and the new
     primary_conninfo and starts as a standby, without a rewind, and drops the slots it held;
  6. every follower is checked to stream from the new primary.
The configuration files do not depend on the role (pg_hba.conf lets every member stream from
every other), so a converge with the updated inventory changes nothing.
"""

from __future__ import annotations

from pyinfra import inventory
from pyinfra.api.operation import OperationMeta

from day2 import kit, switchover
from facts.postgresql import PostgresqlLiveRole, PostgresqlStandbys
from model.hostdata import HostConfig
from model.problems import Problem
from operations import common, postgresql as pg, postgresql_topology, runtime
from roles import engine, postgresql, render


def candidate_problems(
    new_primary: str,
    live: dict | None,
    standbys: dict | None,
    max_lag: int,
    primary_address: str,
) -> list[Problem]:
    """What the candidate's live role and the primary's view of its walsender say against
    switching to it (pure)."""
    if live is None:
        return []  # reported as a host that does not answer
    if not live["in_recovery"] or live["sender"] != primary_address:
        found = "not in recovery" if not live["in_recovery"] else f"streams from {live['sender'] or 'nobody'}"
        return [
            Problem(
                new_primary, "new_primary", new_primary, f"{found}, not a standby of {primary_address}", ""
            )
        ]
    walsender = (standbys or {}).get(new_primary)
    if walsender is None or walsender["state"] != "streaming":
        found = walsender["state"] if walsender else "no walsender"
        return [
            Problem(
                new_primary,
                "new_primary",
                new_primary,
                f"does not stream from the primary ({found})",
                "repair replication first",
            )
        ]
    return switchover.lag_problem(new_primary, round(walsender["replay_lag"], 1), max_lag)


def live_problems(group: engine.Group, new_primary: str, max_lag: int) -> list[Problem]:
    """Every host of the group answers; the new primary streams from the primary, caught up."""
    members = [inventory.get_host(m.name) for m in group.members]
    roles = runtime.on_every_host(members, lambda h: h.get_fact(PostgresqlLiveRole))
    by_name = dict(zip([m.name for m in group.members], roles, strict=True))
    found = [
        Problem(name, "host", name, "PostgreSQL does not answer", "start it first")
        for name, live in by_name.items()
        if live is None
    ]
    primary = next(m for m in group.members if m.role == "primary")
    standbys = inventory.get_host(primary.name).get_fact(PostgresqlStandbys)
    return found + candidate_problems(
        new_primary, by_name[new_primary], standbys, max_lag, primary.replication_address
    )


def steps(cfg: HostConfig, group: engine.Group, new_primary: str) -> None:
    old = next(m for m in group.members if m.role == "primary")
    is_old, is_new = cfg.name == old.name, cfg.name == new_primary
    followers = [m for m in group.members if m.name != new_primary]
    paths = render.postgresql_paths(cfg)

    for follower in followers:
        engine.step(
            is_new,
            "not the new primary",
            pg.replication_slot,
            name=f"Replication slot for {follower.name} on {new_primary}",
            slot=pg.slot_name(follower.name),
        )
    engine.step(
        not is_new,
        "the new primary",
        common.secret_file,
        name=f"{postgresql.PASSFILE} (replication password, 0600)",
        path=postgresql.PASSFILE,
        content=postgresql.passfile_content() if not is_new else None,
        user="postgres",
        group="postgres",
        mode="600",
    )
    stop = engine.step(
        is_old,
        "not the old primary",
        postgresql_topology.shut_down,
        name=f"{old.name} shuts down cleanly (its shutdown checkpoint goes to the standbys)",
        version=postgresql.cluster(cfg).version,
        cluster_name=postgresql.CLUSTER,
        data_directory=paths["data_directory"],
    )
    promote = engine.step(
        is_new,
        "not the new primary",
        postgresql_topology.promote,
        name=f"{new_primary} replays {old.name}'s shutdown checkpoint and is promoted",
        old_primary=old.name,
        old_data_directory=render.postgresql_paths(old)["data_directory"],
        version=postgresql.cluster(cfg).version,
    )
    last = follow_new_primary(
        cfg, group, new_primary, stale_slots=[pg.slot_name(m.name) for m in group.members]
    )
    steps = {"stop": stop, "promote": promote, "last": last}
    kit.report_once("switchover report", switchover.Report(steps, group, new_primary, refusing="shut down"))


def follow_new_primary(
    cfg: HostConfig, group: engine.Group, new_primary: str, stale_slots: list[str]
) -> OperationMeta:
    """Once `new_primary` is promoted (a switchover or a failover): every other member of `group`
    streams from it (operations.postgresql_topology.follow, dropping `stale_slots` it
    holds) and is checked to. Returns the last step."""
    is_new = cfg.name == new_primary
    new = next(m for m in group.members if m.name == new_primary)
    paths = render.postgresql_paths(cfg)
    engine.step(
        not is_new,
        "the new primary",
        postgresql_topology.follow,
        name=f"Stream from {new_primary} ({new.replication_address})",
        version=postgresql.cluster(cfg).version,
        cluster_name=postgresql.CLUSTER,
        data_directory=paths["data_directory"],
        primary_address=new.replication_address,
        slot=pg.slot_name(cfg.name),
        application_name=cfg.name,
        passfile=postgresql.PASSFILE,
        port=render.PG_PORT,
        replication_user=postgresql.REPLICATION_USER,
        stale_slots=stale_slots,
    )
    return engine.step(
        not is_new,
        "the new primary",
        postgresql_topology.streams_from,
        name=f"Streams from {new_primary}",
        primary_address=new.replication_address,
    )
