"""The backup role: off-host copies of the database hosts' snapshots (docs/keys.md, Backups).

A backup host (an inventory host with role = "backup": no engine, its own drives and pool) pulls
with syncoid (Debian's sanoid package): raw sends of the snapshots the database hosts took
(roles/snapshots.py), incremental after the first, resumable, into
<pool>/backup/<cluster>/<host>/{data,log}; its own sanoid prunes them by backup_retention. Pulled,
not pushed: a database host holds no key to the backup host. Each database host lets the backup
host's key (the secret backup_ssh_private_key) log in as `dbzfs-backup` from the backup hosts'
addresses only, and `zfs allow`s that account `send` (and `hold`, which `zfs send -I` takes) on the
engine's datasets and nothing else, so
a compromised database host cannot reach the copies and the backup key cannot change a database
host's data. host_scripts/backup_pull.py does the pulling (dbzfs-backup-pull.timer).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path

from pyinfra.api import HiddenValue, deploy
from pyinfra.operations import files

from model.hostdata import HostConfig
from operations import accounts, common, snapshots as snapshot_ops, units, zfs as zfs_ops
from roles import binlogs, engine, monitoring, pgbackrest, render, snapshots, zfs
from roles.backup_fleet import (  # noqa: F401 (backup.ROLE, backup.configs... read elsewhere)
    COPIES,
    ROLE,
    SECRET,
    backup_hosts,
    configs,
    copies_root,
    database_hosts,
    key_text,
    public_key,
    secret_public_key,
)

USER = "dbzfs-backup"  # the account the backup host logs in as on a database host
HOME = f"/var/lib/{USER}"
AUTHORIZED_KEYS = f"{HOME}/.ssh/authorized_keys"
PERMISSIONS = ["hold", "send"]  # zfs allow: send, and the temporary holds `zfs send -I` takes
KEY_DIR = "/etc/dbzfs/backup"
KEY = f"{KEY_DIR}/id_ed25519"
KNOWN_HOSTS = f"{KEY_DIR}/known_hosts"  # the database hosts' keys, as first seen (accept-new)
CONFIG = f"{KEY_DIR}/sources.json"
SCRIPT_SOURCE = Path(__file__).resolve().parent.parent / "host_scripts" / "backup_pull.py"
SCRIPT = "/usr/local/lib/dbzfs/backup_pull.py"
UNIT = "dbzfs-backup-pull.service"
TIMER = "dbzfs-backup-pull.timer"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
TIMER_PATH = f"/etc/systemd/system/{TIMER}"
METRICS = "/var/lib/prometheus/node-exporter/dbzfs_backup.prom"  # node_exporter's textfile dir
SUCCEEDED = "dbzfs_backup_run_success 1"  # the metrics line of a pull that got every copy
SANOID_CONF = "/etc/sanoid/sanoid.conf"
PACKAGES = ["sanoid"]  # syncoid comes with it


def copy_of(cfg: HostConfig, source: HostConfig, role: str) -> str:
    """Where a backup host keeps a source dataset's copies (role: "data" or "log")."""
    return f"{copies_root(cfg)}/{source.cluster}/{source.name}/{role}"


def clusters(hosts: Sequence[HostConfig]) -> dict[str, str]:
    """cluster -> its engine, in inventory order."""
    out: dict[str, str] = {}
    for h in database_hosts(hosts):
        out.setdefault(h.cluster, h.engine)
    return out


def pull_config_text(cfg: HostConfig, hosts: Sequence[HostConfig]) -> str:
    """The script's --config: what to pull from where, and where to put it."""
    sources = [
        {
            "host": h.name,
            "address": h.replication_address,
            "cluster": h.cluster,
            "engine": h.engine,
            "datasets": {"data": h.dataset_name(h.data_dataset), "log": h.dataset_name(h.log_dataset)},
        }
        for h in database_hosts(hosts)
    ]
    config = {
        "target": copies_root(cfg),
        "user": USER,
        "ssh_key": KEY,
        "known_hosts": KNOWN_HOSTS,
        "metrics": METRICS,
        "sources": sources,
    }
    return json.dumps(config, indent=2) + "\n"


