"""Defaults for every host: the one place where a deploy's settings get their default value.

Inventories (host data) and other group_data files override any key. Keys are flat on purpose:
pyinfra merges host data shallowly, so a nested dict in an inventory would replace the whole
default. `model.hostdata.HostConfig` reads these keys and `validation` checks them.
"""

# --- What the host runs (set per host in the inventory) ---------------------------------------

engine = None  # "mariadb" | "postgresql"
role = None  # "primary" | "replica" | "backup" (a backup host: no engine, see Backups below)
primary = None  # replicas: the inventory name of the primary they follow
cluster = None  # replication group name; None: the engine's name (one group per engine)
server_id = None  # MariaDB: unique within a replication group, 1..4294967295
replication_address = None  # this host's address on the replication network
# `./dbzfs roll`: how a group's primary is converged once its replicas are. "switchover": moved to
# a converged replica (runbooks/switchover.py), converged as that replica's replica, then moved
# back (writes refused for a switchover's seconds, twice); "in_place": converged where it is (a
# restart or a compression rewrite stops its server for as long as that takes). Set it on the
# primary; a group without replicas is converged in place.
roll_primary = "switchover"

# Hardware the host is expected to have: {"ram_bytes": int, "cpus": int}. Offline commands
# (validate, render) size settings from it; the deploy sizes from the live host's facts.
hardware = None
workload = "oltp"  # "oltp" | "analytics"

# --- Drives -------------------------------------------------------------------------------------

# Either an explicit list of /dev/disk/by-id paths (in the order mirrors are formed: consecutive
# drives pair up, so list them balanced across controllers), or a glob under /dev/disk/by-id plus
# the number of drives it must match.
drives = []
drive_pattern = None  # e.g. "nvme-INTEL_SSDPE2KE064T8_*"
drive_count = None

# Drives this host may wipe before creating its pool: an explicit opt-in, by-id paths. Without
# it the deploy refuses any drive that holds a partition table, a filesystem or a foreign pool.
wipe_drives = []

# --- ZFS install --------------------------------------------------------------------------------

# "dkms": zfs-dkms from bookworm-backports compiles the module on the host (kernel headers and a
# compiler installed there; minutes per host and per kernel update). "prebuilt": the module built
# once per kernel (`./dbzfs zfs-repo`, README "ZFS without a compiler") and installed with the
# matching ZFS tools from zfs_module_repository; a kernel the repository has no module for is
# refused before anything changes.
zfs_install = "dkms"
# With zfs_install = "prebuilt": {"url": "http://apt.example.net/zfs-modules/", "suite":
# "bookworm", "key_file": "/etc/dbzfs/zfs-modules.asc"}. key_file: the repository's public
# signing key (armored), on the machine that runs the deploy; apt verifies every download with it.
zfs_module_repository = None

# --- Pool ---------------------------------------------------------------------------------------

zpool_name = "dbpool"
zpool_mirror_width = 2  # drives per mirror vdev; 2 -> 12 mirrors over 24 drives
zpool_spares = 0  # hot spares taken from the end of the drive list (Let's Encrypt: 2)
# 12 = 4 KiB sectors. Let's Encrypt measured 8 KiB flash pages on their P4610s and chose 13.
zpool_ashift = 12
zpool_autoreplace = "on"
zpool_autotrim = "on"
zfs_capacity_threshold = 80  # percent; Heap saw ingestion slow past 80% [zfs-db-tuning.md]
# Where the ZFS event daemon mails its notices (a drive faulted or removed, a spare in use, a
# resilver or scrub finished). "" sends none: ZED logs to syslog and the Prometheus alerts page.
# With an address the storage role installs `mail` (bsd-mailx); the host's MTA must deliver it.
zed_email = ""

# --- Datasets -----------------------------------------------------------------------------------

# Compression for the engine's parent dataset (children inherit it): lz4, zstd, zstd-N, zstd-fast-N.
zfs_compression = "lz4"

