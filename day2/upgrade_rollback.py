"""A node taken back to its release upgrade's rollback point (runbooks/upgrade_rollback.py): its
engine's data and its system as they were just before the upgrade, booted into the old release,
and rejoined to its group as the replica it was.

What may be rolled back is decided by where the group's writes went since the snapshot: a node
that is the group's primary now (declared, or writable live) accepted writes after its snapshot,
and rolling it back would lose them: refused (switch it over first: runbooks/switchover.py). A
replica accepted none of its own: what it held after the snapshot came from its primary, and it
fetches it again once it replicates (MariaDB from its GTID position, PostgreSQL from its slot or
the archive). When the primary no longer has what the replica needs (its binary logs or WAL were
purged since), the replica does not catch up: the runbook says so, and the way back is a reseed
(runbooks/seed.py). A PostgreSQL standby is refused once its primary runs the new major version:
its old cluster cannot stream from it (reseed it instead); a MariaDB replica, once its primary runs
the new release (an older replica of a newer primary is not supported): replicas are rolled back
before their primary moves.

The host's data says the old release again (debian_release "12", no postgresql_version): the
rollback runs with the data the host will have, as the release step does (its host may run the
release after its data's).

Steps, on that host only: its server stops; the engine's datasets are rolled back and the system's
copy written back (operations/upgrade.py: restore_script); the reboot (reboot_method: "kexec"
boots the restored /boot's kernel); after it, the old release, the pool, the server running. The
snapshots stay, renamed aside (`@...-rolled-back-<time>`): the node can be upgraded again, and that
upgrade takes its own. The group's primary must take part in the run: its live release (and
PostgreSQL version) is read, as the inventory says the old one until the whole group is done.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pyinfra import host, inventory
from pyinfra.facts.server import LinuxDistribution
from pyinfra.operations import server

import engines
from day2 import kit
from facts.mariadb import MariadbLiveRole
from facts.postgresql import PostgresqlLiveRole
from facts.upgrade import ScriptOutput
from model import releases
from model.hostdata import HostConfig
from model.problems import Problem
from operations import seeding as seeding_ops, upgrade as ops
from roles import engine, topology

RUNBOOK = kit.Runbook(
    "runbooks/upgrade_rollback.py",
    "the rollback",
    (
        kit.Parameter(
            "host",
            "the replica to take back to its rollback point (its data says the old release again)",
            required=True,
            example="db2",
            host=True,
        ),
    ),
    moves_release=True,
)


def problems(
    cfg: HostConfig,
    live: dict | None,
    running: releases.Release | None,
    snapshots: set[str],
    snapshot: str,
    primary_version: str | None,
    primary_release: str | None = None,
) -> list[Problem]:
    """Why the node must not be rolled back (pure; see the module's docstring)."""
    found = []
    if cfg.role == "primary" or (live is not None and live.get("writable")):
        found.append(
            Problem(
                cfg.name,
                "role",
                cfg.role,
                "the group's primary: rolling it back loses the writes it accepted since its snapshot",
                "switch the group over to a replica first (runbooks/switchover.py)",
            )
        )
    new = releases.following(cfg.release)
    if running not in (cfg.release, new):
        found.append(
            Problem(
                cfg.name,
                "debian_release",
                cfg.debian_release,
                f"the host runs {running.label if running else 'another system'}",
                "the rollback takes a host back from the release after its data's",
            )
        )
    missing = sorted(
        d
        for d in (
            f"{cfg.dataset_name(cfg.parent_dataset)}@{snapshot}",
            f"{cfg.pool.name}/{ops.SYSTEM_DATASET}@{snapshot}",
        )
        if d not in snapshots
    )
    if missing:
        found.append(
            Problem(
                cfg.name,
                "snapshot",
                ", ".join(missing),
                "no rollback point (the release step takes it)",
                "reseed the node instead (runbooks/seed.py), or reinstall it",
            )
        )
    if cfg.engine == "mariadb" and primary_release and int(primary_release) > int(cfg.debian_release):
        found.append(
            Problem(
                cfg.name,
                "debian_release",
                cfg.debian_release,
                f"its primary runs Debian {primary_release}: MariaDB {cfg.server_version} would "
                "replicate from a newer server, which MariaDB does not support",
                "roll back replicas before their primary moves, or reseed this one (runbooks/seed.py)",
            )
        )
    if cfg.engine == "postgresql" and primary_version and primary_version != cfg.server_version:
        found.append(
            Problem(
                cfg.name,
                "postgresql_version",
                cfg.server_version,
                f"its primary runs PostgreSQL {primary_version}: a standby of {cfg.server_version} "
                "cannot stream from it",
                "reseed it from the primary instead (runbooks/seed.py)",
            )
        )
    return found


PRIMARY_LIVE = (
    '. /etc/os-release; echo "release=$VERSION_ID"; '
    'pg_lsclusters -h 2>/dev/null | awk \'$4=="online" {print "postgresql=" $1}\'; echo end=1'
)


def primary_live(primary: HostConfig | None) -> tuple[str | None, str | None, list[Problem]]:
    """The release and (PostgreSQL) the major version the group's primary runs, asked of it (the
    inventory says the old release until the whole group is done): it must take part in the run."""
    if primary is None:
        return None, None, []
    if primary.name not in kit.active():
        return (
            None,
            None,
            kit.left_out([primary.name], kit.active(), why="the group's primary (its release is read)"),
        )
    lines = inventory.get_host(primary.name).get_fact(ScriptOutput, script=PRIMARY_LIVE)
    fields = dict(line.split("=", 1) for line in lines if "=" in line)
    return fields.get("release"), fields.get("postgresql"), []


def run(args: dict) -> None:
    if host.name != args["host"]:
        return
    cfg = engine.host_config()
    configs = {h.name: HostConfig.from_data(h.name, h.data) for h in inventory}
    newer = releases.following(cfg.release)
    snapshot = ops.snapshot_name(cfg.release.codename, newer.codename if newer else "none")
    fact = MariadbLiveRole if cfg.engine == "mariadb" else PostgresqlLiveRole
    live = topology.live_role(cfg.engine, host.get_fact(fact))
    listed = host.get_fact(ScriptOutput, script="zfs list -H -t snapshot -o name; echo end=1")
    running = releases.of_distribution(host.get_fact(LinuxDistribution))
    primary_release, primary_version, found = primary_live(configs.get(cfg.primary or ""))
    version = primary_version if cfg.engine == "postgresql" else None
    found += problems(cfg, live, running, set(listed), snapshot, version, primary_release)
    kit.refuse(found, RUNBOOK.what)
    unit = engines.of(cfg).service  # PostgreSQL: the cluster of the version it runs
    seeding_ops.server_stopped(name=f"{cfg.name}: stop its server", unit=unit)
    ops.restored(
        name=f"{cfg.name}: data and system back to @{snapshot}",
        engine_dataset=cfg.dataset_name(cfg.parent_dataset),
        pool=cfg.pool.name,
        snapshot=snapshot,
    )
    ops.rebooted(
        name=f"Reboot into {cfg.release.label} ({cfg.reboot_method})", method=cfg.reboot_method, always=True
    )
    server.shell(
        name=f"{cfg.name}: {cfg.release.label}, the pool ONLINE, {unit} running",
        commands=[ops.after_boot_script(cfg.release.major, cfg.pool.name, unit, "")],
    )
    suffix = f"-rolled-back-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    server.shell(
        name=f"{cfg.name}: the rollback point renamed aside (@{snapshot}{suffix})",
        commands=[ops.retired_script(cfg.dataset_name(cfg.parent_dataset), cfg.pool.name, snapshot, suffix)],
    )
