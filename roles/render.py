"""Builds template contexts from a host's config and its sizing, and renders templates/.

The logic (which value, which role) lives here; templates/ only lay the values out.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import jinja2

import engines
from model.hostdata import HostConfig
from model.sizing import GIB, KIB, MIB, Sizing

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"

PG_CLUSTER = engines.POSTGRESQL.cluster
REPLICATION_USER = engines.by_engine("replication_user")
# The exporters' Unix account (Debian's prometheus packages create it) and database account.
MONITORING_USER = "prometheus"
MARIADB_PORT = engines.MARIADB.port
INNODB_PAGE = 16 * 1024  # innodb_page_size, MariaDB's default (not overridable here)
PG_PORT = engines.POSTGRESQL.port
PG_PASSFILE = "/var/lib/postgresql/.pgpass"  # the replication password, for standbys and the fence
MARIADB_ROLE_CONFIG = "/etc/mysql/mariadb.conf.d/91-dbzfs-role.cnf"
MARIADB_PEERS_CLIENT = "/etc/mysql/dbzfs-peers.cnf"  # the replication account, for the fence (0600)
FENCE_CHECK = "/usr/local/sbin/dbzfs-fence-check"
FENCE_WAIT_SECONDS = 45  # how long the fence waits for peers that do not answer (slow at boot)

# How InnoDB reads and writes its files on ZFS, per server version (docs/releases.md). Through the
# page cache (ZFS has no O_DIRECT of its own before 2.3, and its ARC caches anyway), no O_DSYNC:
# 10.11's innodb_flush_method = fsync; 11.x deprecates that setting for the two it was made of.
# 11.x also deprecates innodb_file_per_table (always on), and adds slave_connections_needed_for_purge
# (default 1: a primary keeps every binlog while no replica is connected, so expire_logs_days would
# stop working on a primary whose replicas are down): 0 keeps 10.11's purge.
MARIADB_FILE_IO = {
    "10.11": {"innodb_flush_method": "fsync", "innodb_file_per_table": "ON"},
    "11.8": {
        "innodb_data_file_buffering": "ON",
        "innodb_data_file_write_through": "OFF",
        "slave_connections_needed_for_purge": "0",
    },
}
MARIADB_SIZE_KEYS = {"innodb_buffer_pool_size", "innodb_log_file_size", "innodb_log_buffer_size"}
PG_SIZE_KEYS = {
    "shared_buffers",
    "effective_cache_size",
    "work_mem",
    "maintenance_work_mem",
    "autovacuum_work_mem",
    "wal_buffers",
    "min_wal_size",
    "max_wal_size",
}

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES)),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters["shquote"] = shlex.quote


def mariadb_size(value: int) -> str:
    for unit, suffix in ((GIB, "G"), (MIB, "M"), (KIB, "K")):
        if value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def pg_size(value: int) -> str:
    for unit, suffix in ((GIB, "GB"), (MIB, "MB"), (KIB, "kB")):
        if value % unit == 0:
            return f"{value // unit}{suffix}"
    return f"{value // KIB}kB"


def pg_seconds(seconds: int) -> str:
    """A time setting as the server shows it (SHOW archive_timeout: 1min, 90s, 1h)."""
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def pg_value(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    if text in ("on", "off", "true", "false") or text.replace(".", "", 1).isdigit():
        return text
    return "'" + text.replace("'", "''") + "'"


def mariadb_value(value: object) -> str:
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    return str(value)


def _formatted(settings: dict, size_keys: set[str], fmt: Callable[[int], str]) -> dict:
    return {k: fmt(v) if k in size_keys and isinstance(v, int) else v for k, v in settings.items()}


def mariadb_paths(cfg: HostConfig) -> dict:
    data = cfg.mountpoint(cfg.data_dataset)
    logs = cfg.mountpoint(cfg.log_dataset)
    return {
        "datadir": data,
        "redo_dir": f"{logs}/redo",
        "binlog_dir": f"{logs}/binlog",
        "relay_dir": f"{logs}/relay",
        "log_bin": f"{logs}/binlog/mysql-bin",
        "relay_log": f"{logs}/relay/relay-bin",
    }


def pg_config_dir(cfg: HostConfig) -> str:
    """Debian's directory of the host's cluster: /etc/postgresql/<version>/main."""
    return f"/etc/postgresql/{cfg.server_version}/{PG_CLUSTER}"


def postgresql_paths(cfg: HostConfig) -> dict:
    data = cfg.mountpoint(cfg.data_dataset)
    wal = cfg.mountpoint(cfg.log_dataset)
    return {
        "data_directory": f"{data}/{cfg.server_version}/{PG_CLUSTER}",
        "wal_directory": f"{wal}/{cfg.server_version}/{PG_CLUSTER}",
        "config_dir": pg_config_dir(cfg),
    }


def mariadb_context(cfg: HostConfig, sized: Sizing) -> dict:
    settings = _formatted(sized.database, MARIADB_SIZE_KEYS, mariadb_size)
    # The doublewrite buffer guards against torn pages; ZFS writes a record atomically, so with
    # records of at least InnoDB's 16k page it is not needed [Let's Encrypt, OpenZFS].
    settings["innodb_doublewrite"] = "0" if cfg.recordsize(cfg.data_dataset) >= INNODB_PAGE else "1"
    file_io = MARIADB_FILE_IO[cfg.server_version]
    settings.update(file_io)
    role = {
        "server_id": cfg.server_id,
        "port": MARIADB_PORT,
        "bind_address": "0.0.0.0" if cfg.replication_address else "127.0.0.1",
    }
    overrides = {k: mariadb_value(v) for k, v in cfg.db_settings.items()}
    for key in list(overrides):
        for target in (settings, role):
            if key in target:
                target[key] = overrides.pop(key)
                break
    return {
        "host": cfg.name,
        "role": cfg.role,
        "paths": mariadb_paths(cfg),
        "version": cfg.server_version,
        "file_io": list(file_io),
        "s": settings,
        "r": role,
        "extra": overrides,
    }


def mariadb_role_context(cfg: HostConfig) -> dict:
    """What follows a MariaDB host's role (templates/mariadb-role.cnf.j2): a replica is read-only."""
    return {"host": cfg.name, "role": cfg.role, "read_only": "ON" if cfg.role == "replica" else "OFF"}


