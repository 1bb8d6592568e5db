"""Checks an inventory's complete data before any host is touched.

`validate(hosts, secrets)` returns every problem at once, each naming the host, the key, the value
and the fix. deploy.py runs it before any operation; `./dbzfs validate INVENTORY` (this module's
main) runs it with no SSH at all.
"""

from __future__ import annotations

import difflib
import fnmatch
import ipaddress
import math
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engines import db_settings
from model import secrets as secrets_mod
from model.hostdata import BY_ID, HostConfig, parse_size
from model.problems import InventoryError, Problem, ValidationError, format_problems
from roles import backup, monitoring_rules, pgbackrest, render, snapshots, zfs_module_params, zfs_packages

REPO_ROOT = Path(__file__).resolve().parent.parent

ENGINES = ("mariadb", "postgresql")
ROLES = ("primary", "replica")  # a database host's
HOST_ROLES = (*ROLES, backup.ROLE)
WORKLOADS = ("oltp", "analytics")
COMPRESSION_RE = re.compile(
    r"^(on|off|lz4|lzjb|gzip(-[1-9])?|zle|zstd(-([1-9]|1[0-9]))?"
    r"|zstd-fast(-([1-9]|[1-9][0-9]|[1-9]00|1000))?)$"
)
DATASET_PROPERTIES = {
    "mountpoint",
    "atime",
    "relatime",
    "xattr",
    "dnodesize",
    "acltype",
    "recordsize",
    "primarycache",
    "secondarycache",
    "logbias",
    "redundant_metadata",
    "compression",
    "sync",
    "checksum",
    "copies",
    "quota",
    "refquota",
    "reservation",
    "refreservation",
    "snapdir",
    "special_small_blocks",
    "canmount",
    "exec",
    "setuid",
    "devices",
}
ON_OFF = ("on", "off")
CHOICES = {
    "atime": ON_OFF,
    "relatime": ON_OFF,
    "exec": ON_OFF,
    "setuid": ON_OFF,
    "devices": ON_OFF,
    "xattr": ("on", "off", "sa", "dir"),
    "dnodesize": ("legacy", "auto", "1k", "2k", "4k", "8k", "16k"),
    "acltype": ("off", "noacl", "posixacl", "posix", "nfsv4"),
    "primarycache": ("all", "metadata", "none"),
    "secondarycache": ("all", "metadata", "none"),
    "logbias": ("latency", "throughput"),
    "redundant_metadata": ("all", "most", "some", "none"),
    "sync": ("standard", "always", "disabled"),
    "canmount": ("on", "off", "noauto"),
    "checksum": (
        "on",
        "off",
        "fletcher2",
        "fletcher4",
        "sha256",
        "noparity",
        "sha512",
        "skein",
        "edonr",
        "blake3",
    ),
    "snapdir": ("hidden", "visible"),
    "copies": ("1", "2", "3"),
}
# Properties holding a byte count, written as ZFS takes them: 16k, 16K, 16KiB, 1.5M, 16384.
SIZE_PROPERTIES = {"recordsize", "quota", "refquota", "reservation", "refreservation", "special_small_blocks"}
NONE_SIZE_PROPERTIES = {"quota", "refquota", "reservation", "refreservation"}
# zfs_nicestrtonum (libzfs): digits, an optional fraction, then B or one of KMGTPEZ followed by
# nothing, B or iB (any case). No space between number and unit.
ZFS_SIZE_RE = re.compile(r"^(\d+(\.\d*)?|\.\d+)(B|[KMGTPEZ](i?B)?)?$", re.IGNORECASE)
# A dataset's name relative to the pool: components of letters, digits, _ . : - (zfs(8)).
DATASET_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]+(/[A-Za-z0-9_.:-]+)*$")
# Mountpoints go into systemd units, my.cnf and postgresql.conf unquoted: absolute, no spaces,
# no empty, "." or ".." components, no trailing slash.
MOUNTPOINT_RE = re.compile(r"^(/[A-Za-z0-9_.@+:-]+)+$")
# zpool-create(8): a letter first, then letters, digits, _ - : . (we leave out the space, which
# the scrub timer's unit name cannot hold). The names mirror, raidz, draid, spare and log are
# reserved, as are names beginning with mirror, raidz, draid and spare; names beginning with the
# other vdev keywords (log, cache, special, dedup) or with c[0-9] (a Solaris disk name) read as
# vdevs on a zpool command line and are refused too.
POOL_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]*$")
POOL_RESERVED_PREFIXES = ("mirror", "raidz", "draid", "spare", "log", "cache", "special", "dedup")
DATASET_ROLES = ("parent", "data", "log")
ROLL_PRIMARY = ("switchover", "in_place")  # `./dbzfs roll` (group_data/all.py)
# Keys group_data/all.py once documented and nothing reads any more: setting one is a mistake.
RETIRED_KEYS = {
    "db_port": "nothing reads it: the servers listen on their default port (MariaDB 3306, "
    "PostgreSQL 5432); remove it",
}
OUR_PREFIXES = ("zpool_", "zfs_", "db_", "drive", "wipe_")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

_STR, _INT, _LIST, _MAP = "a string", "an integer", "a list", "a mapping"
_NUM = "a number"
_BOOL = "a boolean"
# What each key of group_data/all.py holds: (type, None allowed, an example). Checked before any
# rule reads the data: a key of the wrong type gets one message, and every rule that depends on
# it is skipped. The nested values of lists and mappings are checked by _Checker.type_<key>.
KEY_TYPES: dict[str, tuple[str, bool, str]] = {
    "engine": (_STR, True, '"mariadb" or "postgresql"'),
    "role": (_STR, True, '"primary", "replica" or "backup"'),
    "primary": (_STR, True, 'the primary\'s inventory name, e.g. "db01"'),
    "cluster": (_STR, True, 'a replication group name, e.g. "boulder"'),
    "server_id": (_INT, True, "1 (unique within the replication group)"),
    "replication_address": (_STR, True, '"10.20.0.11"'),
    "roll_primary": (_STR, False, '"switchover" or "in_place"'),
    "hardware": (_MAP, True, '{"ram_bytes": 4 * 1024**3, "cpus": 2}'),
    "workload": (_STR, False, '"oltp" or "analytics"'),
    "drives": (_LIST, False, '["/dev/disk/by-id/nvme-...", ...]'),
    "drive_pattern": (_STR, True, '"nvme-INTEL_SSDPE2KE064T8_*"'),
    "drive_count": (_INT, True, "24"),
    "wipe_drives": (_LIST, False, '["/dev/disk/by-id/nvme-..."]'),
    "zpool_name": (_STR, False, '"dbpool"'),
    "zpool_mirror_width": (_INT, False, "2"),
    "zpool_spares": (_INT, False, "0 or 2"),
    "zpool_ashift": (_INT, False, "12 or 13"),
    "zpool_autoreplace": (_STR, False, '"on" or "off"'),
    "zpool_autotrim": (_STR, False, '"on" or "off"'),
    "zfs_capacity_threshold": (_INT, False, "80"),
    "zed_email": (_STR, False, '"dba-pager@example.com", or "" for none'),
    "snapshot_on": (_STR, False, '"replica", "primary", "every_host" or "none"'),
    "snapshot_retention": (_MAP, False, '{"mariadb": {"hourly": 36, "daily": 30}, "postgresql": {...}}'),
    "backup_pull_minutes": (_INT, False, "15"),
    "backup_retention": (_MAP, False, '{"mariadb": {"hourly": 48, "daily": 35}, "postgresql": {...}}'),
    "backup_max_age_hours": (_INT, False, "2"),
    "pitr_archive_timeout": (_INT, False, "60 (seconds)"),
    "pgbackrest_retention_full": (_INT, False, "2"),
    "pgbackrest_repository_snapshots": (_MAP, False, '{"hourly": 24, "daily": 7}'),
    "pgbackrest_full_calendar": (_STR, False, '"Sun *-*-* 01:00"'),
    "pgbackrest_incr_calendar": (_STR, False, '"Mon..Sat *-*-* 01:00"'),
    "pgbackrest_backup_max_age_hours": (_INT, False, "26"),
    "zfs_compression": (_STR, False, '"lz4" or "zstd"'),
    "zfs_datasets": (_MAP, False, "the default from group_data/all.py"),
    "zfs_dataset_roles": (_MAP, False, "the default from group_data/all.py"),
    "zfs_dataset_properties": (_MAP, False, '{"datastore/postgresql": {"recordsize": "64k"}}'),
    "zfs_module_params": (_MAP, False, '{"zfs_txg_timeout": 10}'),
    "zfs_install": (_STR, False, '"dkms" or "prebuilt"'),
    "zfs_module_repository": (
        _MAP,
        True,
        '{"url": "http://apt.example.net/zfs-modules/", "suite": "bookworm", '
        '"key_file": "/etc/dbzfs/zfs-modules.asc"}',
    ),
    "db_settings": (_MAP, False, '{"innodb_io_capacity": 2000}'),
    "max_connections": (_INT, True, "500, or None for the sized default"),
    "db_client_networks": (_LIST, False, '["10.1.0.0/16"]'),
    "databases": (_LIST, False, '[{"name": "app"}]'),
    "db_users": (_LIST, False, '[{"name": "app", "password_secret": "app_password"}]'),
    "prometheus_server": (_BOOL, False, "True (group_data/monitoring.py sets it)"),
    "node_exporter_port": (_INT, False, "9100"),
    "node_exporter_disabled_collectors": (_LIST, False, '["systemd", "hwmon"]'),
    "mysqld_exporter_port": (_INT, False, "9104"),
    "postgres_exporter_port": (_INT, False, "9187"),
    "prometheus_port": (_INT, False, "9090"),
    "prometheus_scrape_interval": (_STR, False, '"15s"'),
    "prometheus_retention": (_STR, False, '"15d"'),
    "zfs_metrics_interval": (_INT, False, "60 (seconds)"),
    "replica_lag_alert_seconds": (_INT, False, "300"),
    "replication_slot_alert_bytes": (_INT, False, "10 * 1024**3"),
    "arc_metadata_hit_ratio_alert": (_NUM, False, "0.9"),
    "scrub_max_age_days": (_INT, False, "35"),
    "snapshot_max_age_hours": (_INT, False, "26"),
    "alert_for": (_MAP, False, '{"ZpoolNotOnline": "1m"}'),
}
# Keys the toolkit reads (group_data/all.py documents each); a misspelt one is an error, not a
# silent default.
KNOWN_KEYS = set(KEY_TYPES)
COLLECTOR_NAME = re.compile(r"[a-z][a-z0-9_]*")
# node_exporter collectors whose metrics the alert rules read (roles/monitoring_rules.py).
ALERTED_COLLECTORS = {
    "textfile": "the pool, scrub and snapshot alerts: dbzfs_* from the ZFS collector of ours",
    "zfs": "ArcMetadataHitRatioLow: node_zfs_arc_demand_metadata_*",
}
ZED_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+")