# Per engine: dataset (relative to the pool) -> properties. Every dataset lives under the engine's
# parent (zfs_dataset_roles below); the data lives in its children, never in the pool root
# [Let's Encrypt]. "mountpoint" is a property too: an absolute path, no spaces.
zfs_datasets = {
    "mariadb": {
        "datastore": {
            "mountpoint": "/datastore",
            "atime": "off",
            "xattr": "sa",
            "dnodesize": "auto",
            "acltype": "posixacl",
            "recordsize": "128k",
            # InnoDB's buffer pool caches pages itself: ARC keeps metadata only [OpenZFS].
            "primarycache": "metadata",
        },
        "datastore/mysql": {
            "mountpoint": "/datastore/mysql",
            "recordsize": "16k",  # = InnoDB page size
            "logbias": "throughput",
            "redundant_metadata": "most",
            "primarycache": "metadata",
        },
        "datastore/mysql-log": {
            "mountpoint": "/datastore/mysql-log",
            "recordsize": "128k",  # redo log, binlog, relay log: sequential [OpenZFS]
            "primarycache": "metadata",
        },
    },
    "postgresql": {
        "datastore": {
            "mountpoint": "/datastore",
            "atime": "off",
            "xattr": "sa",
            "dnodesize": "auto",
            "acltype": "posixacl",
            "recordsize": "128k",
            # PostgreSQL relies on the OS cache, which on ZFS is the ARC [OpenZFS].
            "primarycache": "all",
        },
        "datastore/postgresql": {
            "mountpoint": "/datastore/postgresql",
            # 32k per OpenZFS; Heap ran 64k for a better compression ratio on analytics.
            "recordsize": "32k",
            "primarycache": "all",
        },
        "datastore/postgresql-wal": {
            "mountpoint": "/datastore/postgresql-wal",
            "recordsize": "128k",
            "primarycache": "all",
        },
    },
}
# Per engine: which of its zfs_datasets is which, by name. "parent" holds no data and gets
# zfs_compression (its children inherit it); "data" holds the tables (MariaDB's datadir,
# PostgreSQL's data_directory); "log" holds the redo log, binlog and relay log (MariaDB) or the
# WAL (PostgreSQL).
zfs_dataset_roles = {
    "mariadb": {"parent": "datastore", "data": "datastore/mysql", "log": "datastore/mysql-log"},
    "postgresql": {
        "parent": "datastore",
        "data": "datastore/postgresql",
        "log": "datastore/postgresql-wal",
    },
}

# Per-dataset property overrides merged over zfs_datasets, e.g.
# {"datastore/postgresql": {"recordsize": "64k"}}.
zfs_dataset_properties = {}

# ZFS module parameters merged over the sized ones (zfs_arc_max, zfs_prefetch_disable): names
# from zfs(4), integer values in the parameter's own unit (bytes for zfs_arc_max: no "4G").
zfs_module_params = {}

# --- Snapshots (roles/snapshots.py) -----------------------------------------------------------

# Where the engine's snapshots are taken (one atomic `zfs snapshot` of its data and log datasets,
# with the GTID or LSN they hold, every 15 minutes when one is due): "replica" (on the servers
# that are replicas when the job runs, keeping the load off the primary; a group without replicas
# takes them on its primary), "primary", "every_host", or "none". Every host's sanoid prunes what
# it holds, by snapshot_retention.
snapshot_on = "replica"
# Per engine: how many snapshots of each kind sanoid keeps (its names: frequently (every 15
# minutes), hourly, daily, weekly, monthly, yearly; 0 or absent: none of that kind).
snapshot_retention = {
    "mariadb": {"frequently": 0, "hourly": 36, "daily": 30, "monthly": 3},
    "postgresql": {"frequently": 0, "hourly": 36, "daily": 30, "monthly": 3},
}

# --- Backups (roles/backup.py) -----------------------------------------------------------------

# An inventory host with role = "backup" (no engine; its own drives and pool) pulls every database
# host's snapshots with syncoid, as raw sends (the copy keeps the blocks' compression), into
# <its zpool_name>/backup/<cluster>/<host>/{data,log}. The database hosts hold no key to it: each
# lets the backup host's key log in as `dbzfs-backup`, from the backup host's
# replication_address only, and `zfs allow`s that account to send (and hold), nothing else; a database host
# cannot reach, change or delete the copies. The key: the secret `backup_ssh_private_key` (an
# OpenSSH private key's text: `ssh-keygen -t ed25519 -N "" -f KEY`, then the file's content).
backup_pull_minutes = 15  # minutes between two pulls (a pull sends only what is new)
# Per engine: how many of the copies of each kind the backup host keeps (its own sanoid prunes;
# the database hosts' counts are snapshot_retention's). Kinds as in snapshot_retention.
backup_retention = {
    "mariadb": {"hourly": 48, "daily": 35, "monthly": 12},
    "postgresql": {"hourly": 48, "daily": 35, "monthly": 12},
}
# The oldest the newest copy of a host that takes snapshots may be on the backup host (checks).
backup_max_age_hours = 2

