"""A host's deploy settings, read from its pyinfra host data (the keys and their defaults: model/keys.py,
which group_data/all.py hands pyinfra).

`HostConfig.from_data(name, data)` takes any mapping (pyinfra's `host.data` or a plain dict) and
does no checking: validation checks the same data first and names every problem. A key the data
lacks (or holds as None) gets its default from model/keys.py: no default is written here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from model import keys, releases, sizing, zfs_properties

BY_ID = "/dev/disk/by-id/"


def parse_size(value: object) -> int:
    """ZFS-style size ("16k", "16K", "1M", "16384") to bytes; ValueError if it is none."""
    size = zfs_properties.parse_size(value)
    if size is None:
        raise ValueError(f"not a size: {value!r}")
    return size


# The defaults, from their one place (model/keys.py): pyinfra merges them into host.data already
# (group_data/all.py); a plain mapping (tests, offline tools) that lacks a key gets the same value.
DEFAULTS = keys.defaults()
ZFS_RECORDSIZE = "128k"  # what ZFS itself uses for a dataset that sets none


# Any: the value is whatever the host data (or its default) holds, unchecked here (validation
# checks it first), and from_data hands it on as a str, an int, a list or a mapping.
def _get(data: Mapping, key: str) -> Any:  # noqa: ANN401 - heterogeneous, unchecked host data
    # pyinfra's HostData has .get; plain dicts too.
    value = data.get(key)
    return keys.default(key) if value is None else value


def _text_or_none(value: object) -> str | None:
    """A version key's value, None when it is not set (validation checks its type first)."""
    return None if value is None or value == "" else str(value)


@dataclass(frozen=True)
class PoolSpec:
    name: str
    mirror_width: int
    spares: int
    ashift: int
    autoreplace: str
    autotrim: str

    def layout(self, drives: list[str]) -> tuple[list[list[str]], list[str]]:
        """Mirrors (consecutive drives pair up) and hot spares (the last `spares` drives)."""
        in_mirrors = drives[: len(drives) - self.spares] if self.spares else list(drives)
        spares = drives[len(in_mirrors) :]
        width = self.mirror_width
        return [in_mirrors[i : i + width] for i in range(0, len(in_mirrors), width)], spares


@dataclass(frozen=True)
class FirewallSpec:
    """The host firewall (roles/firewall.py)."""

    enabled: bool
    admin_networks: tuple[str, ...]

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> FirewallSpec:
        return cls(
            enabled=_get(data, "firewall"), admin_networks=tuple(_get(data, "firewall_admin_networks"))
        )


@dataclass(frozen=True)
class TlsSpec:
    """TLS on the database's connections (roles/tls.py)."""

    enabled: bool
    certificate_days: int
    renew_days: int

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TlsSpec:
        return cls(
            enabled=_get(data, "tls"),
            certificate_days=_get(data, "tls_certificate_days"),
            renew_days=_get(data, "tls_renew_days"),
        )


@dataclass(frozen=True)
class MonitoringSpec:
    """Exporter ports, the Prometheus server's settings and the alert thresholds (group_data)."""

    node_exporter_port: int
    node_exporter_disabled_collectors: tuple[str, ...]
    mysqld_exporter_port: int
    postgres_exporter_port: int
    prometheus_port: int
    scrape_interval: str
    retention: str
    zfs_metrics_interval: int
    replica_lag_alert_seconds: int
    replication_slot_alert_bytes: int
    arc_metadata_hit_ratio_alert: float
    scrub_max_age_days: int
    snapshot_max_age_hours: int
    alert_for: dict  # alert name -> Prometheus duration, over the rule's default

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> MonitoringSpec:
        return cls(
            node_exporter_port=_get(data, "node_exporter_port"),
            node_exporter_disabled_collectors=tuple(_get(data, "node_exporter_disabled_collectors")),
            mysqld_exporter_port=_get(data, "mysqld_exporter_port"),
            postgres_exporter_port=_get(data, "postgres_exporter_port"),
            prometheus_port=_get(data, "prometheus_port"),
            scrape_interval=_get(data, "prometheus_scrape_interval"),
            retention=_get(data, "prometheus_retention"),
            zfs_metrics_interval=_get(data, "zfs_metrics_interval"),
            replica_lag_alert_seconds=_get(data, "replica_lag_alert_seconds"),
            replication_slot_alert_bytes=_get(data, "replication_slot_alert_bytes"),
            arc_metadata_hit_ratio_alert=_get(data, "arc_metadata_hit_ratio_alert"),
            scrub_max_age_days=_get(data, "scrub_max_age_days"),
            snapshot_max_age_hours=_get(data, "snapshot_max_age_hours"),
            alert_for=dict(_get(data, "alert_for")),
        )