# What a db_users entry may say, per engine. PostgreSQL users get CONNECT on their database (or own
# it); table privileges are the application's migrations' business there.
USER_KEYS = {
    "mariadb": {"name", "password_secret", "database", "privileges"},
    "postgresql": {"name", "password_secret", "database", "owner"},
}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_privileges(value: object) -> bool:
    """MariaDB privileges: "SELECT,INSERT" or a list of names."""
    return isinstance(value, str) or (
        isinstance(value, (list, tuple)) and all(isinstance(p, str) for p in value)
    )


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(value: object) -> str:
    """What a value is, in the words the messages use."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "a list"
    return f"a {type(value).__name__}"


def _has_kind(value: object, kind: str) -> bool:
    if kind == _STR:
        return isinstance(value, str)
    if kind == _INT:
        return _is_int(value)
    if kind == _LIST:
        return isinstance(value, (list, tuple))
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _NUM:
        return _is_int(value) or (isinstance(value, float) and math.isfinite(value))
    return isinstance(value, Mapping)


def _close(word: str, choices: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(word, sorted(choices), n=3, cutoff=0.75)


def _size_ok(value: object) -> bool:
    """A byte count as `zfs set` takes it (and parse_size reads it)."""
    if _is_int(value):
        return value >= 0
    return isinstance(value, str) and bool(ZFS_SIZE_RE.match(value)) and parse_size_or_none(value) is not None


def parse_size_or_none(value: object) -> int | None:
    try:
        return parse_size(value)
    except ValueError:
        return None


class _Checker:
    def __init__(self, hosts: Mapping[str, Mapping], secrets: secrets_mod.Secrets):
        self.problems: list[Problem] = []
        self.secrets = secrets
        # Per host: the keys whose type is wrong (reported once; rules reading them are skipped).
        self.bad: dict[str, set[str]] = {}
        # Per host: its data without those keys, so HostConfig and the rules never see them.
        self.data: dict[str, dict] = {}
        for name, data in hosts.items():
            if not isinstance(data, Mapping):
                self.add(
                    str(name),
                    "host data",
                    data,
                    f"is {_kind(data)}, not a mapping",
                    'list the host as ("name", {"engine": ..., ...})',
                )
                continue
            self.data[name] = self.types(name, data)
        self.cfg = {name: HostConfig.from_data(name, data) for name, data in self.data.items()}
        # Hosts whose parent, data and log datasets are named and declared.
        self.named: set[str] = set()

    def add(self, host: str | None, key: str, value: object, message: str, fix: str = "") -> None:
        self.problems.append(Problem(host, key, value, message, fix))

    def ok(self, c: HostConfig | str, *keys: str) -> bool:
        """None of these keys had the wrong type (so rules may read them)."""
        name = c if isinstance(c, str) else c.name
        return not (self.bad.get(name, set()) & set(keys))

    def run(self) -> list[Problem]:
        for name, cfg in self.cfg.items():
            self.keys(name)
            self.identity(cfg)
            self.drives(cfg)
            self.pool(cfg)
            if cfg.is_backup_host:
                self.zfs_install(cfg)
                self.backup_host(cfg)
                self.pitr(cfg)
                self.monitoring(cfg)
                continue
            self.datasets(cfg)
            self.module_params(cfg)
            self.zfs_install(cfg)
            self.roll_primary(cfg)
            self.snapshots(cfg)
            self.monitoring(cfg)
            self.database(cfg)
            if cfg.engine == "postgresql":
                self.pitr(cfg)
        self.fleet_drives()
        self.clusters()
        self.backups()
        self.scraped()
        return self.problems

    # --- types, first --------------------------------------------------------------------------

    def types(self, name: str, data: Mapping) -> dict:
        """The host's data with every key of the wrong type (at any depth) reported and left
        out: HostConfig.from_data then falls back to its defaults for it."""
        clean = dict(data)
        bad = self.bad.setdefault(name, set())
        for key, (kind, nullable, example) in KEY_TYPES.items():
            if key not in data:
                continue
            value = data[key]
            if value is None and nullable:
                continue
            if not _has_kind(value, kind):
                expected = f"{kind} or None" if nullable else kind
                fix = f"e.g. {example}"
                if value is None:
                    fix = f"set {kind} ({fix}), or remove the key for the default"
                self.add(name, key, value, f"must be {expected}, not {_kind(value)}", fix)
                ok = False
            else:
                nested = getattr(self, f"type_{key}", None)
                ok = nested(name, key, value) if nested else True
            if not ok:
                bad.add(key)
                del clean[key]
        return clean

    def type_items(self, name: str, key: str, items: Sequence[Any], kind: str, example: str) -> bool:
        good = True
        for i, item in enumerate(items):
            if not _has_kind(item, kind):
                self.add(name, f"{key}[{i}]", item, f"must be {kind}, not {_kind(item)}", f"e.g. {example}")
                good = False
        return good

    def type_drives(self, name: str, key: str, value: Sequence[object]) -> bool:
        return self.type_items(name, key, value, _STR, '"/dev/disk/by-id/nvme-..."')

    type_wipe_drives = type_drives

    def type_db_client_networks(self, name: str, key: str, value: Sequence[object]) -> bool:
        return self.type_items(name, key, value, _STR, '"10.1.0.0/16"')

    def type_hardware(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        good = True
        for field in sorted(set(value) - {"ram_bytes", "cpus"}, key=str):
            self.add(
                name, f"{key}[{field!r}]", value[field], "unknown hardware key", "use only ram_bytes and cpus"
            )
            good = False
        missing = [field for field in ("ram_bytes", "cpus") if field not in value]
        if missing:
            self.add(
                name,
                key,
                value,
                f"misses {' and '.join(missing)}",
                'give both, e.g. {"ram_bytes": 4 * 1024**3, "cpus": 2}',
            )
            good = False
        for field in ("ram_bytes", "cpus"):
            if field in missing:
                continue
            elif not _is_int(value[field]):
                self.add(
                    name,
                    f"{key}[{field!r}]",
                    value[field],
                    f"must be an integer, not {_kind(value[field])}",
                    "bytes as an integer, e.g. 4 * 1024**3" if field == "ram_bytes" else "a count, e.g. 2",
                )
                good = False
        return good

    def type_engine_keys(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        """A mapping keyed by engine: no other keys, each value a mapping."""
        good = True
        for engine, per_engine in value.items():
            where = f"{key}[{engine!r}]"
            if engine not in ENGINES:
                self.add(name, where, per_engine, "not an engine", f"key it by engine: {list(ENGINES)}")
                good = False
            elif not isinstance(per_engine, Mapping):
                self.add(
                    name,
                    where,
                    per_engine,
                    f"must be a mapping, not {_kind(per_engine)}",
                    "keep the shape of the default in group_data/all.py",
                )
                good = False
        return good

    def type_properties(self, name: str, where: str, props: object) -> bool:
        """dataset -> {property: value}: property names are strings, values strings or
        integers (ZFS takes text; on/off are words, not booleans)."""
        if not isinstance(props, Mapping):
            self.add(
                name,
                where,
                props,
                f"must be a mapping of property -> value, not {_kind(props)}",
                'e.g. {"recordsize": "16k"}',
            )
            return False
        good = True
        for prop, value in props.items():
            if not isinstance(prop, str):
                self.add(
                    name, f"{where}[{prop!r}]", value, "a property name must be a string", 'e.g. "recordsize"'
                )
                good = False
            elif not (isinstance(value, str) or _is_int(value)):
                self.add(
                    name,
                    f"{where}[{prop!r}]",
                    value,
                    f"must be a string or an integer, not {_kind(value)}",
                    'write it as zfs set takes it, e.g. "16k", "off", "/datastore/mysql"',
                )
                good = False
        return good

    def type_zfs_datasets(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        if not self.type_engine_keys(name, key, value):
            return False
        good = True
        for engine, datasets in value.items():
            good = self.type_zfs_dataset_properties(name, f"{key}[{engine!r}]", datasets) and good
        return good

    def type_snapshot_retention(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        """engine -> {kind: count}."""
        if not self.type_engine_keys(name, key, value):
            return False
        good = True
        for engine, retention in value.items():
            good = self.kind_counts(name, f"{key}[{engine!r}]", retention) and good
        return good

    def kind_counts(self, name: str, where: str, retention: Mapping[Any, Any]) -> bool:
        """{kind: count}: kinds sanoid knows, counts whole numbers >= 0."""
        good = True
        for kind, count in retention.items():
            at = f"{where}[{kind!r}]"
            if kind not in snapshots.KINDS:
                close = _close(str(kind), snapshots.KINDS)
                fix = f"did you mean {close[0]!r}?" if close else f"one of {', '.join(snapshots.KINDS)}"
                self.add(name, at, count, "not a kind of snapshot sanoid keeps", fix)
                good = False
            elif not _is_int(count) or count < 0:
                self.add(name, at, count, "not a count", "a whole number >= 0, e.g. 36")
                good = False
        return good

    def type_backup_retention(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        return self.type_snapshot_retention(name, key, value)

    def type_pgbackrest_repository_snapshots(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        return self.kind_counts(name, key, value)

    def type_zfs_dataset_roles(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        if not self.type_engine_keys(name, key, value):
            return False
        good = True
        for engine, roles in value.items():
            where = f"{key}[{engine!r}]"
            for role in sorted(set(roles) - set(DATASET_ROLES), key=str):
                self.add(
                    name,
                    f"{where}[{role!r}]",
                    roles[role],
                    "not a dataset role",
                    f"use only {', '.join(DATASET_ROLES)}",
                )
                good = False
            for role in DATASET_ROLES:
                if role not in roles:
                    self.add(
                        name,
                        f"{where}[{role!r}]",
                        None,
                        "missing",
                        f"name the {role} dataset of {engine}, one of zfs_datasets[{engine!r}]",
                    )
                    good = False
                elif not isinstance(roles[role], str):
                    self.add(
                        name,
                        f"{where}[{role!r}]",
                        roles[role],
                        f"must be a dataset name (a string), not {_kind(roles[role])}",
                        "keep the default from group_data/all.py",
                    )
                    good = False
        return good

    def type_zfs_dataset_properties(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        good = True
        for ds, props in value.items():
            where = f"{key}[{ds!r}]"
            if not isinstance(ds, str):
                self.add(
                    name,
                    where,
                    props,
                    "a dataset name must be a string",
                    'e.g. "datastore/mysql" or "datastore/postgresql"',
                )
                good = False
            else:
                good = self.type_properties(name, where, props) and good
        return good

    def type_zfs_module_params(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        good = True
        for param, setting in value.items():
            where = f"{key}[{param!r}]"
            if not isinstance(param, str):
                self.add(name, where, setting, "a parameter name must be a string", 'e.g. "zfs_txg_timeout"')
                good = False
            elif not _is_int(setting):
                size = parse_size_or_none(setting) if isinstance(setting, str) else None
                fix = (
                    f"write {size} (bytes)"
                    if size is not None and not str(setting).isdigit()
                    else "an integer in the parameter's unit, e.g. 4294967296 for 4 GiB"
                )
                if isinstance(setting, str) and setting.strip().isdigit():
                    fix = f"write it as a number: {int(setting)}"
                self.add(
                    name,
                    where,
                    setting,
                    f"must be an integer, not {_kind(setting)}: the kernel takes integers "
                    "only (no unit suffixes, no fractions)",
                    fix,
                )
                good = False
        return good

    def type_db_settings(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        good = True
        for setting, setting_value in value.items():
            where = f"{key}[{setting!r}]"
            if not isinstance(setting, str) or not setting:
                self.add(
                    name,
                    where,
                    setting_value,
                    "a setting name must be a non-empty string",
                    'e.g. "innodb_io_capacity" or "work_mem"',
                )
                good = False
            elif not (isinstance(setting_value, (str, bool)) or _is_number(setting_value)):
                self.add(
                    name,
                    where,
                    setting_value,
                    f"must be a single value (string, number or boolean), not {_kind(setting_value)}",
                    'write it as the server\'s config file takes it, e.g. 2000 or "8MB"; '
                    "remove the key for the sized default",
                )
                good = False
        return good

    def type_entries(self, name: str, key: str, entries: Sequence[Any], fields: Mapping[str, tuple]) -> bool:
        """A list of mappings; fields: field -> (check, what it must be, example); "name" is
        required."""
        good = True
        for i, entry in enumerate(entries):
            where = f"{key}[{i}]"
            if not isinstance(entry, Mapping):
                self.add(
                    name,
                    where,
                    entry,
                    f"must be a mapping, not {_kind(entry)}",
                    f"e.g. {KEY_TYPES[key][2][1:-1]}",
                )
                good = False
                continue
            for field in sorted(set(entry) - set(fields), key=str):
                self.add(
                    name,
                    f"{where}.{field}",
                    entry[field],
                    f"not a {key} setting",
                    f"use only {', '.join(fields)}",
                )
                good = False
            if "name" not in entry:
                self.add(name, f"{where}.name", None, "missing", f"e.g. {KEY_TYPES[key][2][1:-1]}")
                good = False
            for field, (check, must, example) in fields.items():
                if field in entry and not check(entry[field]):
                    self.add(
                        name,
                        f"{where}.{field}",
                        entry[field],
                        f"must be {must}, not {_kind(entry[field])}",
                        f"e.g. {example}",
                    )
                    good = False
        return good

    def type_databases(self, name: str, key: str, value: Sequence[object]) -> bool:
        return self.type_entries(
            name,
            key,
            value,
            {
                "name": (_is_str, _STR, '"app"'),
                "owner": (_is_str, "a user's name (a string)", '"app"'),
            },
        )

    def type_db_users(self, name: str, key: str, value: Sequence[object]) -> bool:
        return self.type_entries(
            name,
            key,
            value,
            {
                "name": (_is_str, _STR, '"app"'),
                "password_secret": (_is_str, "a secret's name (a string)", '"app_password"'),
                "database": (_is_str, "a database's name (a string)", '"app"'),
                "privileges": (_is_privileges, "a string or a list of strings", '"SELECT,INSERT"'),
                "owner": (_is_bool, "true or false", "True"),
            },
        )

    # --- per host ----------------------------------------------------------------------------

    def keys(self, name: str) -> None:
        for key in self.data[name]:
            value = self.data[name][key]
            if not isinstance(key, str):
                self.add(
                    name, repr(key), value, "a setting's name must be a string", 'e.g. "zpool_ashift": 13'
                )
                continue
            if key in KNOWN_KEYS:
                continue
            if key in RETIRED_KEYS:
                self.add(name, key, value, "unknown key", RETIRED_KEYS[key])
            elif key.startswith(OUR_PREFIXES):
                close = _close(key, KNOWN_KEYS) or sorted(k for k in KNOWN_KEYS if k.startswith(key[:5]))
                hint = f"did you mean one of {close}?" if close else "remove it"
                self.add(name, key, value, "unknown key", hint)
            elif _close(key, KNOWN_KEYS):  # e.g. "replication_adress": a silent default
                self.add(name, key, value, "unknown key", f"did you mean one of {_close(key, KNOWN_KEYS)}?")

    def identity(self, c: HostConfig) -> None:
        if c.is_backup_host:
            self.backup_identity(c)
            return
        if self.ok(c, "engine") and c.engine not in ENGINES:
            self.add(c.name, "engine", c.engine, "unknown engine", f"use one of {list(ENGINES)}")
        if self.ok(c, "role") and c.role not in HOST_ROLES:
            self.add(c.name, "role", c.role, "unknown role", f"use one of {list(HOST_ROLES)}")
        if self.ok(c, "workload") and c.workload not in WORKLOADS:
            self.add(c.name, "workload", c.workload, "unknown workload", f"use one of {list(WORKLOADS)}")
        if not self.ok(c, "engine", "server_id"):
            pass
        elif c.engine == "mariadb" and not (_is_int(c.server_id) and 1 <= c.server_id < 2**32):
            self.add(
                c.name,
                "server_id",
                c.server_id,
                "MariaDB needs a unique server_id",
                "set an integer 1..4294967295, unique within the replication group",
            )
        elif c.engine == "postgresql" and c.server_id is not None:
            self.add(
                c.name,
                "server_id",
                c.server_id,
                "PostgreSQL has no server_id (it would be ignored)",
                "remove it",
            )
        if self.ok(c, "replication_address") and c.replication_address is not None:
            try:
                address = ipaddress.ip_address(c.replication_address)
            except ValueError:
                self.add(
                    c.name,
                    "replication_address",
                    c.replication_address,
                    "not an IP address",
                    "set the host's address on the replication network",
                )
            else:
                if address.is_unspecified or address.is_loopback or address.is_multicast:
                    self.add(
                        c.name,
                        "replication_address",
                        c.replication_address,
                        "other hosts cannot reach this host at that address",
                        "set the host's own address on the replication network",
                    )
        hw = c.hardware
        if (
            self.ok(c, "hardware")
            and hw is not None
            and not (hw["ram_bytes"] >= 2 * 1024**3 and hw["cpus"] >= 1)
        ):
            self.add(
                c.name,
                "hardware",
                hw,
                "needs ram_bytes >= 2 GiB and cpus >= 1",
                'e.g. {"ram_bytes": 4 * 1024**3, "cpus": 2}',
            )
        if (
            self.ok(c, "max_connections")
            and c.max_connections is not None
            and not (1 <= c.max_connections <= 100000)
        ):
            self.add(
                c.name,
                "max_connections",
                c.max_connections,
                "out of range",
                "an integer 1..100000, or None for the sized default",
            )
        for net in c.client_networks:
            try:
                network = ipaddress.ip_network(net)
            except ValueError:
                self.add(
                    c.name,
                    "db_client_networks",
                    net,
                    "not a network",
                    'use CIDR notation, e.g. "10.1.0.0/16"',
                )
                continue
            if c.engine == "mariadb" and network.version == 6 and network.num_addresses > 1:
                self.add(
                    c.name,
                    "db_client_networks",
                    net,
                    "MariaDB accounts cannot match an IPv6 network (netmasks are IPv4 only)",
                    "list IPv4 networks, or single IPv6 addresses (/128)",
                )

    def drives(self, c: HostConfig) -> None:
        if not self.ok(c, "drives", "drive_pattern", "drive_count"):
            return
        if c.drives and c.drive_pattern:
            self.add(c.name, "drives", c.drives, "both drives and drive_pattern are set", "keep one of them")
        if not c.drives and not c.drive_pattern:
            self.add(
                c.name,
                "drives",
                c.drives,
                "no drives declared",
                "list /dev/disk/by-id paths in drives, or set drive_pattern and drive_count",
            )
            return
        if c.drives:
            for d in c.drives:
                if not str(d).startswith(BY_ID) or "/" in str(d)[len(BY_ID) :]:
                    self.add(
                        c.name,
                        "drives",
                        d,
                        "not a /dev/disk/by-id path",
                        "name every drive by its stable id (ls -l /dev/disk/by-id)",
                    )
                elif re.search(r"-part\d+$", str(d)):
                    self.add(
                        c.name, "drives", d, "is a partition", "give ZFS the whole drive, without -partN"
                    )
            dupes = sorted({d for d in c.drives if c.drives.count(d) > 1})
            for d in dupes:
                self.add(c.name, "drives", d, "listed more than once", "list each drive once")
        else:
            if "/" in c.drive_pattern or not c.drive_pattern.strip() or re.search(r"\s", c.drive_pattern):
                self.add(
                    c.name,
                    "drive_pattern",
                    c.drive_pattern,
                    "must be a glob of names under /dev/disk/by-id, without a path or spaces",
                    'e.g. "nvme-INTEL_SSDPE2KE064T8_*"',
                )
            if not (_is_int(c.drive_count) and c.drive_count >= 2):
                self.add(
                    c.name,
                    "drive_count",
                    c.drive_count,
                    "drive_pattern needs the number of drives it must match",
                    "set drive_count, e.g. 24",
                )
        if not self.ok(c, "wipe_drives"):
            return
        for d in c.wipe_drives:
            in_list = (
                d in c.drives
                if c.drives
                else (str(d).startswith(BY_ID) and fnmatch.fnmatch(str(d)[len(BY_ID) :], c.drive_pattern))
            )
            if not in_list:
                self.add(
                    c.name,
                    "wipe_drives",
                    d,
                    "is not one of this host's pool drives",
                    "only drives of this host's pool can be opted in to wiping",
                )

    def pool(self, c: HostConfig) -> None:
        p = c.pool
        if self.ok(c, "zpool_name"):
            self.pool_name(c, p.name)
        if self.ok(c, "zpool_ashift") and not 9 <= p.ashift <= 16:
            self.add(
                c.name,
                "zpool_ashift",
                p.ashift,
                "out of range 9..16",
                "12 for 4 KiB sectors, 13 for 8 KiB flash pages",
            )
        for key, value in (("zpool_autoreplace", p.autoreplace), ("zpool_autotrim", p.autotrim)):
            if self.ok(c, key) and value not in ON_OFF:
                self.add(c.name, key, value, "must be on or off", 'use "on" or "off"')
        t = c.capacity_threshold
        if self.ok(c, "zfs_capacity_threshold") and not 10 <= t <= 90:
            self.add(
                c.name,
                "zfs_capacity_threshold",
                t,
                "out of range 10..90 (percent)",
                "80 keeps ZFS's allocator and the flash fast [Heap]",
            )
        if self.ok(c, "zed_email") and c.zed_email and not ZED_EMAIL.fullmatch(c.zed_email):
            self.add(
                c.name,
                "zed_email",
                c.zed_email,
                "not one mail address (zed.rc is a shell file: no spaces, quotes, $ or backslashes)",
                'e.g. "dba-pager@example.com", or "" for no mail',
            )
        if not self.ok(c, "zpool_mirror_width", "zpool_spares"):
            return
        if not 2 <= p.mirror_width <= 4:
            self.add(
                c.name, "zpool_mirror_width", p.mirror_width, "must be 2, 3 or 4", "use 2 for two-way mirrors"
            )
            return
        if p.spares < 0:
            self.add(c.name, "zpool_spares", p.spares, "must be a count >= 0", "e.g. 0 or 2")
            return
        count = c.expected_drive_count
        if count and self.ok(c, "drives", "drive_count"):
            in_mirrors = count - p.spares
            if in_mirrors < p.mirror_width:
                self.add(
                    c.name,
                    "zpool_spares",
                    p.spares,
                    f"leaves {in_mirrors} of {count} drives for {p.mirror_width}-way mirrors",
                    "use fewer spares or more drives",
                )
            elif in_mirrors % p.mirror_width:
                key = "drives" if c.drives else "drive_count"
                self.add(
                    c.name,
                    key,
                    count,
                    f"{count} drives minus {p.spares} spare(s) leaves {in_mirrors}, not a "
                    f"multiple of the mirror width {p.mirror_width}",
                    "change the drive count, zpool_spares or zpool_mirror_width",
                )

    def pool_name(self, c: HostConfig, name: str) -> None:
        fix = 'e.g. "dbpool" or "db01"'
        if not POOL_NAME_RE.match(name):
            self.add(
                c.name,
                "zpool_name",
                name,
                "not a valid pool name: it must start with a "
                "letter and hold only letters, digits, _ . : - (no spaces)",
                fix,
            )
        elif name.lower().startswith(POOL_RESERVED_PREFIXES) or re.match(r"^c[0-9]", name):
            self.add(
                c.name,
                "zpool_name",
                name,
                "zpool refuses names beginning with mirror, raidz, draid or spare, and names "
                "beginning with log, cache, special, dedup or c[0-9] read as vdevs",
                f"pick another name, {fix}",
            )
        elif len(name) > 200:
            self.add(
                c.name,
                "zpool_name",
                name,
                "too long (ZFS allows 239 characters, dataset names under it 255 in all)",
                fix,
            )

    def datasets(self, c: HostConfig) -> None:
        if c.engine not in ENGINES or not self.ok(
            c, "engine", "zfs_datasets", "zfs_dataset_roles", "zfs_dataset_properties"
        ):
            return
        data = self.data[c.name]
        declared = data.get("zfs_datasets", {}).get(c.engine)
        if not declared:
            self.add(
                c.name,
                f"zfs_datasets[{c.engine!r}]",
                declared,
                f"no datasets declared for {c.engine}",
                "keep the default from group_data/all.py",
            )
            return
        roles = data.get("zfs_dataset_roles", {}).get(c.engine)
        if roles is None:
            self.add(
                c.name,
                f"zfs_dataset_roles[{c.engine!r}]",
                None,
                f"does not say which dataset is the parent, the data and the log for {c.engine}",
                "keep the default from group_data/all.py",
            )
            return
        named_ok = True
        for role in DATASET_ROLES:
            if roles[role] not in declared:
                self.add(
                    c.name,
                    f"zfs_dataset_roles[{c.engine!r}][{role!r}]",
                    roles[role],
                    f"no such dataset in zfs_datasets[{c.engine!r}]",
                    f"use one of {list(declared)}",
                )
                named_ok = False
        if not named_ok:
            return
        self.named.add(c.name)
        parent = roles["parent"]
        for role in ("data", "log"):
            if roles[role] == parent or not roles[role].startswith(parent + "/"):
                self.add(
                    c.name,
                    f"zfs_dataset_roles[{c.engine!r}][{role!r}]",
                    roles[role],
                    f"the {role} dataset must be a child of the parent {parent}",
                    f"name a dataset {parent}/...",
                )
        if roles["data"] == roles["log"]:
            self.add(
                c.name,
                f"zfs_dataset_roles[{c.engine!r}]['log']",
                roles["log"],
                "the same dataset as the data",
                "give the log its own dataset",
            )
        overrides = data.get("zfs_dataset_properties", {})
        for ds in overrides:
            if ds not in declared:
                self.add(
                    c.name,
                    "zfs_dataset_properties",
                    ds,
                    f"no such dataset for {c.engine}",
                    f"use one of {list(declared)}",
                )
        if self.ok(c, "zfs_compression") and not COMPRESSION_RE.match(c.compression):
            self.add(
                c.name,
                "zfs_compression",
                c.compression,
                "unknown compression",
                "lz4, zstd, zstd-1..19, zstd-fast-N, gzip-1..9, zle or off",
            )
        mounts = defaultdict(list)
        for ds, props in c.datasets.items():
            key = f"zfs_datasets[{c.engine!r}][{ds!r}]"
            if not DATASET_NAME_RE.match(ds):
                self.add(
                    c.name,
                    key,
                    ds,
                    "not a valid dataset name",
                    "letters, digits, _ . : - in /-separated parts, relative to the pool",
                )
            elif ds != parent and not ds.startswith(parent + "/"):
                self.add(
                    c.name, key, ds, f"is not under the parent dataset {parent}", f"name it {parent}/..."
                )
            elif self.ok(c, "zpool_name") and len(c.dataset_name(ds)) > 255:
                self.add(
                    c.name, key, c.dataset_name(ds), "longer than ZFS's 255 characters", "use shorter names"
                )
            for prop, value in props.items():
                if ds == parent and prop == "compression" and "compression" not in overrides.get(ds, {}):
                    continue  # zfs_compression, checked above
                self.dataset_property(c, key, prop, value)
            mp = props.get("mountpoint")
            if not (isinstance(mp, str) and MOUNTPOINT_RE.match(mp) and not set(mp.split("/")) & {".", ".."}):
                self.add(
                    c.name,
                    f"{key}['mountpoint']",
                    mp,
                    "needs an absolute mountpoint without spaces, '.' or '..' parts or a trailing slash",
                    "e.g. /datastore/mysql",
                )
            else:
                mounts[mp].append(ds)
        for mp, names in mounts.items():
            for ds in names[1:]:
                self.add(
                    c.name,
                    f"zfs_datasets[{c.engine!r}][{ds!r}]['mountpoint']",
                    mp,
                    f"also the mountpoint of {names[0]}",
                    "give every dataset its own",
                )

    def dataset_property(self, c: HostConfig, key: str, prop: str, value: object) -> None:
        where = f"{key}[{prop!r}]"
        if prop not in DATASET_PROPERTIES:
            self.add(
                c.name,
                where,
                value,
                "unknown or unsupported ZFS property",
                f"use one of {sorted(DATASET_PROPERTIES)}",
            )
        elif prop in SIZE_PROPERTIES and not (
            _size_ok(value) or (prop in NONE_SIZE_PROPERTIES and value == "none")
        ):
            self.add(
                c.name,
                where,
                value,
                "not a size zfs takes",
                'digits and a unit, without a space: "16k", "16K", "1M", "100G"'
                + (' or "none"' if prop in NONE_SIZE_PROPERTIES else ""),
            )
        elif prop == "recordsize":
            size = parse_size(value)
            if not (512 <= size <= 16 * 1024**2 and size & (size - 1) == 0):
                self.add(
                    c.name,
                    where,
                    value,
                    "recordsize must be a power of two in 512..16M",
                    "16k for InnoDB data, 32k-128k for PostgreSQL",
                )
        elif prop == "special_small_blocks":
            size = parse_size(value)
            if size and not (512 <= size <= 16 * 1024**2 and size & (size - 1) == 0):
                self.add(
                    c.name,
                    where,
                    value,
                    "special_small_blocks must be 0 or a power of two in 512..16M",
                    "0 without a special vdev",
                )
        elif prop == "mountpoint":
            pass  # checked with the dataset
        elif prop == "compression" and not COMPRESSION_RE.match(str(value)):
            self.add(c.name, where, value, "unknown compression", "lz4 or zstd[-N]")
        elif prop in CHOICES and str(value) not in CHOICES[prop]:
            self.add(c.name, where, value, f"invalid value for {prop}", f"use one of {list(CHOICES[prop])}")

    def backup_identity(self, c: HostConfig) -> None:
        """A backup host runs no database: none of a database host's identity keys."""
        for key, value in (("engine", c.engine), ("primary", c.primary), ("server_id", c.server_id)):
            if self.ok(c, key) and value is not None:
                self.add(
                    c.name,
                    key,
                    value,
                    'a backup host (role = "backup") runs no database',
                    "remove it, or give the host a database role (primary or replica)",
                )

    def backup_host(self, c: HostConfig) -> None:
        if self.ok(c, "backup_pull_minutes") and not 1 <= c.backup_pull_minutes <= 1440:
            self.add(
                c.name, "backup_pull_minutes", c.backup_pull_minutes, "out of range (1..1440)", "e.g. 15"
            )
        if self.ok(c, "backup_max_age_hours") and c.backup_max_age_hours < 1:
            self.add(
                c.name, "backup_max_age_hours", c.backup_max_age_hours, "out of range (at least 1)", "e.g. 2"
            )
        if not self.ok(c, "backup_retention"):
            return
        engines = sorted({d.engine for d in self.cfg.values() if d.engine in ENGINES})
        for name in engines:
            counts = c.backup_retention.get(name, {})
            if not any(_is_int(n) and n > 0 for n in counts.values()):
                self.add(
                    c.name,
                    f"backup_retention[{name!r}]",
                    counts or None,
                    f"keeps no copy of the {name} hosts' snapshots",
                    'a count for at least one kind, e.g. {"hourly": 48, "daily": 35}',
                )

    def backups(self) -> None:
        """With a backup host in the inventory: its key, and an address for every host it pulls
        from and for itself (the database hosts let its key in from there only)."""
        backups = [c for c in self.cfg.values() if c.is_backup_host]
        if not backups:
            return
        for c in self.cfg.values():
            if (c.is_backup_host or c.engine in ENGINES) and not c.replication_address:
                if self.ok(c, "replication_address"):
                    why = (
                        "the database hosts let its key in from that address only"
                        if c.is_backup_host
                        else f"the backup host ({', '.join(b.name for b in backups)}) pulls from it there"
                    )
                    self.add(
                        c.name,
                        "replication_address",
                        None,
                        f"none set; {why}",
                        "set its address on the private network",
                    )
        self.ssh_key(backups[0].name, backup.SECRET, "a backup host pulls with this key")
        postgresql = [c for c in self.cfg.values() if c.engine == "postgresql"]
        if postgresql:
            self.ssh_key(
                postgresql[0].name,
                pgbackrest.SECRET,
                "the PostgreSQL hosts archive their WAL to the backup host with this key",
            )

    def ssh_key(self, name: str, secret: str, why: str) -> None:
        """A secret that is an OpenSSH private key (its text never printed)."""
        key = self.secrets.get(secret)
        fix = (
            f"export {secrets_mod.env_name(secret)} or add {secret} to the secrets file: "
            'the text of a key made by ssh-keygen -t ed25519 -N "" -f KEY'
        )
        if not key:
            self.add(name, f"secrets.{secret}", None, f"{why} (looked in: {self.secrets.source})", fix)
            return
        try:
            backup.public_key(key)
        except ValueError as exc:
            self.add(name, f"secrets.{secret}", "(hidden)", str(exc), fix)

    def pitr(self, c: HostConfig) -> None:
        """The archive and backup settings (roles/pgbackrest.py)."""
        if self.ok(c, "pitr_archive_timeout") and not 1 <= c.pitr_archive_timeout <= 3600:
            self.add(
                c.name,
                "pitr_archive_timeout",
                c.pitr_archive_timeout,
                "out of range (1..3600 seconds)",
                "e.g. 60: at most that much committed work waits to be archived",
            )
        if self.ok(c, "pgbackrest_retention_full") and not 1 <= c.pgbackrest_retention_full <= 99:
            self.add(
                c.name,
                "pgbackrest_retention_full",
                c.pgbackrest_retention_full,
                "out of range (1..99)",
                "e.g. 2",
            )
        key = "pgbackrest_backup_max_age_hours"
        if self.ok(c, key) and not 1 <= c.pgbackrest_backup_max_age_hours <= 8760:
            self.add(
                c.name,
                key,
                c.pgbackrest_backup_max_age_hours,
                "out of range (1..8760 hours)",
                "e.g. 26: the daily backup plus slack",
            )
        for key in ("pgbackrest_full_calendar", "pgbackrest_incr_calendar"):
            value = getattr(c, key)
            if self.ok(c, key) and (not value.strip() or "\n" in value or "%" in value):
                self.add(
                    c.name, key, value, "not a systemd OnCalendar expression", f"e.g. {KEY_TYPES[key][2]}"
                )
        key = "pgbackrest_repository_snapshots"
        archives = c.is_backup_host and any(d.engine == "postgresql" for d in self.cfg.values())
        if archives and self.ok(c, key) and not any(_is_int(n) and n > 0 for n in getattr(c, key).values()):
            self.add(
                c.name,
                key,
                getattr(c, key),
                "no snapshot of the repository would be kept: every PostgreSQL host can write and "
                "delete files in it, and only these undo that",
                f"keep some, e.g. {KEY_TYPES[key][2]}",
            )

    def roll_primary(self, c: HostConfig) -> None:
        if self.ok(c, "roll_primary") and c.roll_primary not in ROLL_PRIMARY:
            self.add(
                c.name,
                "roll_primary",
                c.roll_primary,
                "not a way to roll a primary",
                '"switchover" (moved to a converged replica and back) or "in_place"',
            )

    def snapshots(self, c: HostConfig) -> None:
        if self.ok(c, "snapshot_on") and c.snapshot_on not in snapshots.SNAPSHOT_ON:
            self.add(
                c.name,
                "snapshot_on",
                c.snapshot_on,
                "not a choice of the hosts that take snapshots",
                f"one of {', '.join(repr(v) for v in snapshots.SNAPSHOT_ON)}",
            )
        if not self.ok(c, "snapshot_retention") or c.engine not in ENGINES:
            return
        key = f"snapshot_retention[{c.engine!r}]"
        retention = c.snapshot_retention
        if c.snapshot_on != "none" and not any(_is_int(n) and n > 0 for n in retention.values()):
            self.add(
                c.name,
                key,
                retention,
                f"keeps no snapshot, yet snapshot_on is {c.snapshot_on!r}",
                'a count for at least one kind, e.g. {"hourly": 36, "daily": 30}, or snapshot_on = "none"',
            )

    def zfs_install(self, c: HostConfig) -> None:
        if not self.ok(c, "zfs_install", "zfs_module_repository"):
            return
        if c.zfs_install not in zfs_packages.INSTALLS:
            self.add(
                c.name,
                "zfs_install",
                c.zfs_install,
                "not a way to install ZFS",
                '"dkms" (the module compiled on the host) or "prebuilt" (from zfs_module_repository)',
            )
            return
        repo = c.module_repository
        if c.zfs_install == "dkms":
            if repo is not None:
                self.add(
                    c.name,
                    "zfs_module_repository",
                    repo,
                    'set, but zfs_install is "dkms": nothing would use it',
                    'set zfs_install = "prebuilt", or remove zfs_module_repository',
                )
            return
        example = KEY_TYPES["zfs_module_repository"][2]
        if repo is None:
            self.add(
                c.name,
                "zfs_module_repository",
                None,
                'missing: zfs_install "prebuilt" installs the module from it',
                f"e.g. {example} (./dbzfs zfs-repo builds one)",
            )
            return
        for field in sorted(set(repo) - {"url", "suite", "key_file"}, key=str):
            self.add(
                c.name,
                f"zfs_module_repository[{field!r}]",
                repo[field],
                "unknown field",
                "use url, suite, key_file",
            )
        url, suite, key_file = repo.get("url"), repo.get("suite"), repo.get("key_file")
        where = "zfs_module_repository"
        if not (isinstance(url, str) and re.fullmatch(r"https?://[^\s/]+(/\S*)?", url)):
            self.add(
                c.name,
                f"{where}['url']",
                url,
                "not an http(s) URL",
                'e.g. "http://apt.example.net/zfs-modules/"',
            )
        if not (isinstance(suite, str) and re.fullmatch(r"[a-z][a-z0-9-]*", suite)):
            self.add(c.name, f"{where}['suite']", suite, "not a Debian suite name", '"bookworm"')
        if not isinstance(key_file, str) or not key_file:
            self.add(
                c.name, f"{where}['key_file']", key_file, "missing: the repository's public key", example
            )
            return
        path = Path(key_file).expanduser()
        try:
            head = path.read_text(errors="replace")[:200]
        except OSError as e:
            self.add(
                c.name,
                f"{where}['key_file']",
                key_file,
                f"cannot be read on this machine ({e.strerror})",
                "the armored public key ./dbzfs zfs-repo wrote (dbzfs-zfs-modules.asc)",
            )
            return
        if "-----BEGIN PGP PUBLIC KEY BLOCK-----" not in head:
            self.add(
                c.name,
                f"{where}['key_file']",
                key_file,
                "not an armored OpenPGP public key",
                "export it with gpg --armor --export KEY (a private key never goes to the hosts)",
            )

    def module_params(self, c: HostConfig) -> None:
        if not self.ok(c, "zfs_module_params"):
            return
        known = zfs_module_params.UNSIGNED | zfs_module_params.SIGNED
        for param, value in c.module_params.items():
            where = f"zfs_module_params[{param!r}]"
            if param in zfs_module_params.TEXT:
                self.add(
                    c.name,
                    where,
                    value,
                    "a string parameter of the zfs module; only numeric ones are set here",
                    "remove it",
                )
            elif param not in known:
                close = _close(param, known)
                self.add(
                    c.name,
                    where,
                    value,
                    "not a parameter of the zfs module (zfs(4), OpenZFS 2.3)",
                    f"did you mean one of {close}?" if close else "see man 4 zfs for the names",
                )
            else:
                low, high = zfs_module_params.integer_range(param)
                if not low <= value <= high:
                    self.add(
                        c.name,
                        where,
                        value,
                        f"out of the parameter's range {low}..{high}",
                        "see man 4 zfs for its unit and meaning",
                    )

    def database(self, c: HostConfig) -> None:
        self.problems += db_settings.check(c)
        if c.engine == "postgresql" and c.name in self.named and self.ok(c, "db_settings"):
            fpw = db_settings.as_bool("postgresql", c.db_settings.get("full_page_writes"))
            size = self.recordsize_or_none(c, c.data_dataset)
            if fpw is False and size is not None and size < 8192:
                self.add(
                    c.name,
                    "db_settings['full_page_writes']",
                    c.db_settings["full_page_writes"],
                    f"unsafe with recordsize {size} < 8k on "
                    f"{c.data_dataset}: a page could be torn across records",
                    "set the data dataset's recordsize to >= 8k or drop the override",
                )
        if c.engine == "mariadb" and c.name in self.named and self.ok(c, "db_settings"):
            doublewrite = db_settings.as_bool("mariadb", c.db_settings.get("innodb_doublewrite"))
            size = self.recordsize_or_none(c, c.data_dataset)
            if doublewrite is False and size is not None and size < render.INNODB_PAGE:
                self.add(
                    c.name,
                    "db_settings['innodb_doublewrite']",
                    c.db_settings["innodb_doublewrite"],
                    f"unsafe with recordsize {size} < 16k on {c.data_dataset}: an InnoDB page could "
                    "be torn across records",
                    "set the data dataset's recordsize to 16k or more, or drop the override",
                )
        users_ok = self.ok(c, "db_users")
        user_names = {u["name"] for u in c.db_users} if users_ok else set()
        if self.ok(c, "databases"):
            seen = set()
            for i, db in enumerate(c.databases):
                if not NAME_RE.match(db["name"]):
                    self.add(
                        c.name,
                        f"databases[{i}].name",
                        db["name"],
                        "not a valid name",
                        'a letter or _, then letters, digits, _ (at most 64), e.g. "app"',
                    )
                elif db["name"] in seen:
                    self.add(
                        c.name,
                        f"databases[{i}].name",
                        db["name"],
                        "declared twice",
                        "declare each database once",
                    )
                seen.add(db["name"])
                owner = db.get("owner")
                if users_ok and owner is not None and owner not in user_names:
                    self.add(
                        c.name,
                        f"databases[{i}].owner",
                        owner,
                        "no such user in db_users",
                        f"declare the user, or use one of {sorted(user_names)}",
                    )
        declared = {db["name"] for db in c.databases}
        if not users_ok:
            return
        seen = set()
        for i, user in enumerate(c.db_users):
            if not NAME_RE.match(user["name"]):
                self.add(
                    c.name,
                    f"db_users[{i}].name",
                    user["name"],
                    "not a valid name",
                    'a letter or _, then letters, digits, _ (at most 64), e.g. "app"',
                )
                continue
            if user["name"] in seen:
                self.add(
                    c.name, f"db_users[{i}].name", user["name"], "declared twice", "declare each user once"
                )
            seen.add(user["name"])
            allowed = USER_KEYS[c.engine] if c.engine in USER_KEYS else set(user)
            for key in sorted(set(user) - allowed):
                self.add(
                    c.name,
                    f"db_users[{i}].{key}",
                    user[key],
                    f"not a {c.engine} user setting (would be ignored)",
                    f"use only {', '.join(sorted(allowed))}",
                )
            target = user.get("database") or (user["name"] if c.engine == "postgresql" else None)
            if target and target not in declared and self.ok(c, "databases"):
                self.add(
                    c.name,
                    f"db_users[{i}].database",
                    target,
                    f"user {user['name']} connects to database {target!r}, which is not in databases",
                    f'declare it: databases = [{{"name": "{target}"}}]',
                )
            if c.engine == "mariadb" and user.get("privileges"):
                self.privileges(c, i, user["privileges"])
            secret = user.get("password_secret")
            if not secret:
                self.add(
                    c.name,
                    f"db_users[{i}].password_secret",
                    secret,
                    f"user {user['name']} has no password_secret",
                    "name the secret holding its password",
                )
            elif c.role == "primary" and secret not in self.secrets:
                self.add(
                    c.name,
                    f"db_users[{i}].password_secret",
                    secret,
                    f"secret {secret!r} for user {user['name']} is missing "
                    f"(looked in: {self.secrets.source})",
                    f"export {secrets_mod.env_name(secret)} or add it to the secrets file",
                )

    def privileges(self, c: HostConfig, i: int, privileges: str | Sequence[str]) -> None:
        from operations.mariadb import DATABASE_ALL

        names = privileges.split(",") if isinstance(privileges, str) else privileges
        for name in names:
            normal = " ".join(name.upper().split())
            if normal not in DATABASE_ALL | {"ALL", "ALL PRIVILEGES"}:
                close = _close(normal, DATABASE_ALL)
                self.add(
                    c.name,
                    f"db_users[{i}].privileges",
                    privileges,
                    f"{name.strip()!r} is not a database-level privilege",
                    f"did you mean one of {close}?"
                    if close
                    else f"use ALL or some of {', '.join(sorted(DATABASE_ALL))}",
                )

    def recordsize_or_none(self, c: HostConfig, ds: str) -> int | None:
        try:
            return c.recordsize(ds)
        except (ValueError, KeyError):
            return None  # reported with the dataset

    # --- across hosts ------------------------------------------------------------------------

    def fleet_drives(self) -> None:
        owners = defaultdict(list)
        for name, c in self.cfg.items():
            for d in set(c.drives):
                owners[d].append(name)
        for drive, names in sorted(owners.items()):
            if len(names) > 1:
                for name in sorted(names)[1:]:
                    self.add(
                        name,
                        "drives",
                        drive,
                        f"also listed for {sorted(names)[0]}: a drive belongs to one host",
                        "check the by-id names copied between hosts",
                    )

    def identified(self, c: HostConfig) -> bool:
        """Engine, role and replication group are right (a wrong one was reported already)."""
        return self.ok(c, "engine", "role", "cluster", "primary") and c.engine in ENGINES and c.role in ROLES

    def monitoring(self, c: HostConfig) -> None:
        m = c.monitoring
        ports = {
            "node_exporter_port": m.node_exporter_port,
            "mysqld_exporter_port": m.mysqld_exporter_port,
            "postgres_exporter_port": m.postgres_exporter_port,
            "prometheus_port": m.prometheus_port,
        }
        taken = {3306: "MariaDB", 5432: "PostgreSQL", 22: "SSH"}
        for key, port in ports.items():
            if not self.ok(c, key):
                continue
            if not 1 <= port <= 65535:
                self.add(c.name, key, port, "not a TCP port (1..65535)", f"e.g. {KEY_TYPES[key][2]}")
            elif port in taken:
                self.add(c.name, key, port, f"{taken[port]}'s port", f"e.g. {KEY_TYPES[key][2]}")
            else:
                taken[port] = key
        for key, value in (
            ("prometheus_scrape_interval", m.scrape_interval),
            ("prometheus_retention", m.retention),
        ):
            if self.ok(c, key) and not monitoring_rules.valid_duration(value):
                self.add(c.name, key, value, "not a Prometheus duration", f"e.g. {KEY_TYPES[key][2]}")
        for key, value, low, high in (
            ("zfs_metrics_interval", m.zfs_metrics_interval, 5, 3600),
            ("replica_lag_alert_seconds", m.replica_lag_alert_seconds, 1, None),
            ("replication_slot_alert_bytes", m.replication_slot_alert_bytes, 1, None),
            ("scrub_max_age_days", m.scrub_max_age_days, 1, None),
            ("snapshot_max_age_hours", m.snapshot_max_age_hours, 1, None),
        ):
            if self.ok(c, key) and (value < low or (high is not None and value > high)):
                where = f"{low}..{high}" if high is not None else f"at least {low}"
                self.add(c.name, key, value, f"out of range ({where})", f"e.g. {KEY_TYPES[key][2]}")
        if self.ok(c, "node_exporter_disabled_collectors"):
            for name in m.node_exporter_disabled_collectors:
                if not isinstance(name, str) or not COLLECTOR_NAME.fullmatch(name):
                    self.add(
                        c.name,
                        "node_exporter_disabled_collectors",
                        name,
                        "not a node_exporter collector name",
                        'e.g. "systemd" (the NAME of --no-collector.NAME)',
                    )
                elif name in ALERTED_COLLECTORS:
                    self.add(
                        c.name,
                        "node_exporter_disabled_collectors",
                        name,
                        f"alerts read its metrics ({ALERTED_COLLECTORS[name]})",
                        "remove it from the list",
                    )
        ratio = m.arc_metadata_hit_ratio_alert
        if self.ok(c, "arc_metadata_hit_ratio_alert") and not 0 < ratio < 1:
            self.add(
                c.name, "arc_metadata_hit_ratio_alert", ratio, "must be a ratio between 0 and 1", "e.g. 0.9"
            )
        if self.ok(c, "alert_for") and m.alert_for:
            names = monitoring_rules.alert_names()
            for name, duration in m.alert_for.items():
                if name not in names:
                    hint = _close(str(name), names)
                    self.add(
                        c.name,
                        f"alert_for.{name}",
                        duration,
                        "no such alert",
                        f"did you mean {hint}?" if hint else f"one of {names}",
                    )
                elif not isinstance(duration, str) or not monitoring_rules.valid_duration(duration):
                    self.add(c.name, f"alert_for.{name}", duration, "not a Prometheus duration", 'e.g. "5m"')

    def scraped(self) -> None:
        """A Prometheus server reaches the other hosts' exporters on their replication address."""
        servers = [n for n, c in self.cfg.items() if c.prometheus_server is True]
        if not servers:
            return
        for name, c in self.cfg.items():
            if name in servers and len(servers) == 1:
                continue
            if not c.replication_address and self.ok(c, "replication_address"):
                self.add(
                    name,
                    "replication_address",
                    None,
                    f"Prometheus on {', '.join(servers)} scrapes this host's exporters, which listen "
                    "on its replication address only, and it has none",
                    "set its address on the private network",
                )

    def clusters(self) -> None:
        # Hosts whose identity is wrong were reported already: left out here, so that one
        # mistake is not reported again from their peers' side.
        known = {name: c for name, c in self.cfg.items() if self.identified(c)}
        members = defaultdict(list)
        for c in known.values():
            members[c.cluster].append(c)
        for cluster, hosts in members.items():
            primaries = [c for c in hosts if c.role == "primary"]
            if len(primaries) > 1:
                for c in primaries[1:]:
                    self.add(
                        c.name,
                        "role",
                        c.role,
                        f"second primary in replication group {cluster!r} (also {primaries[0].name})",
                        "make it a replica, or give it its own cluster name",
                    )
            replicas = [c for c in hosts if c.role == "replica"]
            if replicas:
                for c in hosts:
                    if not c.replication_address and self.ok(c, "replication_address"):
                        self.add(
                            c.name,
                            "replication_address",
                            None,
                            f"replication group {cluster!r} has replicas but this host has "
                            "no replication address",
                            "set its address on the private network",
                        )
                if secrets_mod.REPLICATION_PASSWORD not in self.secrets:
                    self.add(
                        hosts[0].name,
                        "secrets.replication_password",
                        None,
                        f"replication group {cluster!r} needs a replication password "
                        f"(looked in: {self.secrets.source})",
                        f"export {secrets_mod.env_name(secrets_mod.REPLICATION_PASSWORD)} or "
                        f"add replication_password to {secrets_mod.DEFAULT_FILE}",
                    )
            ids = defaultdict(list)
            for c in hosts:
                if c.engine == "mariadb" and c.server_id is not None:
                    ids[c.server_id].append(c.name)
            for sid, names in ids.items():
                for name in names[1:]:
                    self.add(
                        name,
                        "server_id",
                        sid,
                        f"also used by {names[0]} in {cluster!r}",
                        "give every host of a replication group its own server_id",
                    )
        for c in known.values():
            if c.role != "replica":
                if c.primary is not None:
                    self.add(
                        c.name,
                        "primary",
                        c.primary,
                        "set on a host whose role is not replica",
                        "remove it, or make the host a replica",
                    )
                continue
            p = known.get(c.primary)
            if c.primary in self.cfg and p is None:
                continue  # the primary's own data is wrong, and reported
            if c.primary is None:
                self.add(
                    c.name,
                    "primary",
                    None,
                    "a replica must name the primary it follows",
                    "set primary to the primary's inventory name",
                )
            elif c.primary == c.name:
                self.add(
                    c.name, "primary", c.primary, "a replica cannot follow itself", "name the group's primary"
                )
            elif p is None:
                self.add(
                    c.name,
                    "primary",
                    c.primary,
                    "no such host in the inventory",
                    f"use one of {sorted(self.cfg)}",
                )
            elif p.role != "primary":
                self.add(
                    c.name,
                    "primary",
                    c.primary,
                    f"{p.name} is a {p.role}, not a primary",
                    "replicas follow the group's primary (cascading is not supported)",
                )
            elif p.engine != c.engine:
                self.add(
                    c.name,
                    "primary",
                    c.primary,
                    f"{p.name} runs {p.engine}, this host runs {c.engine}",
                    "a replica follows a primary of the same engine",
                )
            elif p.cluster != c.cluster:
                self.add(
                    c.name,
                    "primary",
                    c.primary,
                    f"{p.name} is in replication group {p.cluster!r}, this host in {c.cluster!r}",
                    "put both in the same cluster",
                )