# --- Point-in-time recovery (roles/pgbackrest.py) ------------------------------------------------

# With a backup host, every PostgreSQL host archives its WAL with pgBackRest (Debian's package) to
# a repository on the backup host (<its zpool_name>/pgbackrest), which takes the base backups.
# pgBackRest logs in both ways as postgres, for its remote protocol only: the backup host with
# backup_ssh_private_key, the PostgreSQL hosts with the secret `pgbackrest_ssh_private_key` (a
# second key made the same way). Restores: runbooks/restore.py.
pitr_archive_timeout = 60  # seconds: at most this much committed work waits for its WAL to ship
pgbackrest_retention_full = 2  # full backups kept per replication group (and the WAL they need)
# The backup host's own snapshots of the repository, taken and pruned by its sanoid, per kind as in
# snapshot_retention: pgBackRest lets every PostgreSQL host write and delete files in the
# repository (its remote protocol), not touch these, so a bad or hostile write can be undone.
pgbackrest_repository_snapshots = {"hourly": 24, "daily": 7}
pgbackrest_full_calendar = "Sun *-*-* 01:00"  # systemd OnCalendar: full backups
pgbackrest_incr_calendar = "Mon..Sat *-*-* 01:00"  # incremental backups (since the last backup)
# The oldest the newest backup of a stanza may be before PgbackrestBackupFailing fires: the daily
# backup at 01:00 plus slack for a long one or a late start. Keep it above the longest gap
# between two backups of the calendars above.
pgbackrest_backup_max_age_hours = 26

# --- Database -----------------------------------------------------------------------------------

# Overrides of any server setting, rendered last: my.cnf [mysqld] keys or postgresql.conf keys,
# by their own names, e.g. {"innodb_io_capacity": 2000} or {"work_mem": "8MB"}. Checked by
# engines/db_settings.py: names, values as the server reads them, settings the toolkit owns, RAM.
db_settings = {}
max_connections = None  # None: the sizing default for the engine and workload
# Networks application clients connect from (CIDR); replication peers are allowed separately.
db_client_networks = []

# Application databases and users. Passwords are never data: each user's password is read from
# the secrets (environment or secrets file) under the key named by "password_secret".
# Example: [{"name": "app", "owner": "app"}] and
# [{"name": "app", "password_secret": "app_password", "privileges": "...", "database": "app"}]
databases = []
db_users = []

# --- Monitoring ---------------------------------------------------------------------------------

# Every database host runs node_exporter (with the ZFS textfile collector) and its engine's
# exporter; they listen on the host's replication_address only. A host of the inventory's
# `monitoring` group runs Prometheus, which scrapes every database host and loads the alert rules.
prometheus_server = False  # group_data/monitoring.py sets it for the `monitoring` group's hosts
node_exporter_port = 9100
# node_exporter collectors turned off (`--no-collector.NAME`), e.g. ["hwmon"] where a host has no
# sensors; the alert rules read only the zfs and textfile collectors, which cannot be turned off.
node_exporter_disabled_collectors = []
mysqld_exporter_port = 9104
postgres_exporter_port = 9187
prometheus_port = 9090
prometheus_scrape_interval = "15s"  # also the rule evaluation interval
prometheus_retention = "15d"
zfs_metrics_interval = 60  # seconds between two runs of the ZFS textfile collector

# Alert thresholds (the pool capacity alert uses zfs_capacity_threshold above).
replica_lag_alert_seconds = 300  # MariaDB replica behind its primary
replication_slot_alert_bytes = 10 * 1024**3  # WAL a PostgreSQL replication slot holds back
arc_metadata_hit_ratio_alert = 0.9  # MariaDB hosts: ARC demand metadata hit ratio below this
scrub_max_age_days = 35  # the scrub runs monthly
snapshot_max_age_hours = 26  # newest snapshot of a dataset that has snapshots
# How long a condition must hold before its alert fires, per alert name (Prometheus durations,
# e.g. "10m"), over each alert's default in roles/monitoring_rules.py.
alert_for = {}
