"""The snapshots role: consistent ZFS snapshots of the engine's data and log datasets, kept by a
retention policy per engine (snapshot_on, snapshot_retention: model/keys.py, docs/keys.md).

sanoid (Debian's package) prunes; it takes none itself. Our dbzfs-snapshot.service
(host_scripts/db_snapshot.py) takes them, named as sanoid names its own, in one atomic
`zfs snapshot` of both datasets with the engine's position (GTID or LSN) on them; a drop-in on
sanoid.service runs it before each sanoid run (sanoid.timer, every 15 minutes). Every host of a
group gets the same files: the script asks the server its role at each run and takes them only in
the role snapshot_on names, so a switchover moves the snapshots with the role and a converge after
it changes nothing. Every host's sanoid prunes what it holds: a former replica ages its old ones
out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pyinfra.api import deploy
from pyinfra.operations import files

import engines
from host_scripts import db_snapshot
from model.hostdata import HostConfig
from operations import common, snapshots as snapshot_ops, units
from roles import engine, render

KINDS = db_snapshot.TYPES  # sanoid's kinds, in its order: the job parses what the role writes
# The oldest a kind's newest snapshot may be on a host that takes them (the checks): its period
# plus a run of sanoid.timer missed; sanoid's own warning ages where it has them.
MAX_AGE_SECONDS = {
    "frequently": 45 * 60,
    "hourly": 90 * 60,
    "daily": 28 * 3600,
    "weekly": 8 * 86400,
    "monthly": 32 * 86400,
    "yearly": 367 * 86400,
}
PACKAGE = "sanoid"
SCRIPT_SOURCE = Path(__file__).resolve().parent.parent / "host_scripts" / "db_snapshot.py"
SCRIPT = "/usr/local/lib/dbzfs/db_snapshot.py"
UNIT = "dbzfs-snapshot.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
# For node_exporter's textfile collector (roles/monitoring.py's TEXTFILE_DIR): whether the host
# takes them in its server's role now, which the snapshot age alert reads.
METRICS = "/var/lib/prometheus/node-exporter/dbzfs_snapshots.prom"
SANOID_CONF = "/etc/sanoid/sanoid.conf"
SANOID_DROP_IN = "/etc/systemd/system/sanoid.service.d/dbzfs.conf"


def when(cfg: HostConfig, members: Sequence[HostConfig]) -> str | None:
    """The role the host's server must have at the moment for the host to take the snapshots
    (the script's --when: "replica", "primary" or "always"), None for none. A switchover moves
    them with the role, with no converge in between. `members`: its replication group, itself
    included; with "replica", a group without replicas takes them on its primary ("always")."""
    if cfg.snapshot_on == "every_host":
        return "always"
    if cfg.snapshot_on == "primary":
        return "primary"
    if cfg.snapshot_on == "replica":
        return "replica" if any(m.role == "replica" for m in members) else "always"
    return None


def takes_snapshots(cfg: HostConfig, members: Sequence[HostConfig]) -> bool:
    """Whether the host takes them in the role the inventory declares (the converge's view,
    which topology.check has matched with the live one)."""
    mode = when(cfg, members)
    return mode == "always" or mode == cfg.role


def every_kind(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts in sanoid's order, every kind sanoid knows (0: none kept; a kind left out of its
    config would get sanoid's default count)."""
    return {kind: int(counts.get(kind, 0)) for kind in KINDS}


def retention(cfg: HostConfig) -> dict[str, int]:
    """The engine's counts in sanoid's order, every kind sanoid knows (0: none kept)."""
    return every_kind(cfg.snapshot_retention)


def datasets(cfg: HostConfig) -> list[str]:
    """What a snapshot covers: the data dataset, then the log's (full names)."""
    return [cfg.dataset_name(cfg.data_dataset), cfg.dataset_name(cfg.log_dataset)]


def files_text(cfg: HostConfig, members: Sequence[HostConfig]) -> dict[str, str]:
    """path -> text of the files the role writes: the same on every host of a group, whatever
    its role (the snapshot job asks the server for that at each run); sanoid's config alone with
    snapshot_on = "none" (it still prunes what the host holds)."""
    kept = {kind: count for kind, count in retention(cfg).items() if count}
    mode = when(cfg, members)
    texts = {
        SANOID_CONF: render.render(
            "sanoid.conf.j2", {"host": cfg.name, "datasets": datasets(cfg), "retention": retention(cfg)}
        ),
    }
    if mode:
        texts[UNIT_PATH] = render.render(
            "dbzfs-snapshot.service.j2",
            {
                "engine": cfg.engine,
                "server_unit": engines.of(cfg).service,
                "script": SCRIPT,
                "when": mode,
                "metrics": METRICS,
                "datasets": datasets(cfg),
                "mountpoints": [cfg.mountpoint(cfg.data_dataset), cfg.mountpoint(cfg.log_dataset)],
                "retention": kept,
            },
        )
        texts[SANOID_DROP_IN] = render.render("sanoid-drop-in.conf.j2", {"unit": UNIT, "when": mode})
    return texts


@deploy("Snapshot files")
def before_install() -> None:
    """sanoid's config, the job's unit, its drop-in on sanoid.service and its script: written
    before the packages (the engine roles' software()), whose postinsts reload systemd, so the
    converge that writes them needs no reload of its own, which a fact read at the planning of
    the same run could not ask for."""
    cfg = engine.host_config()
    texts = files_text(cfg, engine.group(cfg).members)
    common.config_files(
        name="sanoid's config, the snapshot unit and its script",
        files={**texts, SCRIPT: SCRIPT_SOURCE.read_text()},
        modes={SCRIPT: "755"},
    )
    for path in (UNIT_PATH, SANOID_DROP_IN):
        if path not in texts:
            files.file(name=f"{path} absent: snapshot_on is none", path=path, present=False)


@deploy("Snapshots")
def schedule() -> None:
    """After the server role: the job's first run needs the server answering."""
    cfg = engine.host_config()
    job = when(cfg, engine.group(cfg).members) is not None
    units.current(
        name="sanoid.timer running, enabled",
        units={"sanoid.timer": []},
        loaded=["sanoid.service", UNIT] if job else ["sanoid.service"],
    )
    if job:
        snapshot_ops.first_run(name="The snapshot job's first run", unit=UNIT, marker=METRICS)


def retaken(cfg: HostConfig, applies: bool = True, why_not: str = "") -> None:
    """A runbook that replaced the host's datasets (a compression rewrite, a seed) took their
    snapshots with the old ones: the host's first snapshot of the new ones, when it takes them,
    rather than none until the next quarter hour. Every host passes the step (engine.step)."""
    takes = applies and takes_snapshots(cfg, engine.group(cfg).members)
    engine.step(
        takes,
        why_not if not applies else "this host takes no snapshots",
        snapshot_ops.first_taken,
        name="A snapshot of the new datasets",
        dataset=cfg.dataset_name(cfg.data_dataset),
        unit=UNIT,
    )


def follow_role(cfg: HostConfig) -> None:
    """After a switchover: the job run on every host of the group, so that the snapshots follow
    the roles at once (the new replica takes its first ones, the new primary takes none)."""
    snapshot_ops.job_run(name="The snapshot job run in the new roles", unit=UNIT)