def validate(hosts: Mapping[str, Mapping], secrets: secrets_mod.Secrets | None = None) -> list[Problem]:
    """All problems in the hosts' data (name -> host data mapping)."""
    secrets = secrets if secrets is not None else secrets_mod.load()
    return _Checker(hosts, secrets).run()


def check(hosts: Mapping[str, Mapping], secrets: secrets_mod.Secrets | None = None) -> None:
    problems = validate(hosts, secrets)
    if problems:
        raise ValidationError(problems)


def load_inventory(path: str) -> dict[str, dict]:
    """Host name -> merged host data, loaded exactly as `pyinfra INVENTORY ...` loads it.

    Raises InventoryError, naming the file, the line or the host, when the file is missing, is
    not Python, raises, holds no host, lists a host twice or holds a group pyinfra would ignore.
    """
    from pyinfra.api import State
    from pyinfra.context import ctx_state
    from pyinfra_cli.inventory import make_inventory
    from pyinfra_cli.util import exec_file

    file = Path(path)
    if not file.exists():
        raise InventoryError(
            [
                Problem(
                    None,
                    "inventory",
                    path,
                    "no such file",
                    "give the path of an inventory file, e.g. inventories/prod.py",
                )
            ],
            path,
        )
    if not file.is_file() or file.suffix != ".py":
        raise InventoryError(
            [
                Problem(
                    None,
                    "inventory",
                    path,
                    "not a Python file",
                    "give the path of an inventory file, e.g. inventories/prod.py",
                )
            ],
            path,
        )
    with ctx_state.use(State()):
        try:
            # pyinfra's own reading of the file, for its group lists: pyinfra merges a host listed
            # twice without a word, and ignores a group holding anything but hosts.
            module = exec_file(str(file), return_locals=True)
            _check_groups(module, path)
            inventory = make_inventory(str(file), cwd=str(REPO_ROOT))
        except InventoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure of user code becomes one message
            raise InventoryError([_code_problem(exc, file)], path) from None
    hosts = {host.name: host.data.dict() for host in inventory}
    if not hosts:
        raise InventoryError(
            [
                Problem(
                    None,
                    "inventory",
                    path,
                    "no hosts",
                    'list hosts in groups, e.g. mariadb = [("db01", {...})]',
                )
            ],
            path,
        )
    return hosts