def retention(cfg: HostConfig, engine_name: str) -> dict[str, int]:
    return snapshots.every_kind(cfg.backup_retention.get(engine_name, {}))


def files_text(cfg: HostConfig, hosts: Sequence[HostConfig]) -> dict[str, str]:
    """path -> text of the backup host's files (the key apart)."""
    from roles import pgbackrest  # it builds on this module

    groups = clusters(hosts)
    return {
        SANOID_CONF: render.render(
            "backup-sanoid.conf.j2",
            {
                "host": cfg.name,
                "clusters": {f"{copies_root(cfg)}/{c}": e for c, e in groups.items()},
                "retention": {e: retention(cfg, e) for e in sorted(set(groups.values()))},
                "repository": pgbackrest.repository_snapshots(cfg, hosts),
            },
        ),
        UNIT_PATH: render.render(
            "dbzfs-backup-pull.service.j2", {"script": SCRIPT, "config": CONFIG, "key": KEY}
        ),
        TIMER_PATH: render.render("dbzfs-backup-pull.timer.j2", {"minutes": cfg.backup_pull_minutes}),
        CONFIG: pull_config_text(cfg, hosts),
    }


def authorized_keys_text(public: str, backups: Sequence[HostConfig]) -> str:
    """One line: the key, from the backup hosts' addresses only, no forwarding, no pty."""
    sources = ",".join(str(b.replication_address) for b in backups)
    names = ",".join(b.name for b in backups)
    return f'restrict,from="{sources}" {public} {USER}@{names}\n'


# --- the database hosts ------------------------------------------------------------------------


@deploy("Access for the backup host")
def access() -> None:
    """A database host: the backup hosts' key may log in as USER and send the engine's datasets;
    with no backup host in the inventory, neither."""
    cfg = engine.host_config()
    backups = backup_hosts(configs())
    parent = cfg.dataset_name(cfg.parent_dataset)
    if not backups:
        files.file(name=f"{AUTHORIZED_KEYS} absent: no backup host", path=AUTHORIZED_KEYS, present=False)
        zfs_ops.allowed(name=f"{USER} may not send {parent}", dataset_name=parent, user=USER, permissions=[])
        return
    accounts.system_account(name=f"Account {USER}", account=USER, home=HOME, shell="/bin/sh")
    for path, mode in ((HOME, "750"), (f"{HOME}/.ssh", "700")):
        files.directory(name=path, path=path, user=USER, group=USER, mode=mode)
    engine.text_file(
        authorized_keys_text(secret_public_key(SECRET), backups),
        AUTHORIZED_KEYS,
        user=USER,
        group=USER,
        mode="600",
        name=f"{AUTHORIZED_KEYS}: the backup hosts' key, from their addresses only",
    )
    zfs_ops.allowed(
        name=f"{USER} may send {parent} and its datasets, nothing else",
        dataset_name=parent,
        user=USER,
        permissions=PERMISSIONS,
    )


# --- the backup host ---------------------------------------------------------------------------


@deploy("Backup host software")
def software() -> None:
    """ZFS, then sanoid and node_exporter; the files first (the packages' postinsts reload
    systemd)."""
    cfg = engine.host_config()
    hosts = configs()
    files.directory(name=KEY_DIR, path=KEY_DIR, user="root", group="root", mode="700")
    if binlogs.enabled(hosts):
        files.directory(
            name=f"{binlogs.ETC} (root's)", path=binlogs.ETC, user="root", group="root", mode="700"
        )
    common.config_files(
        name="sanoid's config, the pull's files, pgBackRest's units and metrics, the binlog streams' files",
        files={
            **files_text(cfg, hosts),
            SCRIPT: SCRIPT_SOURCE.read_text(),
            **pgbackrest.unit_files_text(cfg, hosts),
            **binlogs.files_text(cfg, hosts),
        },
        modes={SCRIPT: "755", pgbackrest.METRICS_SCRIPT: "755", binlogs.SCRIPT: "755"},
    )
    common.secret_file(
        name=f"{KEY} (the backup key, 0600)",
        path=KEY,
        content=HiddenValue(key_text(engine.secret(SECRET).unmask())),
        user="root",
        group="root",
        mode="600",
    )
    monitoring.before_install(cfg)
    zfs.install(cfg)
    engine.packages(
        "sanoid (syncoid), pgBackRest and monitoring from Debian",
        [*PACKAGES, *pgbackrest.packages(hosts), *binlogs.packages(hosts), *monitoring.packages(cfg)],
    )