def postgresql_context(
    cfg: HostConfig, sized: Sizing, peers: Iterable[HostConfig] = (), archive: Mapping | None = None
) -> dict:
    """`archive`: roles.pgbackrest.archive_settings (None: the WAL is not archived)."""
    settings = _formatted(sized.database, PG_SIZE_KEYS, pg_size)
    # full_page_writes guards against torn pages; ZFS writes a record atomically, so with records
    # of at least PostgreSQL's 8k page it is not needed [OpenZFS Workload Tuning].
    settings["full_page_writes"] = "off" if cfg.recordsize(cfg.data_dataset) >= 8 * KIB else "on"
    listen = ["localhost"] + ([cfg.replication_address] if cfg.replication_address else [])
    settings["listen_addresses"] = ",".join(listen)
    settings["port"] = PG_PORT
    replicas = [p for p in peers if p.name != cfg.name]
    settings["max_wal_senders"] = max(10, len(replicas) + 2)
    settings["max_replication_slots"] = max(10, len(replicas) + 2)
    # Set on a standby too: it archives only once promoted (archive_mode on, not always).
    settings["archive_mode"] = "on" if archive else "off"
    if archive:
        settings["archive_command"] = f"pgbackrest --stanza={archive['stanza']} archive-push %p"
        settings["archive_timeout"] = pg_seconds(archive["timeout"])
    overrides = dict(cfg.db_settings)
    for key in list(overrides):
        if key in settings:
            settings[key] = overrides.pop(key)
    return {
        "host": cfg.name,
        "paths": postgresql_paths(cfg),
        "version": int(cfg.server_version),
        "cluster": PG_CLUSTER,
        "s": {k: pg_value(v) for k, v in settings.items()},
        "extra": {k: pg_value(v) for k, v in overrides.items()},
    }


