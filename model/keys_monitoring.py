"""The monitoring and alert keys (their sections of model/keys.py, which holds every other key and
the one table of all of them). Pure."""

from __future__ import annotations

from model.key import BOOLEAN, INTEGER, LIST, MAPPING, NUMBER, STRING, Key, section as _in

DEFINITIONS = (
    *_in(
        "monitoring",
        "roles.monitoring",
        Key(
            "prometheus_server",
            BOOLEAN,
            False,
            "True (group_data/monitoring.py sets it)",
            "the host runs Prometheus: group_data/monitoring.py sets it for the `monitoring` group's hosts",
        ),
        Key(
            "node_exporter_port",
            INTEGER,
            9100,
            "9100",
            "node_exporter's port",
            attr="monitoring.node_exporter_port",
        ),
        Key(
            "node_exporter_disabled_collectors",
            LIST,
            [],
            '["systemd", "hwmon"]',
            'node_exporter collectors turned off (`--no-collector.NAME`), e.g. ["hwmon"] on a host '
            "without sensors",
            attr="monitoring.node_exporter_disabled_collectors",
            notes="The alert rules read only the zfs and textfile collectors, which cannot be turned off.",
        ),
        Key(
            "mysqld_exporter_port",
            INTEGER,
            9104,
            "9104",
            "mysqld_exporter's port (MariaDB hosts)",
            attr="monitoring.mysqld_exporter_port",
        ),
        Key(
            "postgres_exporter_port",
            INTEGER,
            9187,
            "9187",
            "postgres_exporter's port (PostgreSQL hosts)",
            attr="monitoring.postgres_exporter_port",
        ),
        Key("prometheus_port", INTEGER, 9090, "9090", "Prometheus's port", attr="monitoring.prometheus_port"),
        Key(
            "prometheus_scrape_interval",
            STRING,
            "15s",
            '"15s"',
            "Prometheus's scrape interval, also the rule evaluation interval",
            attr="monitoring.scrape_interval",
        ),
        Key(
            "prometheus_retention",
            STRING,
            "15d",
            '"15d"',
            "how long Prometheus keeps its samples",
            attr="monitoring.retention",
        ),
        Key(
            "zfs_metrics_interval",
            INTEGER,
            60,
            "60 (seconds)",
            "seconds between two runs of the ZFS textfile collector",
            attr="monitoring.zfs_metrics_interval",
        ),
    ),
    *_in(
        "alerts",
        "roles.monitoring_rules",
        Key(
            "replica_lag_alert_seconds",
            INTEGER,
            300,
            "300",
            "a MariaDB replica this far behind its primary is alerted",
            attr="monitoring.replica_lag_alert_seconds",
        ),
        Key(
            "replication_slot_alert_bytes",
            INTEGER,
            10 * 1024**3,
            "10 * 1024**3",
            "WAL a PostgreSQL replication slot may hold back before it is alerted",
            attr="monitoring.replication_slot_alert_bytes",
        ),
        Key(
            "arc_metadata_hit_ratio_alert",
            NUMBER,
            0.9,
            "0.9",
            "MariaDB hosts: an ARC demand metadata hit ratio below this is alerted",
            attr="monitoring.arc_metadata_hit_ratio_alert",
        ),
        Key(
            "scrub_max_age_days",
            INTEGER,
            35,
            "35",
            "the oldest the last scrub may be (the scrub runs monthly)",
            attr="monitoring.scrub_max_age_days",
        ),
        Key(
            "snapshot_max_age_hours",
            INTEGER,
            26,
            "26",
            "the oldest the newest snapshot of a dataset that has snapshots may be",
            attr="monitoring.snapshot_max_age_hours",
        ),
        Key(
            "alert_for",
            MAPPING,
            {},
            '{"ZpoolNotOnline": "1m"}',
            'how long a condition must hold before its alert fires, per alert name (e.g. "10m")',
            attr="monitoring.alert_for",
            notes="Prometheus durations, over each alert's default in roles/monitoring_rules.py.",
        ),
    ),
)
