"""The monitoring roles' rules (roles/monitoring.py, roles/monitoring_rules.py): ports, Prometheus
durations, the ZFS collector's interval, alert thresholds and `for:` overrides, and the addresses
a Prometheus server scrapes. validation runs them (validation/checks.py) before any host is
touched.
"""

from __future__ import annotations

import re

from model import keys
from model.checking import Context, close
from model.hostdata import HostConfig
from roles import monitoring_rules

COLLECTOR_NAME = re.compile(r"[a-z][a-z0-9_]*")
# node_exporter collectors whose metrics the alert rules read (roles/monitoring_rules.py).
ALERTED_COLLECTORS = {
    "textfile": "the pool, scrub and snapshot alerts: dbzfs_* from the ZFS collector of ours",
    "zfs": "ArcMetadataHitRatioLow: node_zfs_arc_demand_metadata_*",
}


def _example(key: str) -> str:
    return f"e.g. {keys.KEYS[key].example}"


def host(ctx: Context, c: HostConfig) -> None:
    m = c.monitoring
    ports = {
        "node_exporter_port": m.node_exporter_port,
        "mysqld_exporter_port": m.mysqld_exporter_port,
        "postgres_exporter_port": m.postgres_exporter_port,
        "prometheus_port": m.prometheus_port,
    }
    taken = {3306: "MariaDB", 5432: "PostgreSQL", 22: "SSH"}
    for key, port in ports.items():
        if not ctx.ok(c, key):
            continue
        if not 1 <= port <= 65535:
            ctx.add(c.name, key, port, "not a TCP port (1..65535)", _example(key))
        elif port in taken:
            ctx.add(c.name, key, port, f"{taken[port]}'s port", _example(key))
        else:
            taken[port] = key
    for key, value in (
        ("prometheus_scrape_interval", m.scrape_interval),
        ("prometheus_retention", m.retention),
    ):
        if ctx.ok(c, key) and not monitoring_rules.valid_duration(value):
            ctx.add(c.name, key, value, "not a Prometheus duration", _example(key))
    for key, value, low, high in (
        ("zfs_metrics_interval", m.zfs_metrics_interval, 5, 3600),
        ("replica_lag_alert_seconds", m.replica_lag_alert_seconds, 1, None),
        ("replication_slot_alert_bytes", m.replication_slot_alert_bytes, 1, None),
        ("scrub_max_age_days", m.scrub_max_age_days, 1, None),
        ("snapshot_max_age_hours", m.snapshot_max_age_hours, 1, None),
    ):
        if ctx.ok(c, key) and (value < low or (high is not None and value > high)):
            where = f"{low}..{high}" if high is not None else f"at least {low}"
            ctx.add(c.name, key, value, f"out of range ({where})", _example(key))
    if ctx.ok(c, "node_exporter_disabled_collectors"):
        for name in m.node_exporter_disabled_collectors:
            if not isinstance(name, str) or not COLLECTOR_NAME.fullmatch(name):
                ctx.add(
                    c.name,
                    "node_exporter_disabled_collectors",
                    name,
                    "not a node_exporter collector name",
                    'e.g. "systemd" (the NAME of --no-collector.NAME)',
                )
            elif name in ALERTED_COLLECTORS:
                ctx.add(
                    c.name,
                    "node_exporter_disabled_collectors",
                    name,
                    f"alerts read its metrics ({ALERTED_COLLECTORS[name]})",
                    "remove it from the list",
                )
    ratio = m.arc_metadata_hit_ratio_alert
    if ctx.ok(c, "arc_metadata_hit_ratio_alert") and not 0 < ratio < 1:
        ctx.add(c.name, "arc_metadata_hit_ratio_alert", ratio, "must be a ratio between 0 and 1", "e.g. 0.9")
    if ctx.ok(c, "alert_for") and m.alert_for:
        names = monitoring_rules.alert_names()
        for name, duration in m.alert_for.items():
            if name not in names:
                hint = close(str(name), names)
                ctx.add(
                    c.name,
                    f"alert_for.{name}",
                    duration,
                    "no such alert",
                    f"did you mean {hint}?" if hint else f"one of {names}",
                )
            elif not isinstance(duration, str) or not monitoring_rules.valid_duration(duration):
                ctx.add(c.name, f"alert_for.{name}", duration, "not a Prometheus duration", 'e.g. "5m"')


def fleet(ctx: Context) -> None:
    """A Prometheus server reaches the other hosts' exporters on their replication address."""
    servers = [n for n, c in ctx.cfg.items() if c.prometheus_server is True]
    if not servers:
        return
    for name, c in ctx.cfg.items():
        if name in servers and len(servers) == 1:
            continue
        if not c.replication_address and ctx.ok(c, "replication_address"):
            ctx.add(
                name,
                "replication_address",
                None,
                f"Prometheus on {', '.join(servers)} scrapes this host's exporters, which listen "
                "on its replication address only, and it has none",
                "set its address on the private network",
            )