def pg_hba_context(cfg: HostConfig, peers: Iterable[HostConfig]) -> dict:
    # Every cluster member may stream from this host (a standby may be promoted later), each from
    # its own address only.
    replication_sources = [
        {"name": p.name, "address": p.replication_address}
        for p in peers
        if p.name != cfg.name and p.replication_address
    ]
    return {
        "host": cfg.name,
        "replication_user": REPLICATION_USER["postgresql"],
        "monitoring_user": MONITORING_USER,
        "replication_sources": replication_sources,
        "users": [u for u in cfg.db_users if u.get("name")],
        "client_networks": list(cfg.client_networks),
    }


def zfs_modprobe_context(cfg: HostConfig, sized: Sizing) -> dict:
    params = dict(sized.zfs)
    params.update(cfg.module_params)
    return {"host": cfg.name, "params": params}


def zed_context(cfg: HostConfig) -> dict:
    return {"host": cfg.name, "email": cfg.zed_email}


def after_zfs_mounts(cfg: HostConfig, managed_by: str, why: str) -> str:
    """A systemd drop-in: the server starts only once the pool is imported and its data and log
    datasets are mounted."""
    return render(
        "after-zfs-mounts.conf.j2",
        {
            "managed_by": managed_by,
            "why": why,
            "mounts": [cfg.mountpoint(ds) for ds in (cfg.data_dataset, cfg.log_dataset)],
        },
    )


def fence_context(cfg: HostConfig, peers: Iterable[HostConfig]) -> dict:
    """The fence check's peers (every other member of the group with an address) and how to ask
    them whether they take writes."""
    context = {
        "host": cfg.name,
        "engine": cfg.engine,
        "wait": FENCE_WAIT_SECONDS,
        "replication_user": REPLICATION_USER[cfg.engine],
        "peers": [
            {"name": p.name, "address": p.replication_address}
            for p in peers
            if p.name != cfg.name and p.replication_address
        ],
    }
    if cfg.engine == "postgresql":
        paths = postgresql_paths(cfg)
        context.update(port=PG_PORT, data_directory=paths["data_directory"], passfile=PG_PASSFILE)
    else:
        context.update(port=MARIADB_PORT, role_config=MARIADB_ROLE_CONFIG, client_file=MARIADB_PEERS_CLIENT)
    return context


def fence_dropin() -> str:
    # After network-online: a peer asked before the replication network is up would not answer,
    # and a peer that does not answer does not fence.
    return (
        "# Managed by dbzfs (roles/fencing.py): never start as a primary while a peer takes writes.\n"
        "[Unit]\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "[Service]\n"
        f"ExecStartPre=+{FENCE_CHECK}\n"
    )


def render(template: str, context: dict) -> str:
    return _env.get_template(template).render(**context)


def render_host(
    cfg: HostConfig, sized: Sizing, peers: Iterable[HostConfig] = (), archive: Mapping | None = None
) -> dict[str, str]:
    """Every file a host gets from templates/: template name -> rendered text."""
    peers = list(peers)
    files = {
        "zfs.conf.j2": render("zfs.conf.j2", zfs_modprobe_context(cfg, sized)),
        "zed.rc.j2": render("zed.rc.j2", zed_context(cfg)),
    }
    if cfg.engine == "mariadb":
        files["my.cnf.j2"] = render("my.cnf.j2", mariadb_context(cfg, sized))
        files["mariadb-role.cnf.j2"] = render("mariadb-role.cnf.j2", mariadb_role_context(cfg))
    elif cfg.engine == "postgresql":
        files["postgresql.conf.j2"] = render(
            "postgresql.conf.j2", postgresql_context(cfg, sized, peers, archive)
        )
        files["pg_hba.conf.j2"] = render("pg_hba.conf.j2", pg_hba_context(cfg, peers))
    if cfg.engine in ("mariadb", "postgresql"):
        files["fence-check.sh.j2"] = render("fence-check.sh.j2", fence_context(cfg, peers))
    return files