@deploy("Backup host storage")
def storage() -> None:
    """Its pool; the copies under <pool>/backup: never mounted, read-only (a receive still
    writes), one dataset per replication group for its engine's retention."""
    cfg = engine.host_config()
    zfs.pool(cfg)
    zfs_ops.dataset(
        name=f"Dataset {cfg.pool.name} (not mounted)",
        dataset_name=cfg.pool.name,
        properties={"canmount": "off", "mountpoint": "none"},
    )
    root = copies_root(cfg)
    zfs_ops.dataset(
        name=f"Dataset {root} (the copies: not mounted, read-only)",
        dataset_name=root,
        properties={"canmount": "off", "mountpoint": "none", "readonly": "on"},
    )
    for cluster in clusters(configs()):
        zfs_ops.dataset(
            name=f"Dataset {root}/{cluster}",
            dataset_name=f"{root}/{cluster}",
            properties={"canmount": "off"},
        )
    zfs.scrub_and_capacity(cfg)
    monitoring.running(cfg)


def takers(hosts: Sequence[HostConfig]) -> list[HostConfig]:
    """The database hosts that take snapshots in their declared role (roles/snapshots.py), whose
    copies the backup host must hold."""
    databases = database_hosts(hosts)
    return [
        h
        for h in databases
        if snapshots.takes_snapshots(
            h, [m for m in databases if (m.engine, m.cluster) == (h.engine, h.cluster)]
        )
    ]


def expected_copies(
    hosts: Sequence[HostConfig], active: Collection[str] | None = None
) -> list[tuple[str, str]]:
    """(source host, dataset role) of every copy the first pull must leave on the backup host:
    of the takers in this run (`active`: the run's hosts, None for all), which took their first
    snapshots earlier in it. A taker outside the run (--limit, or a replica declared but not
    converged yet) may have none yet: its copies come with a later pull, not a failed converge."""
    return [
        (h.name, role)
        for h in takers(hosts)
        if active is None or h.name in active
        for role in ("data", "log")
    ]


@deploy("Backup pulls")
def schedule() -> None:
    """Last in deploy.py, on every host of an inventory with a backup host: the first pull is one
    operation of every host (a no-op on the database hosts: engine.step), so that it runs after
    their access and their first snapshots (pyinfra orders one host's operations, and orders
    hosts only at the operations they share). The pull timer starts after it: started before
    (as it was), it pulled at once, before the database hosts had taken a snapshot, and the
    converge's pull took that empty run for its own (issue 45: a fleet converged with its backup
    host in one run ended with no copy)."""
    hosts = configs()
    if not backup_hosts(hosts):
        return
    is_backup = engine.host_config().is_backup_host
    if is_backup:
        units.current(
            name=f"{UNIT} and {TIMER} loaded, sanoid.timer running, enabled",
            units={"sanoid.timer": []},
            loaded=[UNIT, TIMER, "sanoid.service"],
        )
    engine.step(
        is_backup,
        "not a backup host",
        snapshot_ops.first_pull,
        name="The first pull",
        unit=UNIT,
        marker=METRICS,
        succeeded=SUCCEEDED,
        expected=expected_copies(hosts, engine.active_names()) if is_backup else [],
    )
    if is_backup:
        units.current(
            name=f"{TIMER} running, enabled (after the first pull)", units={TIMER: []}, loaded=[UNIT]
        )