def _check_groups(module: Mapping[str, Any], path: str) -> None:
    """The inventory module's groups as pyinfra reads them (pyinfra_cli.inventory): every public
    list or tuple of host names or (name, data) tuples is a group; a tuple (hosts, data) is a
    group with group data."""
    problems: list[Problem] = []
    seen: dict[str, list[tuple[str, bool]]] = defaultdict(list)  # host -> [(group, has data)]
    for group, value in module.items():
        if group.startswith("_") or not isinstance(value, (list, tuple)):
            continue
        hosts = value
        if isinstance(value, tuple):
            if len(value) != 2 or not isinstance(value[0], list) or not isinstance(value[1], dict):
                if any(isinstance(v, (list, tuple, dict)) for v in value):
                    problems.append(
                        Problem(
                            None,
                            group,
                            value,
                            "pyinfra ignores or misreads it: a group is a list of "
                            "hosts, or a tuple (list of hosts, group data)",
                            f'{group} = [("name", {{...}}), ...] or ([...], {{...}})',
                        )
                    )
                continue
            hosts = value[0]
        looks_like_hosts = any(isinstance(h, (str, tuple, list, dict)) for h in hosts)
        for i, entry in enumerate(hosts):
            where = f"{group}[{i}]"
            if isinstance(entry, str):
                seen[entry].append((group, False))
            elif (
                isinstance(entry, tuple)
                and len(entry) == 2
                and isinstance(entry[0], str)
                and isinstance(entry[1], dict)
            ):
                seen[entry[0]].append((group, bool(entry[1])))
            elif looks_like_hosts:
                problems.append(
                    Problem(
                        None,
                        where,
                        entry,
                        f"not a host entry (pyinfra would ignore the whole group {group} or fail on it)",
                        'write "name" or ("name", {...data...})',
                    )
                )
    for host, entries in seen.items():
        groups = [g for g, _ in entries]
        with_data = [g for g, has_data in entries if has_data]
        twice_in_one = sorted({g for g in groups if groups.count(g) > 1})
        if len(with_data) > 1 or twice_in_one:
            problems.append(
                Problem(
                    host,
                    "inventory",
                    groups,
                    f"listed {len(entries)} times (groups: {', '.join(groups)}); pyinfra keeps one "
                    "host and merges the entries' data key by key, the last one winning",
                    "keep one entry per host with all its data; to add it to another group, list "
                    "its bare name there",
                )
            )
    if problems:
        raise InventoryError(problems, path)


