"""Every host data key, defined once: its type, its default, when it is required, which code reads
it, an example and what it does. Pure: no pyinfra.

Everything else derives from these definitions: group_data/all.py (the defaults pyinfra hands
every host), HostConfig.from_data's defaults (model/hostdata.py), validation's type pass and its
list of known keys, the choice checks of the keys with a fixed set of values, and the reference
docs/keys.md (model/keys_doc.py: `python -m model.keys_doc > docs/keys.md`; a unit test
compares).

Adding a key: define it here (its section, type, default, owner, example, one line of what it
does), read it in HostConfig.from_data, check it in its owner's rules (roles/*_checks.py), and
regenerate docs/keys.md.
"""

from __future__ import annotations

import copy

from model import keys_monitoring, keys_security
from model.key import (  # noqa: F401 (re-exported: model.keys is where the code reads them)
    _KINDS_NOTE,
    BOOLEAN,
    INTEGER,
    KINDS,
    LIST,
    MAPPING,
    NUMBER,
    SECTIONS,
    STRING,
    Key,
    section as _in,
)

_DEFINITIONS = (
    *_in(
        "host",
        "roles.engine",
        Key(
            "engine",
            STRING,
            None,
            '"mariadb" or "postgresql"',
            "the database server the host runs",
            nullable=True,
            choices=("mariadb", "postgresql"),
            invalid="unknown engine",
            required="every database host; a backup host has none",
        ),
        Key(
            "debian_release",
            STRING,
            "13",
            '"13"',
            "the Debian release the host runs: the server version and where ZFS comes from follow it",
            owner="roles.release",
            choices=("12", "13"),
            invalid="not a supported Debian release",
            choice_fix='use "13" (trixie: MariaDB 11.8, PostgreSQL 17) or "12" (bookworm: MariaDB 10.11, '
            "PostgreSQL 15), as the host runs",
            notes="The deploy refuses a host that runs another release or distribution before it changes "
            "anything. docs/releases.md: what differs between the two.",
        ),
        Key(
            "postgresql_version",
            STRING,
            None,
            '"15"',
            "PostgreSQL's major version when it is not the release's: Debian 12's \"15\" on a Debian 13 "
            "host whose cluster pg_upgradecluster has not moved to 17 yet",
            owner="roles.release_checks",
            nullable=True,
            choices=("15", "17"),
            invalid="not a PostgreSQL version the toolkit converges",
            choice_fix='leave it out (the release\'s own: "17" on Debian 13, "15" on Debian 12)',
            notes="Debian keeps postgresql-15 installed through the upgrade from 12 to 13, and its cluster "
            "runs on until it is upgraded; `./dbzfs upgrade` sets this for such a host in the inventory it "
            "runs with, and it is rarely set by hand. Left out: the release's own version. A "
            "host of Debian 12 runs 15 only.",
        ),
        Key(
            "role",
            STRING,
            None,
            '"primary", "replica" or "backup"',
            "what the host is in its replication group, or a backup host (see Backups)",
            nullable=True,
            choices=("primary", "replica", "backup"),
            invalid="unknown role",
            required="every host",
        ),
        Key(
            "primary",
            STRING,
            None,
            'the primary\'s inventory name, e.g. "db01"',
            "the inventory name of the primary a replica follows",
            owner="roles.topology",
            nullable=True,
            required="replicas (and only them)",
        ),
        Key(
            "cluster",
            STRING,
            None,
            'a replication group name, e.g. "boulder"',
            "the replication group's name; None: the engine's name (one group per engine)",
            nullable=True,
        ),
        Key(
            "server_id",
            INTEGER,
            None,
            "1 (unique within the replication group)",
            "MariaDB's server_id: unique within a replication group, 1..4294967295",
            owner="roles.render",
            nullable=True,
            required="MariaDB hosts; never on PostgreSQL or backup hosts",
        ),
        Key(
            "replication_address",
            STRING,
            None,
            '"10.20.0.11"',
            "this host's address on the replication network",
            owner="roles.render",
            nullable=True,
            required="every host of a group with replicas, and every host when the inventory has a backup "
            "host or a Prometheus server",
        ),
        Key(
            "reboot_method",
            STRING,
            "reboot",
            '"reboot" or "kexec"',
            "`./dbzfs upgrade`: how a host reboots into its new release's kernel",
            owner="day2.upgrade_release",
            choices=("reboot", "kexec"),
            invalid="not a way to reboot",
            choice_fix='"reboot" (the firmware and the boot loader) or "kexec" (straight into the kernel)',
            notes='"reboot": systemctl reboot, the boot loader picks the newest kernel. "kexec": the new '
            "kernel loaded and started by the running one (kexec-tools, installed for it), without the "
            "firmware's minutes of a large server's POST; the lab's VMs, which qemu boots with their image's "
            "kernel, reach an installed kernel only this way.",
        ),
        Key(
            "roll_primary",
            STRING,
            "switchover",
            '"switchover" or "in_place"',
            "`./dbzfs roll`: how a group's primary is converged once its replicas are",
            owner="day2.rolling",
            choices=("switchover", "in_place"),
            invalid="not a way to roll a primary",
            choice_fix='"switchover" (moved to a converged replica and back) or "in_place"',
            notes='"switchover": moved to a converged replica (runbooks/switchover.py), converged as that '
            "replica's replica, then moved back (writes refused for a switchover's seconds, twice); "
            '"in_place": converged where it is (a restart or a compression rewrite stops its server for as '
            "long as that takes). Set it on the primary; a group without replicas is converged in place.",
        ),
        Key(
            "hardware",
            MAPPING,
            None,
            '{"ram_bytes": 4 * 1024**3, "cpus": 2}',
            'the hardware the host is expected to have: {"ram_bytes": int, "cpus": int}',
            nullable=True,
            notes="Offline commands (validate, render) size settings from it; the deploy sizes from the live "
            "host's facts.",
        ),
        Key(
            "workload",
            STRING,
            "oltp",
            '"oltp" or "analytics"',
            "what the settings are sized for",
            owner="model.sizing",
            choices=("oltp", "analytics"),
            invalid="unknown workload",
        ),
    ),
    *_in(
        "drives",
        "roles.zfs",
        Key(
            "drives",
            LIST,
            [],
            '["/dev/disk/by-id/nvme-...", ...]',
            "the pool's drives: /dev/disk/by-id paths, in the order mirrors are formed",
            required="drives, or drive_pattern and drive_count, on every host",
            notes="Consecutive drives pair up, so list them balanced across controllers. Or leave it empty "
            "and give a glob under /dev/disk/by-id (drive_pattern) plus the number of drives it must match "
            "(drive_count).",
        ),
        Key(
            "drive_pattern",
            STRING,
            None,
            '"nvme-INTEL_SSDPE2KE064T8_*"',
            "a glob of the pool's drives' names under /dev/disk/by-id (instead of drives)",
            nullable=True,
        ),
        Key(
            "drive_count",
            INTEGER,
            None,
            "24",
            "how many drives drive_pattern must match",
            nullable=True,
            required="with drive_pattern",
        ),
        Key(
            "wipe_drives",
            LIST,
            [],
            '["/dev/disk/by-id/nvme-..."]',
            "drives this host may wipe before creating its pool: an explicit opt-in, by-id paths",
            notes="Without it the deploy refuses any drive that holds a partition table, a filesystem or a "
            "foreign pool.",
        ),
    ),
    *_in(
        "zfs_install",
        "roles.zfs",
        Key(
            "zfs_install",
            STRING,
            "dkms",
            '"dkms" or "prebuilt"',
            "how the ZFS module gets onto the host",
            choices=("dkms", "prebuilt"),
            invalid="not a way to install ZFS",
            choice_fix='"dkms" (the module compiled on the host) or "prebuilt" (from zfs_module_repository)',
            notes='"dkms": zfs-dkms from bookworm-backports compiles the module on the host (kernel headers '
            'and a compiler installed there; minutes per host and per kernel update). "prebuilt": the module '
            "built once per kernel (`./dbzfs zfs-repo`, docs/zfs-prebuilt.md) and installed with "
            "the matching ZFS tools from zfs_module_repository; a kernel the repository has no module for is "
            "refused before anything changes.",
        ),
        Key(
            "zfs_module_repository",
            MAPPING,
            None,
            '{"url": "http://apt.example.net/zfs-modules/", "suite": "bookworm", '
            '"key_file": "/etc/dbzfs/zfs-modules.asc"}',
            "the apt repository of the prebuilt modules: url, suite, key_file",
            nullable=True,
            required='zfs_install = "prebuilt" (and only then)',
            attr="module_repository",
            notes="key_file: the repository's public signing key (armored), on the machine that runs the "
            "deploy; apt verifies every download with it.",
        ),
    ),
    *_in(
        "pool",
        "roles.zfs",
        Key("zpool_name", STRING, "dbpool", '"dbpool"', "the pool's name", attr="pool.name"),
        Key(
            "zpool_mirror_width",
            INTEGER,
            2,
            "2",
            "drives per mirror vdev; 2 -> 12 mirrors over 24 drives",
            attr="pool.mirror_width",
        ),
        Key(
            "zpool_spares",
            INTEGER,
            0,
            "0 or 2",
            "hot spares taken from the end of the drive list (Let's Encrypt: 2)",
            attr="pool.spares",
        ),
        Key(
            "zpool_ashift",
            INTEGER,
            12,
            "12 or 13",
            "the pool's sector size, as a power of two: 12 = 4 KiB sectors",
            attr="pool.ashift",
            notes="Let's Encrypt measured 8 KiB flash pages on their P4610s and chose 13.",
        ),
        Key(
            "zpool_autoreplace",
            STRING,
            "on",
            '"on" or "off"',
            "the pool's autoreplace property: a new drive in a failed one's slot replaces it",
            choices=("on", "off"),
            invalid="must be on or off",
            choice_fix='use "on" or "off"',
            attr="pool.autoreplace",
        ),
        Key(
            "zpool_autotrim",
            STRING,
            "on",
            '"on" or "off"',
            "the pool's autotrim property: freed blocks are trimmed on the flash",
            choices=("on", "off"),
            invalid="must be on or off",
            choice_fix='use "on" or "off"',
            attr="pool.autotrim",
        ),
        Key(
            "zfs_capacity_threshold",
            INTEGER,
            80,
            "80",
            "percent of the pool in use that is alerted on; Heap saw ingestion slow past 80% "
            "[zfs-db-tuning.md]",
            attr="capacity_threshold",
        ),
        Key(
            "zed_email",
            STRING,
            "",
            '"dba-pager@example.com", or "" for none',
            'where the ZFS event daemon mails its notices; "" sends none',
            notes="Notices: a drive faulted or removed, a spare in use, a resilver or scrub finished. "
            "Without an address ZED logs to syslog and the Prometheus alerts page; with one the storage "
            "role installs "
            "`mail` (bsd-mailx), and the host's MTA must deliver it.",
        ),
    ),
    *_in(
        "datasets",
        "roles.zfs",
        Key(
            "zfs_compression",
            STRING,
            "lz4",
            '"lz4" or "zstd"',
            "compression of the engine's parent dataset (its children inherit it): lz4, zstd, zstd-N, "
            "zstd-fast-N",
            attr="compression",
        ),
        Key(
            "zfs_datasets",
            MAPPING,
            {
                "mariadb": {
                    "datastore": {
                        "mountpoint": "/datastore",
                        "atime": "off",
                        "xattr": "sa",
                        "dnodesize": "auto",
                        "acltype": "posixacl",
                        "recordsize": "128k",
                        "primarycache": "metadata",
                    },
                    "datastore/mysql": {
                        "mountpoint": "/datastore/mysql",
                        "recordsize": "16k",
                        "logbias": "throughput",
                        "redundant_metadata": "most",
                        "primarycache": "metadata",
                    },
                    "datastore/mysql-log": {
                        "mountpoint": "/datastore/mysql-log",
                        "recordsize": "128k",
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
                        "primarycache": "all",
                    },
                    "datastore/postgresql": {
                        "mountpoint": "/datastore/postgresql",
                        "recordsize": "32k",
                        "primarycache": "all",
                    },
                    "datastore/postgresql-wal": {
                        "mountpoint": "/datastore/postgresql-wal",
                        "recordsize": "128k",
                        "primarycache": "all",
                    },
                },
            },
            "the default from group_data/all.py",
            "per engine: dataset (relative to the pool) -> ZFS properties",
            attr="datasets",
            notes="Every dataset lives under the engine's parent (zfs_dataset_roles); the data lives in its "
            'children, never in the pool root [Let\'s Encrypt]. "mountpoint" is a property too: an absolute '
            "path, no spaces. MariaDB: InnoDB's buffer pool caches pages itself, so ARC keeps metadata only "
            "[OpenZFS]; recordsize 16k = InnoDB's page size; the redo log, binlog and relay log are "
            "sequential (128k). PostgreSQL relies on the OS cache, which on ZFS is the ARC [OpenZFS]; its "
            "data "
            "recordsize is 32k per OpenZFS (Heap ran 64k for a better compression ratio on analytics).",
        ),
        Key(
            "zfs_dataset_roles",
            MAPPING,
            {
                "mariadb": {"parent": "datastore", "data": "datastore/mysql", "log": "datastore/mysql-log"},
                "postgresql": {
                    "parent": "datastore",
                    "data": "datastore/postgresql",
                    "log": "datastore/postgresql-wal",
                },
            },
            "the default from group_data/all.py",
            "per engine: which of its zfs_datasets is which, by name (parent, data, log)",
            attr="dataset_roles",
            notes='"parent" holds no data and gets zfs_compression (its children inherit it); "data" holds '
            "the tables (MariaDB's datadir, PostgreSQL's data_directory); \"log\" holds the redo log, binlog "
            "and relay log (MariaDB) or the WAL (PostgreSQL).",
        ),
        Key(
            "zfs_dataset_properties",
            MAPPING,
            {},
            '{"datastore/postgresql": {"recordsize": "64k"}}',
            "per-dataset property overrides merged over zfs_datasets",
            attr="datasets",
        ),
        Key(
            "zfs_module_params",
            MAPPING,
            {},
            '{"zfs_txg_timeout": 10}',
            "ZFS module parameters merged over the sized ones (zfs_arc_max, zfs_prefetch_disable)",
            owner="roles.render",
            attr="module_params",
            notes="Names from zfs(4), integer values in the parameter's own unit (bytes for zfs_arc_max: no "
            '"4G").',
        ),
    ),
    *_in(
        "snapshots",
        "roles.snapshots",
        Key(
            "snapshot_on",
            STRING,
            "replica",
            '"replica", "primary", "every_host" or "none"',
            "where the engine's snapshots are taken",
            choices=("replica", "primary", "every_host", "none"),
            invalid="not a choice of the hosts that take snapshots",
            choice_fix="one of {quoted}",
            notes="One atomic `zfs snapshot` of its data and log datasets, with the GTID or LSN they hold, "
            'every 15 minutes when one is due. "replica": on the servers that are replicas when the job '
            "runs, keeping the load off the primary (a group without replicas takes them on its primary); "
            '"primary", "every_host", or "none". Every host\'s sanoid prunes what it holds, by '
            "snapshot_retention.",
        ),
        Key(
            "snapshot_retention",
            MAPPING,
            {
                "mariadb": {"frequently": 0, "hourly": 36, "daily": 30, "monthly": 3},
                "postgresql": {"frequently": 0, "hourly": 36, "daily": 30, "monthly": 3},
            },
            '{"mariadb": {"hourly": 36, "daily": 30}, "postgresql": {...}}',
            "per engine: how many snapshots of each kind sanoid keeps",
            notes=_KINDS_NOTE,
        ),
    ),
    *_in(
        "backups",
        "roles.backup",
        Key(
            "backup_pull_minutes",
            INTEGER,
            15,
            "15",
            "a backup host's minutes between two pulls (a pull sends only what is new)",
        ),
        Key(
            "backup_retention",
            MAPPING,
            {
                "mariadb": {"hourly": 48, "daily": 35, "monthly": 12},
                "postgresql": {"hourly": 48, "daily": 35, "monthly": 12},
            },
            '{"mariadb": {"hourly": 48, "daily": 35}, "postgresql": {...}}',
            "per engine: how many of the copies of each kind the backup host keeps",
            notes="Its own sanoid prunes; the database hosts' counts are snapshot_retention's. "
            + _KINDS_NOTE,
        ),
        Key(
            "backup_max_age_hours",
            INTEGER,
            2,
            "2",
            "the oldest the newest copy of a host that takes snapshots may be on the backup host (alerted)",
            owner="roles.monitoring_rules",
        ),
    ),
    *_in(
        "pitr",
        "roles.pgbackrest",
        Key(
            "pitr_archive_timeout",
            INTEGER,
            60,
            "60 (seconds)",
            "seconds: at most this much committed work waits for its WAL to ship (archive_timeout)",
        ),
        Key(
            "pgbackrest_retention_full",
            INTEGER,
            2,
            "2",
            "full backups kept per replication group (and the WAL they need)",
        ),
        Key(
            "pgbackrest_repository_snapshots",
            MAPPING,
            {"hourly": 24, "daily": 7},
            '{"hourly": 24, "daily": 7}',
            "the backup host's own snapshots of the repository, per kind as in snapshot_retention",
            notes="Taken and pruned by its sanoid: pgBackRest lets every PostgreSQL host write and delete "
            "files in the repository (its remote protocol), not touch these, so a bad or hostile write "
            "can be undone.",
        ),
        Key(
            "pgbackrest_full_calendar",
            STRING,
            "Sun *-*-* 01:00",
            '"Sun *-*-* 01:00"',
            "systemd OnCalendar: when the full backups run",
        ),
        Key(
            "pgbackrest_incr_calendar",
            STRING,
            "Mon..Sat *-*-* 01:00",
            '"Mon..Sat *-*-* 01:00"',
            "systemd OnCalendar: when the incremental backups (since the last backup) run",
        ),
        Key(
            "pgbackrest_backup_max_age_hours",
            INTEGER,
            26,
            "26",
            "the oldest the newest backup of a stanza may be before PgbackrestBackupFailing fires",
            owner="roles.monitoring_rules",
            notes="The daily backup at 01:00 plus slack for a long one or a late start. Keep it above the "
            "longest gap between two backups of the calendars.",
        ),
    ),
    *_in(
        "database",
        "roles.render",
        Key(
            "db_settings",
            MAPPING,
            {},
            '{"innodb_io_capacity": 2000}',
            "overrides of any server setting, rendered last: my.cnf [mysqld] or postgresql.conf keys",
            notes='By their own names, e.g. {"innodb_io_capacity": 2000} or {"work_mem": "8MB"}. Checked by '
            "engines/db_settings.py: names, values as the server reads them, settings the toolkit owns, RAM.",
        ),
        Key(
            "max_connections",
            INTEGER,
            None,
            "500, or None for the sized default",
            "the server's max_connections; None: the sizing default for the engine and workload",
            owner="model.sizing",
            nullable=True,
        ),
        Key(
            "db_client_networks",
            LIST,
            [],
            '["10.1.0.0/16"]',
            "networks application clients connect from (CIDR); replication peers are allowed separately",
            attr="client_networks",
        ),
        Key(
            "databases",
            LIST,
            [],
            '[{"name": "app"}]',
            'application databases, e.g. [{"name": "app", "owner": "app"}]',
            owner="roles.mariadb",
            notes="PostgreSQL: owner names one of db_users (roles/postgresql.py).",
        ),
        Key(
            "db_users",
            LIST,
            [],
            '[{"name": "app", "password_secret": "app_password"}]',
            "application users; each user's password is read from the secrets under password_secret",
            owner="roles.mariadb",
            notes="Passwords are never data: the secret named by password_secret (environment or secrets "
            'file). Example: [{"name": "app", "password_secret": "app_password", "privileges": "...", '
            '"database": "app"}]; MariaDB users take privileges, PostgreSQL users owner.',
        ),
    ),
    *keys_monitoring.DEFINITIONS,
    *keys_security.DEFINITIONS,
)

KEYS: dict[str, Key] = {k.name: k for k in _DEFINITIONS}


def defaults() -> dict[str, object]:
    """Every key's default (fresh copies): group_data/all.py's names."""
    return {name: copy.deepcopy(k.default) for name, k in KEYS.items()}


def default(name: str) -> object:
    return copy.deepcopy(KEYS[name].default)


def choices(name: str) -> tuple[str, ...]:
    return KEYS[name].choices
