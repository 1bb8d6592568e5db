"""PostgreSQL's WAL archive and base backups with pgBackRest (Debian's package), in a repository on
the backup host: point-in-time recovery (docs/keys.md, Point-in-time recovery).

With a backup host in the inventory (roles/backup.py), every PostgreSQL host archives its WAL
(archive_mode on, archive_command `pgbackrest archive-push`; a standby archives once promoted) to
the repository on the backup host, <its pool>/pgbackrest mounted at /var/lib/pgbackrest, one
stanza per replication group (its cluster name). The backup host takes the base backups, as
pgBackRest has it (a backup runs where the repository is): a full one at the converge that
creates the stanza, then on timers (pgbackrest_full_calendar, pgbackrest_incr_calendar), kept by
pgbackrest_retention_full. After every backup and every 15 minutes, host_scripts/pgbackrest_metrics.py
writes each stanza's state and newest backup for node_exporter (the PgbackrestBackupFailing alert,
pgbackrest_backup_max_age_hours). Restores: runbooks/restore.py (day2/restore.py).

pgBackRest talks over ssh both ways, as postgres: the backup host to the database hosts (with its
backup key, backup_ssh_private_key) and the database hosts to the backup host (the secret
pgbackrest_ssh_private_key). Each key is let in from the other side's addresses only, and runs
pgBackRest's remote protocol and nothing else (authorized_keys command=,
host_scripts/pgbackrest_remote.py): a database host gets no shell on the backup host, which holds
every host's copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyinfra.api import HiddenValue, deploy
from pyinfra.operations import files

from model.hostdata import HostConfig
from operations import common, pgbackrest as ops, snapshots as snapshot_ops, units, zfs as zfs_ops
from roles import backup_fleet, engine, render, snapshots

SECRET = "pgbackrest_ssh_private_key"  # the database hosts' key to the repository
USER = "postgres"  # pgBackRest's user on both sides, as Debian's package sets it up
HOME = "/var/lib/postgresql"
# pgBackRest's remote protocol writes any path its user may write (the repository's storage
# driver takes the paths the other side sends), so nothing that decides who logs in or what ssh
# runs is in a place that user can write: sshd reads its keys from here (a Match drop-in), ssh
# its config from here (pgbackrest's cmd-ssh wrapper, ssh -F), root-owned; on the backup host
# postgres' home is root's too (no ~/.ssh, ~/.bashrc of its own: bash reads that one under sshd).
ETC = "/etc/dbzfs/pgbackrest"
AUTHORIZED_KEYS = f"{ETC}/authorized_keys"
SSH_CONFIG = f"{ETC}/ssh_config"
# The other side's host keys as first seen (accept-new), postgres' to write; gone with the backup
# host, so that a reinstalled one is accepted when it comes back.
KNOWN_HOSTS = f"{ETC}/known_hosts"
KEY = f"{ETC}/id_ed25519"  # a database host's key to the repository; the backup key on the backup host
SSHD_DROPIN = "/etc/ssh/sshd_config.d/dbzfs-pgbackrest.conf"
SSH_WRAPPER = "/usr/local/lib/dbzfs/pgbackrest_ssh"
CONF = "/etc/pgbackrest.conf"  # Debian's
REPOSITORY = "/var/lib/pgbackrest"
DATASET = "pgbackrest"  # <pool>/pgbackrest on the backup host
# pgBackRest writes whole files once: large records; ZFS compresses them (compress-type none).
DATASET_PROPERTIES = {
    "mountpoint": REPOSITORY,
    "recordsize": "1M",
    "compression": "zstd",
    "atime": "off",
}
REMOTE_SOURCE = Path(__file__).resolve().parent.parent / "host_scripts" / "pgbackrest_remote.py"
REMOTE = "/usr/local/lib/dbzfs/pgbackrest_remote.py"
PACKAGE = "pgbackrest"
BACKUP_UNIT = "dbzfs-pgbackrest-backup@.service"
TYPES = ("full", "incr")  # the timers: dbzfs-pgbackrest-full.timer, dbzfs-pgbackrest-incr.timer
UNIT_DIR = "/etc/systemd/system"
# The backups' metrics (PgbackrestBackupFailing), after every backup and on a timer of their own.
METRICS_SOURCE = Path(__file__).resolve().parent.parent / "host_scripts" / "pgbackrest_metrics.py"
METRICS_SCRIPT = "/usr/local/lib/dbzfs/pgbackrest_metrics.py"
METRICS_UNIT = "dbzfs-pgbackrest-metrics.service"
METRICS_TIMER = "dbzfs-pgbackrest-metrics.timer"
METRICS = "/var/lib/prometheus/node-exporter/dbzfs_pgbackrest.prom"  # node_exporter's textfile dir
METRICS_SUCCEEDED = "dbzfs_pgbackrest_info_success 1"  # the metrics line of a run that read `info`


def timer(kind: str) -> str:
    return f"dbzfs-pgbackrest-{kind}.timer"


def service(kind: str) -> str:
    return f"dbzfs-pgbackrest-backup@{kind}.service"


def postgresql_hosts(hosts: Sequence[HostConfig]) -> list[HostConfig]:
    return [h for h in backup_fleet.database_hosts(hosts) if h.engine == "postgresql"]


def enabled(hosts: Sequence[HostConfig]) -> bool:
    """WAL is archived when the inventory has a backup host and a PostgreSQL host."""
    return bool(backup_fleet.backup_hosts(hosts)) and bool(postgresql_hosts(hosts))


def stanzas(hosts: Sequence[HostConfig]) -> dict[str, list[HostConfig]]:
    """stanza (the replication group's cluster name) -> its hosts, the primary first."""
    out: dict[str, list[HostConfig]] = {}
    for h in sorted(postgresql_hosts(hosts), key=lambda h: h.role != "primary"):
        out.setdefault(h.cluster, []).append(h)
    return out


def archive_settings(cfg: HostConfig, hosts: Sequence[HostConfig]) -> dict | None:
    """postgresql.conf's archive settings for a PostgreSQL host, None when nothing archives."""
    if not enabled(hosts):
        return None
    return {"stanza": cfg.cluster, "timeout": cfg.pitr_archive_timeout}


def data_directory(cfg: HostConfig) -> str:
    return render.postgresql_paths(cfg)["data_directory"]


def ssh_config_text(addresses: Sequence[str], names: Sequence[str], key: str) -> str:
    return render.render(
        "pgbackrest-ssh-config.j2",
        {
            "addresses": list(addresses),
            "names": list(names),
            "key": key,
            "known_hosts": KNOWN_HOSTS,
            "user": USER,
        },
    )


def wrapper_text() -> str:
    return (
        "#!/bin/sh\n"
        "# Managed by dbzfs (roles/pgbackrest.py): pgBackRest's ssh (cmd-ssh), with its own config\n"
        f'# only (no ~/.ssh/config).\nexec /usr/bin/ssh -F {SSH_CONFIG} "$@"\n'
    )


def sshd_dropin_text() -> str:
    return (
        "# Managed by dbzfs (roles/pgbackrest.py): the keys pgBackRest's user is let in with, where\n"
        "# it cannot write them.\n"
        f"Match User {USER}\n\tAuthorizedKeysFile {AUTHORIZED_KEYS}\n"
    )


def authorized_keys_text(public: str, sources: Sequence[HostConfig], comment: str) -> str:
    """One line: the key from these hosts' addresses only, pgBackRest's remote protocol only."""
    addresses = ",".join(str(s.replication_address) for s in sources)
    return f'restrict,from="{addresses}",command="/usr/bin/python3 {REMOTE}" {public} {comment}\n'


def client_conf_text(cfg: HostConfig, hosts: Sequence[HostConfig]) -> str:
    return render.render(
        "pgbackrest.conf.j2",
        {
            "host": cfg.name,
            "side": "database",
            "repositories": [str(b.replication_address) for b in backup_fleet.backup_hosts(hosts)],
            "stanzas": {cfg.cluster: [{"path": data_directory(cfg)}]},
            "conf": CONF,
            "cmd_ssh": SSH_WRAPPER,
        },
    )


def repository_conf_text(cfg: HostConfig, hosts: Sequence[HostConfig]) -> str:
    return render.render(
        "pgbackrest.conf.j2",
        {
            "host": cfg.name,
            "side": "repository",
            "repository": REPOSITORY,
            "retention_full": cfg.pgbackrest_retention_full,
            "stanzas": {
                name: [
                    {"name": h.name, "address": str(h.replication_address), "path": data_directory(h)}
                    for h in members
                ]
                for name, members in stanzas(hosts).items()
            },
            "conf": CONF,
            "cmd_ssh": SSH_WRAPPER,
        },
    )


def metrics_command(hosts: Sequence[HostConfig]) -> str:
    """The metrics script's command line: the stanzas backed up, so that one missing from the
    repository is reported too."""
    return f"/usr/bin/python3 {METRICS_SCRIPT}" + "".join(f" --stanza {s}" for s in stanzas(hosts))


def unit_files_text(cfg: HostConfig, hosts: Sequence[HostConfig]) -> dict[str, str]:
    """path -> text of the backup host's backup unit and timers, and of the backups' metrics
    script (mode 755: METRICS_SCRIPT), its unit and timer (none without PostgreSQL hosts)."""
    if not enabled(hosts):
        return {}
    calendars = {"full": cfg.pgbackrest_full_calendar, "incr": cfg.pgbackrest_incr_calendar}
    metrics = metrics_command(hosts)
    out = {
        f"{UNIT_DIR}/{BACKUP_UNIT}": render.render(
            "dbzfs-pgbackrest-backup@.service.j2",
            {"stanzas": list(stanzas(hosts)), "user": USER, "metrics": metrics},
        )
    }
    for kind in TYPES:
        out[f"{UNIT_DIR}/{timer(kind)}"] = render.render(
            "dbzfs-pgbackrest.timer.j2", {"kind": kind, "calendar": calendars[kind], "service": service(kind)}
        )
    out[f"{UNIT_DIR}/{METRICS_UNIT}"] = render.render(
        "dbzfs-pgbackrest-metrics.service.j2", {"metrics": metrics, "output": METRICS}
    )
    out[f"{UNIT_DIR}/{METRICS_TIMER}"] = render.render(
        "dbzfs-pgbackrest-metrics.timer.j2", {"service": METRICS_UNIT}
    )
    out[METRICS_SCRIPT] = METRICS_SOURCE.read_text()
    return out


def ssh_files(cfg: HostConfig, conf: str, peers: Sequence[HostConfig], key_secret: str, public: str) -> None:
    """pgBackRest's config and both ends of its ssh on this host: the peers it logs in to with
    the key from `key_secret`, the `public` key line it lets in (see ETC above)."""
    addresses = [str(p.replication_address) for p in peers]
    files.directory(name=f"{ETC} (root's)", path=ETC, user="root", group="root", mode="755")
    common.config_files(
        name="pgBackRest's config, its ssh config and wrapper, its remote command, its keys",
        files={
            CONF: conf,
            REMOTE: REMOTE_SOURCE.read_text(),
            SSH_WRAPPER: wrapper_text(),
            SSH_CONFIG: ssh_config_text(addresses, [p.name for p in peers], KEY),
            AUTHORIZED_KEYS: public,
        },
        modes={REMOTE: "755", SSH_WRAPPER: "755"},
    )
    common.config_file(
        name=f"{SSHD_DROPIN}: {USER}'s keys from {AUTHORIZED_KEYS}",
        path=SSHD_DROPIN,
        content=sshd_dropin_text(),
        check="sshd -t -f {path}",
        checker="/usr/sbin/sshd",
    )
    common.secret_file(
        name=f"{KEY} (0600)",
        path=KEY,
        content=HiddenValue(backup_fleet.key_text(engine.secret(key_secret).unmask())),
        user=USER,
        group=USER,
        mode="600",
    )
    files.file(name=f"{KNOWN_HOSTS} ({USER}'s)", path=KNOWN_HOSTS, user=USER, group=USER, mode="644")
    units.current(name="sshd reads the drop-in", units={"ssh.service": [SSHD_DROPIN]})


# --- the database hosts ------------------------------------------------------------------------


@deploy("WAL archive to the backup host (pgBackRest)")
def client() -> None:
    """A PostgreSQL host, after its packages: pgBackRest's config, its key to the repository, and
    the backup host's key let in for pgBackRest only; with no backup host, the keys gone (the
    server's archive_mode follows in its config, roles/postgresql.py)."""
    cfg = engine.host_config()
    hosts = backup_fleet.configs()
    if not enabled(hosts):
        for path in (SSHD_DROPIN, AUTHORIZED_KEYS, KEY, KNOWN_HOSTS):
            files.file(name=f"{path} absent: no backup host", path=path, present=False)
        return
    backups = backup_fleet.backup_hosts(hosts)
    names = ",".join(b.name for b in backups)
    public = authorized_keys_text(
        backup_fleet.secret_public_key(backup_fleet.SECRET), backups, f"pgbackrest@{names}"
    )
    ssh_files(cfg, client_conf_text(cfg, hosts), backups, SECRET, public)


# --- the backup host ---------------------------------------------------------------------------


def packages(hosts: Sequence[HostConfig]) -> list[str]:
    return [PACKAGE] if enabled(hosts) else []


def repository_dataset(cfg: HostConfig) -> str:
    return f"{cfg.pool.name}/{DATASET}"


def repository_snapshots(cfg: HostConfig, hosts: Sequence[HostConfig]) -> dict | None:
    """The backup host's sanoid section for the repository: its dataset and a count per kind
    (every kind, 0 unless pgbackrest_repository_snapshots keeps some; sanoid's defaults would keep
    48 hourly, 90 daily and 6 monthly); None without a repository."""
    if not enabled(hosts):
        return None
    return {
        "dataset": repository_dataset(cfg),
        "counts": snapshots.every_kind(cfg.pgbackrest_repository_snapshots),
    }


@deploy("pgBackRest repository")
def repository() -> None:
    """The backup host, after its pool: the repository's dataset, pgBackRest's config, the
    database hosts' key let in for pgBackRest only, its own key to them."""
    cfg = engine.host_config()
    hosts = backup_fleet.configs()
    if not enabled(hosts):
        return
    dataset = repository_dataset(cfg)
    zfs_ops.dataset(
        name=f"Dataset {dataset} (the pgBackRest repository)",
        dataset_name=dataset,
        properties=DATASET_PROPERTIES,
    )
    # sanoid's config (roles/backup.py) covers it: its first snapshots now, not in a quarter hour.
    snapshot_ops.first_taken(
        name=f"The first snapshots of {dataset} (sanoid)", dataset=dataset, unit="sanoid.service"
    )
    files.directory(name=f"{REPOSITORY} ({USER}'s)", path=REPOSITORY, user=USER, group=USER, mode="750")
    # No cluster here: postgres' home is root's, so that user has no file sshd or bash reads.
    files.directory(name=f"{HOME} (root's: see ETC)", path=HOME, user="root", group="root", mode="755")
    sources = postgresql_hosts(hosts)
    public = authorized_keys_text(
        backup_fleet.secret_public_key(SECRET), sources, "pgbackrest@postgresql-hosts"
    )
    ssh_files(cfg, repository_conf_text(cfg, hosts), sources, backup_fleet.SECRET, public)


@deploy("pgBackRest stanzas and first backups")
def schedule() -> None:
    """Every host of an inventory that archives, after the database hosts' servers: each stanza
    created and its first full backup taken on the backup host (operations every host shares, a
    no-op on the others, so that they run after the servers archive), then its timers."""
    hosts = backup_fleet.configs()
    if not enabled(hosts):
        return
    is_backup = engine.host_config().is_backup_host
    for stanza in stanzas(hosts):
        engine.step(is_backup, "not a backup host", ops.stanza, name=f"Stanza {stanza}", stanza=stanza)
        engine.step(
            is_backup,
            "not a backup host",
            ops.first_backup,
            name=f"Stanza {stanza}: a full backup, the first",
            stanza=stanza,
        )
    if is_backup:
        units.current(
            name="pgBackRest's backup and metrics timers running, enabled",
            units={**{timer(kind): [] for kind in TYPES}, METRICS_TIMER: []},
            loaded=[*(service(kind) for kind in TYPES), METRICS_UNIT],
        )
        # The first backups above are no unit's: their metrics now, not at the timer's next run.
        snapshot_ops.first_run(
            name="The backups' first metrics",
            unit=METRICS_UNIT,
            marker=METRICS,
            succeeded=METRICS_SUCCEEDED,
        )