def _code_problem(exc: BaseException, inventory: Path) -> Problem:
    """One message for an exception from the inventory's code (or the group data's): the file
    and line, what was raised; never a traceback."""
    from pyinfra_cli.exceptions import UnexpectedExternalError

    user_file = inventory
    if isinstance(exc, UnexpectedExternalError):  # pyinfra's wrapper around user code's errors
        user_file, exc = Path(exc.filename), exc.exception
    if isinstance(exc, SyntaxError):
        file, line = exc.filename, exc.lineno
        message = f"Python syntax error: {exc.msg}"
        fix = "correct the syntax there"
    else:
        file, line = str(user_file), None
        tb = getattr(exc, "_traceback", None) or exc.__traceback__
        frames = []
        while tb is not None:
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
            tb = tb.tb_next
        ours = [f for f in frames if _is_ours(f[0], user_file)]
        if ours:
            in_file = [f for f in ours if Path(f[0]).resolve() == user_file.resolve()]
            file, line = (in_file or ours)[-1]
        message = f"{type(exc).__name__}: {exc}"
        fix = "correct the code or the data it reads"
    # The header names the inventory: its own lines are "line N", other files' are named.
    same = bool(file) and Path(file).resolve() == inventory.resolve()
    where = "" if same or not file else _relative(file) + " "
    key = f"{where}line {line}" if line else (where.strip() or "inventory")
    text = _source_line(file, line)
    return Problem(None, key, text, message, fix)