@dataclass(frozen=True)
class HostConfig:
    """Made by from_data, which gives every field (the defaults: model/keys.py)."""

    name: str
    engine: str | None
    debian_release: str  # "12", "13": model/releases.py
    postgresql_version: str | None  # the previous release's, kept through the release upgrade
    role: str | None
    primary: str | None
    cluster: str | None
    server_id: int | None
    replication_address: str | None
    hardware: Mapping | None
    workload: str
    drives: list
    drive_pattern: str | None
    drive_count: int | None
    wipe_drives: list
    pool: PoolSpec
    capacity_threshold: int
    roll_primary: str  # `./dbzfs roll`: "switchover" or "in_place"
    reboot_method: str  # `./dbzfs upgrade`: "reboot" or "kexec"
    zed_email: str  # ZED's notices by mail; "" sends none
    snapshot_on: str  # which hosts take the engine's snapshots (roles/snapshots.py)
    snapshot_retention: dict  # this engine's: kind -> count
    backup_pull_minutes: int  # a backup host: minutes between two pulls (roles/backup.py)
    backup_retention: dict  # a backup host's: engine -> kind -> count
    backup_max_age_hours: int
    pitr_archive_timeout: int  # PostgreSQL's archive_timeout, seconds (roles/pgbackrest.py)
    pgbackrest_retention_full: int  # a backup host's: full backups kept per stanza
    pgbackrest_repository_snapshots: dict  # a backup host's: kind -> count
    pgbackrest_full_calendar: str  # systemd OnCalendar of the full backups
    pgbackrest_incr_calendar: str  # and of the incremental ones
    pgbackrest_backup_max_age_hours: int  # a backup host's: the newest backup's age alerted
    compression: str
    datasets: dict  # relative name -> properties, parent first
    # What the engine keeps where, by name (zfs_dataset_roles): "parent", "data", "log".
    dataset_roles: dict
    module_params: dict
    db_settings: dict
    max_connections: int | None
    client_networks: list
    databases: list
    db_users: list
    monitoring: MonitoringSpec
    prometheus_server: bool  # in the inventory's `monitoring` group
    firewall_spec: FirewallSpec
    tls_spec: TlsSpec
    zfs_install: str
    module_repository: Mapping | None  # zfs_module_repository: url, suite, key_file

    @classmethod
    def from_data(cls, name: str, data: Mapping[str, Any]) -> HostConfig:
        engine = data.get("engine")
        datasets = {}
        defaults = _get(data, "zfs_datasets")
        overrides = _get(data, "zfs_dataset_properties")
        roles = _get(data, "zfs_dataset_roles")
        roles = roles.get(engine) if isinstance(roles, Mapping) and isinstance(engine, str) else None
        roles = dict(roles) if isinstance(roles, Mapping) else {}
        if (
            isinstance(defaults, Mapping)
            and isinstance(engine, str)
            and isinstance(defaults.get(engine), Mapping)
        ):
            # Parents before their children (the order they are created in), whatever the order
            # the data lists them in.
            for ds in sorted(defaults[engine], key=lambda ds: str(ds).count("/")):
                props = defaults[engine][ds]
                merged = dict(props) if isinstance(props, Mapping) else {}
                if ds == roles.get("parent"):  # children inherit its compression
                    merged["compression"] = _get(data, "zfs_compression")
                if isinstance(overrides, Mapping) and isinstance(overrides.get(ds), Mapping):
                    merged.update(overrides[ds])
                datasets[ds] = merged
        retention = _get(data, "snapshot_retention")
        retention = (
            retention.get(engine) if isinstance(retention, Mapping) and isinstance(engine, str) else None
        )
        pool = PoolSpec(
            name=_get(data, "zpool_name"),
            mirror_width=_get(data, "zpool_mirror_width"),
            spares=_get(data, "zpool_spares"),
            ashift=_get(data, "zpool_ashift"),
            autoreplace=_get(data, "zpool_autoreplace"),
            autotrim=_get(data, "zpool_autotrim"),
        )
        return cls(
            name=name,
            engine=engine,
            debian_release=str(_get(data, "debian_release")),
            postgresql_version=_text_or_none(_get(data, "postgresql_version")),
            role=data.get("role"),
            primary=data.get("primary"),
            cluster=_get(data, "cluster") or engine,
            server_id=data.get("server_id"),
            replication_address=data.get("replication_address"),
            hardware=data.get("hardware"),
            workload=_get(data, "workload"),
            drives=list(_get(data, "drives")),
            drive_pattern=data.get("drive_pattern"),
            drive_count=data.get("drive_count"),
            wipe_drives=list(_get(data, "wipe_drives")),
            pool=pool,
            capacity_threshold=_get(data, "zfs_capacity_threshold"),
            roll_primary=_get(data, "roll_primary"),
            reboot_method=_get(data, "reboot_method"),
            zed_email=_get(data, "zed_email"),
            snapshot_on=_get(data, "snapshot_on"),
            snapshot_retention=dict(retention) if isinstance(retention, Mapping) else {},
            backup_pull_minutes=_get(data, "backup_pull_minutes"),
            backup_retention=dict(_get(data, "backup_retention")),
            backup_max_age_hours=_get(data, "backup_max_age_hours"),
            pitr_archive_timeout=_get(data, "pitr_archive_timeout"),
            pgbackrest_retention_full=_get(data, "pgbackrest_retention_full"),
            pgbackrest_repository_snapshots=dict(_get(data, "pgbackrest_repository_snapshots")),
            pgbackrest_full_calendar=_get(data, "pgbackrest_full_calendar"),
            pgbackrest_incr_calendar=_get(data, "pgbackrest_incr_calendar"),
            pgbackrest_backup_max_age_hours=_get(data, "pgbackrest_backup_max_age_hours"),
            compression=_get(data, "zfs_compression"),
            datasets=datasets,
            dataset_roles=roles,
            module_params=dict(_get(data, "zfs_module_params")),
            db_settings=dict(_get(data, "db_settings")),
            max_connections=data.get("max_connections"),
            client_networks=list(_get(data, "db_client_networks")),
            databases=list(_get(data, "databases")),
            db_users=list(_get(data, "db_users")),
            monitoring=MonitoringSpec.from_data(data),
            prometheus_server=_get(data, "prometheus_server"),
            firewall_spec=FirewallSpec.from_data(data),
            tls_spec=TlsSpec.from_data(data),
            zfs_install=_get(data, "zfs_install"),
            module_repository=_get(data, "zfs_module_repository"),
        )

    # --- derived -----------------------------------------------------------------------------

    @property
    def is_backup_host(self) -> bool:
        return self.role == "backup"

    @property
    def release(self) -> releases.Release:
        """The Debian release the host runs (a validated debian_release)."""
        return releases.get(self.debian_release)

    @property
    def server_version(self) -> str:
        """The engine's major version the host runs: its release's ("11.8", "17"), or the
        PostgreSQL its data says it still runs (postgresql_version, during the release upgrade)."""
        if self.engine == "postgresql" and self.postgresql_version:
            return self.postgresql_version
        return self.release.version(self.engine)

    def dataset_name(self, relative: str) -> str:
        return f"{self.pool.name}/{relative}"

    @property
    def parent_dataset(self) -> str:
        """The engine's parent dataset: holds no data itself, its children inherit from it."""
        return self.dataset_roles["parent"]

    @property
    def data_dataset(self) -> str:
        """The dataset holding the engine's tables."""
        return self.dataset_roles["data"]

    @property
    def log_dataset(self) -> str:
        """The dataset holding redo/binlog (MariaDB) or WAL (PostgreSQL)."""
        return self.dataset_roles["log"]

    @property
    def child_datasets(self) -> list[str]:
        """Every dataset of the engine but the parent: the ones the server's account owns."""
        return [ds for ds in self.datasets if ds != self.parent_dataset]

    def compression_of(self, relative: str) -> str:
        """The compression a dataset's new blocks get: its own declaration, else its parent's."""
        own = self.datasets[relative].get("compression")
        if own is not None:
            return str(own)
        return str(self.datasets.get(self.parent_dataset, {}).get("compression", self.compression))

    def mountpoint(self, relative: str) -> str:
        return self.datasets[relative]["mountpoint"]

    def recordsize(self, relative: str) -> int:
        props = self.datasets[relative]
        if "recordsize" in props:
            return parse_size(props["recordsize"])
        return parse_size(self.datasets[self.parent_dataset].get("recordsize", ZFS_RECORDSIZE))

    @property
    def expected_drive_count(self) -> int:
        return len(self.drives) if self.drives else int(self.drive_count or 0)

    def sizing(self, ram_bytes: int | None = None, cpus: int | None = None) -> sizing.Sizing:
        """Sized settings for live facts, or for the declared `hardware` when none are given."""
        hw = self.hardware or {}
        return sizing.size(
            sizing.Hardware(
                ram_bytes=ram_bytes if ram_bytes is not None else hw["ram_bytes"],
                cpus=cpus if cpus is not None else hw["cpus"],
                drives=self.expected_drive_count,
            ),
            self.engine,
            self.workload,
            data_recordsize=self.recordsize(self.data_dataset),
            max_connections=self.max_connections,
        )
