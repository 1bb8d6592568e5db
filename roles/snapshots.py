"""The snapshots role: consistent ZFS snapshots of the engine's data and log datasets, kept by a
retention policy per engine (group_data/all.py: snapshot_on, snapshot_retention).

sanoid (Debian's package) prunes and monitors; it takes none itself. Our dbzfs-snapshot.service
(roles/host_scripts/db_snapshot.py) takes them, named as sanoid names its own, in one atomic
`zfs snapshot` of both datasets with the engine's position (GTID or LSN) on them, and sanoid.timer
runs it before each sanoid run on the hosts that take them (a drop-in on sanoid.service). Every
host's sanoid prunes what it holds: a host that stopped taking snapshots (a replica promoted) ages
its old ones out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyinfra.api import deploy
from pyinfra.operations import files

from roles import engine, render
from roles.hostdata import HostConfig
from roles.operations import common, snapshots as snapshot_ops, units

KINDS = ("frequently", "hourly", "daily", "weekly", "monthly", "yearly")  # sanoid's, its order
SNAPSHOT_ON = ("replica", "primary", "every_host", "none")
PACKAGE = "sanoid"
SCRIPT_SOURCE = Path(__file__).resolve().parent / "host_scripts" / "db_snapshot.py"
SCRIPT = "/usr/local/lib/dbzfs/db_snapshot.py"
UNIT = "dbzfs-snapshot.service"
SANOID_CONF = "/etc/sanoid/sanoid.conf"
SANOID_DROP_IN = "/etc/systemd/system/sanoid.service.d/dbzfs.conf"
SERVER_UNIT = {
    "mariadb": "mariadb.service",
    "postgresql": f"postgresql@{render.PG_VERSION}-{render.PG_CLUSTER}.service",
}


def takes_snapshots(cfg: HostConfig, members: Sequence[HostConfig]) -> bool:
    """Whether this host takes its engine's snapshots. `members`: its replication group, itself
    included. With "replica", a primary takes them when no replica in the group follows it."""
    if cfg.snapshot_on == "every_host":
        return True
    if cfg.snapshot_on == "primary":
        return cfg.role == "primary"
    if cfg.snapshot_on == "replica":
        if cfg.role == "replica":
            return True
        return not any(m.role == "replica" and m.primary == cfg.name for m in members)
    return False


def retention(cfg: HostConfig) -> dict[str, int]:
    """The engine's counts in sanoid's order, every kind sanoid knows (0: none kept)."""
    return {kind: int(cfg.snapshot_retention.get(kind, 0)) for kind in KINDS}


def datasets(cfg: HostConfig) -> list[str]:
    """What a snapshot covers: the data dataset, then the log's (full names)."""
    return [cfg.dataset_name(cfg.data_dataset), cfg.dataset_name(cfg.log_dataset)]


def files_text(cfg: HostConfig, takes: bool) -> dict[str, str]:
    """path -> text of the files the role writes (the drop-in only where the host takes them)."""
    kept = {kind: count for kind, count in retention(cfg).items() if count}
    texts = {
        SANOID_CONF: render.render(
            "sanoid.conf.j2",
            {
                "host": cfg.name,
                "datasets": datasets(cfg),
                "takes": takes,
                "snapshot_on": cfg.snapshot_on,
                "role": cfg.role,
                "retention": retention(cfg),
            },
        ),
        f"/etc/systemd/system/{UNIT}": render.render(
            "dbzfs-snapshot.service.j2",
            {
                "engine": cfg.engine,
                "server_unit": SERVER_UNIT[cfg.engine],
                "script": SCRIPT,
                "datasets": datasets(cfg),
                "retention": kept,
            },
        ),
    }
    if takes:
        texts[SANOID_DROP_IN] = render.render("sanoid-drop-in.conf.j2", {"unit": UNIT})
    return texts


@deploy("Snapshots")
def schedule() -> None:
    """After the server role: the first snapshot needs the server answering. sanoid itself is
    installed with the engine's packages (the engine roles' software())."""
    cfg = engine.host_config()
    takes = takes_snapshots(cfg, engine.group(cfg).members)
    texts = files_text(cfg, takes)
    common.config_files(
        name="sanoid's config, the snapshot unit and its script",
        files={**texts, SCRIPT: SCRIPT_SOURCE.read_text()},
        modes={SCRIPT: "755"},
    )
    if not takes:
        files.file(
            name=f"{SANOID_DROP_IN} absent: this host takes no snapshots", path=SANOID_DROP_IN, present=False
        )
    units.current(
        name="sanoid.timer running, enabled",
        units={"sanoid.timer": []},
        loaded=["sanoid.service", UNIT],
    )
    if takes:
        snapshot_ops.first_taken(
            name="The first snapshot", dataset=cfg.dataset_name(cfg.data_dataset), unit=UNIT
        )