def _is_ours(filename: str, inventory: Path) -> bool:
    """The inventory itself, or a file of this repository (not of its .venv)."""
    path = Path(filename).resolve()
    if path == inventory.resolve():
        return True
    return REPO_ROOT in path.parents and (REPO_ROOT / ".venv") not in path.parents


def _relative(file: str) -> str:
    try:
        return str(Path(file).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(file)


def _source_line(file: str | None, line: int | None) -> str | None:
    """The line of an inventory or group data file a problem is at (these hold no secrets)."""
    if not file or not line:
        return None
    try:
        lines = Path(file).read_text(errors="replace").splitlines()
    except OSError:
        return None
    return lines[line - 1].strip() if 0 < line <= len(lines) else None


def load_inventory_isolated(path: str) -> dict[str, dict]:
    """load_inventory in a child process: importing pyinfra_cli monkey-patches the whole
    interpreter for gevent, which breaks a process that already runs threads (testinfra)."""
    import json
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "validation", "--dump-data", path],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"cannot load inventory {path}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--dump-data":
        import json

        try:
            hosts = load_inventory(argv[1])
        except InventoryError as exc:
            print(exc, file=sys.stderr)
            return 1
        json.dump(hosts, sys.stdout, default=str)
        return 0
    if len(argv) != 1:
        print("usage: python -m validation INVENTORY", file=sys.stderr)
        return 2
    try:
        hosts = load_inventory(argv[0])
        secrets = secrets_mod.load()
        problems = validate(hosts, secrets)
    except InventoryError as exc:
        print(exc, file=sys.stderr)
        return 1
    except (OSError, secrets_mod.SecretsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a bug here must still not end in a traceback
        print(
            f"error: validating {argv[0]} failed ({type(exc).__name__}: {exc}); no host was "
            "changed. This is a bug in validation/: please report it with the "
            "inventory",
            file=sys.stderr,
        )
        return 1
    if problems:
        print(format_problems(problems, argv[0]), file=sys.stderr)
        return 1
    print(f"{argv[0]}: {len(hosts)} host(s) OK ({', '.join(sorted(hosts))}); secrets from {secrets.source}")
    return 0
