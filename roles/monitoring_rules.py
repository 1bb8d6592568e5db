"""The Prometheus alert rules, generated from the deploy's data (pure: no pyinfra).

`rules(hosts, monitoring)` builds the rule file for the Prometheus host `monitoring` from the
database and backup hosts' `HostConfig`s; `rules_yaml` is the same as the text the monitoring role
writes. A backup host (role "backup", no engine: roles/backup.py) is watched like a database host
minus the engine: its targets, its pool and its ZFS collector, and its pulls (the Backup* alerts,
only in an inventory that has one); no engine, replication or snapshot alert selects it.
`ALERTS` names every alert with its default `for:`, its severity, what it means and what to do (the
docs/monitoring.md's table is made from it); the Prometheus host's `alert_for` overrides the `for:` by name.

Thresholds come from each host's own data (capacity, replica lag, slot WAL, ARC ratio, scrub and
snapshot age, the ZFS collector's interval, a backup host's copy age and pull interval): when the
hosts an alert applies to agree, it is one rule; when they differ, one rule per distinct value,
each selecting its hosts with `instance=~"a|b"`, all under the same alert name.

What the rules select on (the scrape config of roles/monitoring.py is the other side of this):
every target has `instance` = the inventory host name; a database host's also `engine` and
`cluster`, a backup host's `role="backup"` instead; the jobs are `node` (node_exporter with the ZFS
and textfile collectors: every host), `mysqld`, `postgres` (the database hosts) and `prometheus`.
The `dbzfs_zpool_*` and `dbzfs_zfs_*` series are our own ZFS textfile collector's (on a backup
host too, whose received copies are snapshots it lists: hence the snapshot alert selects the
database hosts by name), `dbzfs_snapshots_taken_here` the snapshot job's, `dbzfs_backup_*` the
backup host's pull's (host_scripts/backup_pull.py: `dbzfs_backup_pull_success`,
`dbzfs_backup_newest_copy_timestamp_seconds` and `dbzfs_backup_copies` per `source` and `dataset`
pulled, absent for a skipped one; `dbzfs_backup_last_run_timestamp_seconds`, the run's start, and
`dbzfs_backup_run_success`), and `dbzfs_pgbackrest_*` its pgBackRest backups'
(host_scripts/pgbackrest_metrics.py: `dbzfs_pgbackrest_stanza_ok`, `dbzfs_pgbackrest_backups`
and `dbzfs_pgbackrest_newest_backup_timestamp_seconds` per `stanza`, the latter absent for a stanza
without a backup; `dbzfs_pgbackrest_info_success` and `dbzfs_pgbackrest_last_run_timestamp_seconds`).
The exporters' metric names were checked against Debian 12's packages, run against throwaway
local servers (MariaDB 10.11 primary + replica, PostgreSQL 15 primary + streaming standby with
slots), and against their sources:

- node_exporter 1.5.0: `node_zfs_arc_demand_metadata_hits` / `_misses` (collector/zfs.go and
  zfs_linux.go at v1.5.0: kstat `arcstats` name -> `node_zfs_arc_<name>`, untyped, cumulative;
  also in its fixtures/e2e-output.txt); `up`.
- mysqld_exporter 0.14.0 (collector/slave_status.go, collector.go parseStatus): `mysql_up`;
  `mysql_slave_status_slave_io_running` and `_slave_sql_running` (Yes=1, No and Connecting=0; run
  against a MariaDB 10.11 replica: IO "Connecting" with the primary stopped gave 0, SQL stopped by
  an error gave 0), `mysql_slave_status_seconds_behind_master` (absent while it is NULL: a stopped
  thread or a lost primary; the stopped-thread alert covers those). A server that has no replica
  configuration has no `mysql_slave_status_*` series at all.
- postgres_exporter 0.11.1 (cmd/postgres_exporter/postgres_exporter.go and queries.go, default
  metrics only: Debian's package passes no --extend.query-path): `pg_up`;
  `pg_stat_replication_pg_current_wal_lsn_bytes{application_name, client_addr, state, slot_name}`
  on the primary, one series per connected walsender (its `slot_name` label holds the walsender's
  pid, not the slot); `pg_replication_slots_pg_wal_lsn_diff{slot_name, database}` (bytes of WAL
  between the current position and the slot's restart_lsn; NaN for a slot that never reserved
  WAL) and `pg_replication_slots_active`; `pg_settings_in_hot_standby` (cmd/postgres_exporter/
  pg_setting.go at v0.11.1: querySettings reads every pg_settings row of vartype bool, integer or
  real and names it `pg_settings_<name>`, a bool being 1 for "on" and 0 otherwise, with the
  `server` label; server.go Scrape runs it unless --disable-settings-metrics, which our
  drop-in does not pass). `in_hot_standby` is PostgreSQL 14+'s read-only bool that shows whether
  the server is in recovery now, not a configured value: Debian's 0.11.1 binary against a
  PostgreSQL 15 primary + standby gave 0 on the primary and 1 on the standby, and after a
  switchover 0 on the promoted server (same exporter connection) and 1 on the old primary.
  0.11.1 exposes no pg_stat_wal_receiver by default, so whether a standby streams is read from
  the walsenders of the servers of its replication group, by application_name = the standby's
  inventory name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import NamedTuple

import yaml

import engines
from model.hostdata import HostConfig


class Alert(NamedTuple):
    default_for: str  # how long the condition holds before the alert fires (alert_for overrides)
    severity: str  # "critical": act now; "warning": act within the working day
    summary: str
    action: str


# Ordered as docs/monitoring.md's table lists them.
ALERTS: dict[str, Alert] = {
    "TargetDown": Alert(
        "5m",
        "critical",
        "An exporter (or Prometheus itself) does not answer its scrape.",
        "Check the host is up and the exporter's service is running "
        "(systemctl status prometheus-node-exporter, -mysqld-exporter or -postgres-exporter).",
    ),
    "TargetMissing": Alert(
        "10m",
        "critical",
        "A target the inventory expects (a host's node or database exporter, or Prometheus) is not scraped.",
        "Re-run the deploy so Prometheus's scrape config lists every host of the inventory.",
    ),
    "DatabaseDown": Alert(
        "2m",
        "critical",
        "The database exporter answers but cannot reach its MariaDB or PostgreSQL server.",
        "Check the database service and its log on that host; start it once the cause is fixed.",
    ),
    "ZpoolNotOnline": Alert(
        "1m",
        "critical",
        "A ZFS pool is not ONLINE (degraded, faulted, suspended or not imported at all).",
        "Run zpool status -x on the host, replace or reattach the failed drive and watch the resilver.",
    ),
    "ZpoolCapacityHigh": Alert(
        "15m",
        "warning",
        "A ZFS pool is fuller than the host's zfs_capacity_threshold percent.",
        "Free space (old snapshots, binlogs or WAL, unused data) or add drives before writes slow down.",
    ),
    "ZpoolDeviceErrors": Alert(
        "1m",
        "warning",
        "A drive of a ZFS pool has read, write or checksum errors.",
        "Look at zpool status and the drive's SMART data; replace the drive if errors keep coming, "
        "else zpool clear the pool.",
    ),
    "ZpoolDataErrors": Alert(
        "1m",
        "critical",
        "A ZFS pool reports permanent data errors: some data could not be repaired.",
        "Run zpool status -v to list the damaged files and restore them from a replica or a backup.",
    ),
    "ZpoolSpareInUse": Alert(
        "5m",
        "warning",
        "A hot spare has taken the place of a failed drive.",
        "Replace the failed drive (zpool replace), then the spare returns to the spare list.",
    ),
    "ZpoolScrubFoundErrors": Alert(
        "1m",
        "warning",
        "The last scrub of a ZFS pool found errors.",
        "Check zpool status -v for what was damaged and which drive it came from.",
    ),
    "ZpoolScrubOverdue": Alert(
        "1h",
        "warning",
        "A ZFS pool has not been scrubbed for longer than scrub_max_age_days.",
        "Check the monthly scrub timer (systemctl status zfs-scrub-monthly@POOL.timer) and start "
        "one by hand: zpool scrub POOL.",
    ),
    "ArcMetadataHitRatioLow": Alert(
        "30m",
        "warning",
        "On a MariaDB host, too few ZFS metadata reads are served from the ARC.",
        "Check the ARC is not squeezed (arc_summary; zfs_arc_max in zfs_module_params) by the buffer pool.",
    ),
    "MariaDBReplicationStopped": Alert(
        "5m",
        "critical",
        "A MariaDB server's replication IO or SQL thread is stopped, or it is read-only (a replica) "
        "with no replication set up.",
        "Run SHOW REPLICA STATUS on the replica, fix the error it shows and START REPLICA.",
    ),
    "MariaDBReplicaLagging": Alert(
        "5m",
        "warning",
        "A MariaDB replica is more than replica_lag_alert_seconds behind its primary.",
        "Look for long transactions or heavy writes on the primary and for I/O saturation on the replica.",
    ),
    "PostgresStandbyNotStreaming": Alert(
        "5m",
        "critical",
        "A PostgreSQL server in hot standby is not streaming WAL from any server of its replication group.",
        "Check its primary is up and the standby's log for connection or WAL errors; "
        "its replication slot keeps WAL on the primary meanwhile.",
    ),
    "PostgresReplicationSlotWALHigh": Alert(
        "15m",
        "warning",
        "A PostgreSQL replication slot holds back more WAL than replication_slot_alert_bytes.",
        "Bring its standby back to streaming, or drop the slot if that standby is gone for good.",
    ),
    "ZfsSnapshotTooOld": Alert(
        "30m",
        "warning",
        "A dataset's newest snapshot is older than snapshot_max_age_hours on a host that takes them.",
        "Check journalctl -u dbzfs-snapshot and sanoid.timer on the host; take the due ones by hand: "
        "systemctl start dbzfs-snapshot.",
    ),
    "ZfsMetricsCollectorFailing": Alert(
        "10m",
        "warning",
        "The ZFS metrics collector fails or its metrics are stale or missing, so the pool alerts are blind.",
        "Check systemctl status dbzfs-zfs-metrics.service and its journal on the host.",
    ),
    "BackupCopyTooOld": Alert(
        "30m",
        "warning",
        "A backup host's newest copy of a database host's dataset is older than its backup_max_age_hours.",
        "Check journalctl -u dbzfs-backup-pull on the backup host; run it by hand: "
        "systemctl start dbzfs-backup-pull.",
    ),
    "BackupPullFailing": Alert(
        "30m",
        "warning",
        "A backup host's pull of a dataset fails, or its pulls stopped running or wrote no metrics.",
        "Check journalctl -u dbzfs-backup-pull and dbzfs-backup-pull.timer on the backup host; run it "
        "by hand: systemctl start dbzfs-backup-pull.",
    ),
    "PostgresArchiveFailing": Alert(
        "10m",
        "critical",
        "A PostgreSQL server fails to archive its WAL to the backup host and archived nothing for 15 "
        "minutes; pg_wal grows meanwhile.",
        "Read the archive-push errors in the server's log; on the backup host run "
        "pgbackrest --stanza=CLUSTER check as postgres.",
    ),
    "PgbackrestBackupFailing": Alert(
        "30m",
        "warning",
        "A stanza's newest pgBackRest backup is older than pgbackrest_backup_max_age_hours, the stanza is "
        "not ok, or its metrics fail.",
        "On the backup host, read pgbackrest info as postgres and journalctl -u 'dbzfs-pgbackrest-*'; "
        "back up now: systemctl start dbzfs-pgbackrest-backup@incr.",
    ),
    "BinlogStreamFailing": Alert(
        "10m",
        "warning",
        "A backup host does not stream a MariaDB group's binlogs, or missed some the primary purged.",
        "Check journalctl -u dbzfs-binlog@CLUSTER on the backup host; after a gap, point-in-time "
        "recovery starts from the next copy.",
    ),
}
# Only in the rules of an inventory that has a backup host (PostgresArchiveFailing and
# PgbackrestBackupFailing: and PostgreSQL hosts, which then archive to it: roles/pgbackrest.py;
# BinlogStreamFailing: and MariaDB hosts, whose binlogs it streams: roles/binlogs.py).
BACKUP_ALERTS = (
    "BackupCopyTooOld",
    "BackupPullFailing",
    "PostgresArchiveFailing",
    "PgbackrestBackupFailing",
    "BinlogStreamFailing",
)

JOBS = engines.by_engine("exporter_job")
UP = engines.by_engine("up_metric_prefix")  # <prefix>_up: whether the exporter reaches its server
# ArcMetadataHitRatioLow: the rate window, and the least demand metadata accesses per second over
# it for the ratio to mean anything (a quiet host's few reads are no evidence).
ARC_WINDOW = "30m"
ARC_MIN_ACCESSES_PER_SECOND = 10
# ZfsMetricsCollectorFailing: stale after this many of the host's collector intervals.
COLLECTOR_STALE_INTERVALS = 3
# BackupPullFailing: stale after this many of the backup host's backup_pull_minutes.
BACKUP_STALE_PULLS = 3
# PostgresArchiveFailing: failures and no success over this window. PostgreSQL retries a failed
# segment every minute, so a broken archive fails several times in it; a quiet server archives
# nothing and fails nothing, and never fires.
ARCHIVE_WINDOW = "15m"

# Prometheus' duration syntax (prometheus/common model.ParseDuration, as in Prometheus 2.42):
# units in this order, each at most once, integers only; "0" alone is allowed too.
_DURATION_RE = re.compile(r"^([0-9]+y)?([0-9]+w)?([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?$")
_DURATION_MS = {"y": 365 * 86_400_000, "w": 7 * 86_400_000, "d": 86_400_000, "h": 3_600_000}
_DURATION_MS.update({"m": 60_000, "s": 1000, "ms": 1})


def alerts_markdown() -> str:
    """docs/monitoring.md's table of alerts: name, severity, default `for:`, what it means, what to do."""
    lines = ["| alert | severity | for | what it means | what to do |", "| --- | --- | --- | --- | --- |"]
    for name, a in ALERTS.items():
        lines.append(f"| `{name}` | {a.severity} | {a.default_for} | {a.summary} | {a.action} |")
    return "\n".join(lines) + "\n"


def alert_names() -> list[str]:
    return list(ALERTS)


def valid_duration(s: str) -> bool:
    """Whether Prometheus takes `s` as a duration (e.g. 30s, 5m, 1h30m, 0s)."""
    if not isinstance(s, str) or not s:
        return False
    if s == "0":
        return True
    if not _DURATION_RE.match(s):
        return False
    total = 0
    for number, unit in re.findall(r"([0-9]+)(ms|[ywdhms])", s):
        total += int(number) * _DURATION_MS[unit]
    return total < 2**63 // 1_000_000  # Prometheus' int64 nanoseconds


# --- PromQL building blocks ---------------------------------------------------------------------


def _str(value: str) -> str:
    """A PromQL string literal."""
    return json.dumps(value)


def _selector(metric: str, job: str, instances: list[str] | None = None, **labels: str) -> str:
    """metric{job="...",instance=~"a|b",label="..."}: instances None selects every instance."""
    matchers = [f"job={_str(job)}"]
    if instances is not None:
        if len(instances) == 1:
            matchers.append(f"instance={_str(instances[0])}")
        else:
            matchers.append(f"instance=~{_str('|'.join(re.escape(i) for i in instances))}")
    matchers += [f"{name}={_str(value)}" for name, value in labels.items()]
    return f"{metric}{{{','.join(matchers)}}}"


def _with_label(expr: str, label: str, value: str) -> str:
    """expr with one more label set to a fixed value."""
    return f'label_replace({expr}, {_str(label)}, {_str(value.replace("$", "$$"))}, "", "")'


def _label_from(expr: str, label: str, source: str) -> str:
    """expr with `label` set to the value of its label `source`."""
    return f'label_replace({expr}, {_str(label)}, "$1", {_str(source)}, "(.*)")'


def _num(value: float) -> str:
    return repr(value) if isinstance(value, float) else str(int(value))


def _by_value(hosts: list[HostConfig], value: Callable[[HostConfig], object]) -> list[tuple]:
    """[(value, None)] when every host has the same value (or there is one host), else
    [(value, [its hosts' names])] per distinct value, in the hosts' order. No hosts: []."""
    groups: dict[object, list[str]] = {}
    for h in hosts:
        groups.setdefault(value(h), []).append(h.name)
    if len(groups) == 1:
        return [(next(iter(groups)), None)]
    return list(groups.items())


class _Rules:
    def __init__(self, alert_for: dict) -> None:
        unknown = [name for name in alert_for if name not in ALERTS]
        if unknown:  # validation refuses these first, with a hint
            raise ValueError(f"alert_for names no such alert: {', '.join(map(str, unknown))}")
        bad = {name: d for name, d in alert_for.items() if not valid_duration(d)}
        if bad:
            raise ValueError(f"alert_for: not Prometheus durations: {bad}")
        self.alert_for = alert_for
        self.groups: dict[str, list[dict]] = {}

    def add(self, group: str, alert: str, expr: str, for_: str | None = None, **labels: str) -> None:
        """One alerting rule. `labels` tell apart the rules of one alert (a threshold of some of
        the hosts): promtool's lint refuses two rules with the same name and labels."""
        meta = ALERTS[alert]
        self.groups.setdefault(group, []).append(
            {
                "alert": alert,
                "expr": expr,
                "for": for_ or self.alert_for.get(alert, meta.default_for),
                "labels": {"severity": meta.severity, **labels},
                "annotations": {"summary": meta.summary, "action": meta.action},
            }
        )


def _or(clauses: list[str], on: str = "") -> str:
    return f"\nor{on} ".join(clauses)


# --- the rules ----------------------------------------------------------------------------------


def _targets(r: _Rules, hosts: list[HostConfig], monitoring: HostConfig) -> None:
    r.add("dbzfs-targets", "TargetDown", "up == 0")
    expected = [("prometheus", monitoring.name)]
    for h in hosts:
        expected += [("node", h.name)] + ([(JOBS[h.engine], h.name)] if h.engine in JOBS else [])
    r.add(
        "dbzfs-targets",
        "TargetMissing",
        _or([f"absent(up{{job={_str(job)},instance={_str(name)}}})" for job, name in expected]),
    )
    engines = {h.engine for h in hosts if h.engine in JOBS}
    down = [f"{_selector(f'{prefix}_up', JOBS[e])} == 0" for e, prefix in UP.items() if e in engines]
    if down:
        r.add("dbzfs-targets", "DatabaseDown", _or(down))


def _zfs(r: _Rules, hosts: list[HostConfig]) -> None:
    """The pools and the ZFS collector of every host (backup hosts too); the snapshots and the
    ARC of the database hosts only."""
    group = "dbzfs-zfs"
    databases = [h for h in hosts if h.engine in JOBS]
    # Not ONLINE: the state the pool reports, or no series at all for the pool the host's data
    # names while the collector works (not imported, or exported).
    clauses = [
        'dbzfs_zpool_state{job="node",state!="ONLINE"} == 1',
        f"{_selector('dbzfs_zpool_online', 'node')} == 0",
    ]
    for pool, names in _by_value(hosts, lambda h: h.pool.name):
        names = names or [h.name for h in hosts]
        missing = (
            f"{_selector('dbzfs_zfs_metrics_success', 'node', names)} == 1 "
            f"unless on(instance) {_selector('dbzfs_zpool_online', 'node', pool=pool)}"
        )
        clauses.append(_with_label(_with_label(missing, "pool", pool), "state", "MISSING"))
    r.add(group, "ZpoolNotOnline", _or(clauses, " on(instance, pool)"))

    for threshold, names in _by_value(hosts, lambda h: h.capacity_threshold):
        expr = f"{_selector('dbzfs_zpool_capacity_percent', 'node', names)} > {_num(threshold)}"
        r.add(group, "ZpoolCapacityHigh", expr, threshold=f"{threshold}%")

    # Per drive when the collector names it; the pool's sum otherwise. zpool's error counters only
    # go up until `zpool clear`, so > 0 is the condition.
    r.add(
        group,
        "ZpoolDeviceErrors",
        f"{_selector('dbzfs_zpool_device_errors', 'node')} > 0\n"
        f"or on(instance, pool, type) {_selector('dbzfs_zpool_errors', 'node')} > 0",
    )
    r.add(group, "ZpoolDataErrors", f"{_selector('dbzfs_zpool_data_errors', 'node')} > 0")
    r.add(group, "ZpoolSpareInUse", f"{_selector('dbzfs_zpool_spares_in_use', 'node')} > 0")
    r.add(group, "ZpoolScrubFoundErrors", f"{_selector('dbzfs_zpool_scrub_errors', 'node')} > 0")

    # Scrubbed once, too long ago; or never scrubbed: the collector does not know a pool's age, so
    # that fires once the pool has been seen never scrubbed for the whole scrub_max_age_days (its
    # `for:`), which is never early for a new pool (a Prometheus restart may make it late).
    for days, names in _by_value(hosts, lambda h: h.monitoring.scrub_max_age_days):
        end = _selector("dbzfs_zpool_scrub_end_timestamp_seconds", "node", names)
        scrubbing = _selector("dbzfs_zpool_scrub_in_progress", "node", names)
        running = f"unless on(instance, pool) {scrubbing} == 1"
        age = f"{days}d"
        too_old = f"({end} > 0 and time() - {end} > {days * 86400})"
        r.add(group, "ZpoolScrubOverdue", f"{too_old}\n{running}", threshold=age)
        r.add(group, "ZpoolScrubOverdue", f"{end} == 0\n{running}", age, threshold=age, last_scrub="never")

    # The database hosts' only, by name when there are backup hosts: the collector lists a backup
    # host's copies as snapshots too, but it takes none (BackupCopyTooOld watches their age).
    for hours, names in _by_value(databases, lambda h: h.monitoring.snapshot_max_age_hours):
        if names is None and len(databases) < len(hosts):
            names = [h.name for h in databases]
        newest = _selector("dbzfs_zfs_newest_snapshot_timestamp_seconds", "node", names)
        # Not on a host whose snapshot job says it takes none in its server's present role (a
        # replica promoted keeps its old snapshots until sanoid ages them out).
        not_taken = _selector("dbzfs_snapshots_taken_here", "node", names)
        r.add(
            group,
            "ZfsSnapshotTooOld",
            f"time() - {newest} > {hours * 3600}\nunless on(instance) {not_taken} == 0",
            threshold=f"{hours}h",
        )

    # The collector, one of three ways (one alert per host, its `problem` label says which): its
    # last run failed (it writes success 0 and keeps the last success's time); it has not run for
    # a while (node_exporter serves the last file written, with success 1); or there is no file
    # at all on a host whose node_exporter answers.
    for interval, names in _by_value(hosts, lambda h: h.monitoring.zfs_metrics_interval):
        last = _selector("dbzfs_zfs_metrics_last_success_timestamp_seconds", "node", names)
        success = _selector("dbzfs_zfs_metrics_success", "node", names)
        up = _selector("up", "node", names)
        too_old = f"time() - {last} > {COLLECTOR_STALE_INTERVALS * interval}"
        clauses = [
            _with_label(f"{success} == 0", "problem", "failing"),
            _with_label(f"{too_old} unless on(instance) {success} == 0", "problem", "stale"),
            _with_label(f"{up} == 1 unless on(instance) {success}", "problem", "missing"),
        ]
        stale = f"{COLLECTOR_STALE_INTERVALS * interval}s"
        r.add(group, "ZfsMetricsCollectorFailing", _or(clauses), threshold=stale)

    # A backup host's targets have no `engine` label: engine="mariadb" selects none of them.
    mariadb = [h for h in databases if h.engine == "mariadb"]
    for ratio, names in _by_value(mariadb, lambda h: h.monitoring.arc_metadata_hit_ratio_alert):
        sel = {"engine": "mariadb"} if names is None else {}
        hits, misses = (
            f"rate({_selector(f'node_zfs_arc_demand_metadata_{kind}', 'node', names, **sel)}[{ARC_WINDOW}])"
            for kind in ("hits", "misses")
        )
        r.add(
            group,
            "ArcMetadataHitRatioLow",
            f"{hits} / ({hits} + {misses}) < {_num(ratio)}\n"
            f"and {hits} + {misses} > {ARC_MIN_ACCESSES_PER_SECOND}",
            threshold=_num(ratio),
        )


def _replication(r: _Rules, hosts: list[HostConfig]) -> None:
    group = "dbzfs-replication"
    # By what each server is, not by the inventory's roles, so that the rules stay right through a
    # switchover or a failover the inventory does not show yet: a server with replication set up
    # has its threads watched; a read-only server without it (a replica that lost its setup) is
    # "none"; a writable one without it is a primary.
    mariadb = [h for h in hosts if h.engine == "mariadb"]
    if mariadb:
        names = [h.name for h in mariadb]
        io = _selector("mysql_slave_status_slave_io_running", "mysqld", names)
        sql = _selector("mysql_slave_status_slave_sql_running", "mysqld", names)
        read_only = _selector("mysql_global_variables_read_only", "mysqld", names)
        unset = f"{read_only} == 1 unless on(instance) {sql}"
        clauses = [
            _with_label(f"{io} == 0", "thread", "io"),
            _with_label(f"{sql} == 0", "thread", "sql"),
            _with_label(unset, "thread", "none"),
        ]
        r.add(group, "MariaDBReplicationStopped", _or(clauses))
    for seconds, names in _by_value(mariadb, lambda h: h.monitoring.replica_lag_alert_seconds):
        lag = _selector("mysql_slave_status_seconds_behind_master", "mysqld", names)
        r.add(group, "MariaDBReplicaLagging", f"{lag} > {_num(seconds)}", threshold=f"{seconds}s")

    # PostgreSQL likewise: a server in hot standby (pg_settings' in_hot_standby, the recovery
    # state it is in now) is a standby wherever the inventory puts it, and it streams when a
    # server of its replication group (cluster) has a walsender in state "streaming" under its
    # name (standbys connect with application_name = their inventory name, roles/postgresql.py);
    # that server may be its primary or, cascading, another standby. A primary never fires,
    # whatever its walsenders. A standby whose primary is down fires (DatabaseDown tells why);
    # a standby that is down itself is DatabaseDown's alone: its exporter has no pg_settings.
    # The walsenders are counted by application_name before it becomes `instance`, so that two
    # servers reporting the same standby (a split brain) cannot give label_replace duplicates.
    postgres = [h for h in hosts if h.engine == "postgresql"]
    groups: dict[str, list[str]] = {}
    for h in postgres:
        groups.setdefault(h.cluster, []).append(h.name)
    clauses = []
    for names in groups.values():
        in_standby = _selector("pg_settings_in_hot_standby", "postgres", names)
        walsenders = _selector(
            "pg_stat_replication_pg_current_wal_lsn_bytes", "postgres", names, state="streaming"
        )
        standbys = _label_from(f"{in_standby} == 1", "standby", "instance")
        streaming = _label_from(f"count by (application_name) ({walsenders})", "instance", "application_name")
        clauses.append(f"{standbys}\nunless on(instance) {streaming}")
    if clauses:
        r.add(group, "PostgresStandbyNotStreaming", _or(clauses))
    for size, names in _by_value(postgres, lambda h: h.monitoring.replication_slot_alert_bytes):
        held = _selector("pg_replication_slots_pg_wal_lsn_diff", "postgres", names)
        r.add(group, "PostgresReplicationSlotWALHigh", f"{held} > {_num(size)}", threshold=f"{size} bytes")


def _backup(r: _Rules, backups: list[HostConfig]) -> None:
    """The backup hosts' pulls (host_scripts/backup_pull.py's metrics). Every selector names
    `dbzfs_backup_*` series, which only a backup host's pull writes, but `up`: that one names the
    backup hosts."""
    group = "dbzfs-backup"
    # Per source and dataset the pull still pulls (a dataset skipped, its host taking no
    # snapshots in its present role, has no series: no alert). A failed pull keeps the age
    # of the copies it already had, so this fires alongside BackupPullFailing once they age.
    for hours, names in _by_value(backups, lambda h: h.backup_max_age_hours):
        newest = _selector("dbzfs_backup_newest_copy_timestamp_seconds", "node", names)
        pulled = _selector("dbzfs_backup_pull_success", "node", names)
        r.add(
            group,
            "BackupCopyTooOld",
            f"time() - {newest} > {hours * 3600}\nand on(instance, source, dataset) {pulled}",
            threshold=f"{hours}h",
        )
    # One of three ways, its `problem` label says which: a dataset's last pull failed (per source
    # and dataset); the last run started longer ago than BACKUP_STALE_PULLS intervals (the timer
    # does not run it, or one run takes that long: the metrics are written when it ends); or no
    # metrics at all on a backup host whose node_exporter answers (never run to its end).
    for minutes, names in _by_value(backups, lambda h: h.backup_pull_minutes):
        success = _selector("dbzfs_backup_pull_success", "node", names)
        last = _selector("dbzfs_backup_last_run_timestamp_seconds", "node", names)
        run = _selector("dbzfs_backup_run_success", "node", names)
        up = _selector("up", "node", names or [h.name for h in backups])
        stale = BACKUP_STALE_PULLS * minutes
        clauses = [
            _with_label(f"{success} == 0", "problem", "failing"),
            _with_label(f"time() - {last} > {stale * 60}", "problem", "stale"),
            _with_label(f"{up} == 1 unless on(instance) {run}", "problem", "missing"),
        ]
        r.add(group, "BackupPullFailing", _or(clauses), threshold=f"{stale}m")


def _archive(r: _Rules, postgres: list[HostConfig]) -> None:
    """PostgreSQL's archiver (postgres_exporter's pg_stat_archiver counters) on every server: a
    standby archives nothing until it is promoted, so it never fires."""
    if not postgres:
        return
    names = [h.name for h in postgres]
    failed = _selector("pg_stat_archiver_failed_count", "postgres", names)
    archived = _selector("pg_stat_archiver_archived_count", "postgres", names)
    window = ARCHIVE_WINDOW
    expr = f"increase({failed}[{window}]) > 0\nunless on(instance) increase({archived}[{window}]) > 0"
    r.add("dbzfs-backup", "PostgresArchiveFailing", expr, threshold=window)


def _pgbackrest(r: _Rules, backups: list[HostConfig]) -> None:
    """The backup hosts' pgBackRest backups (host_scripts/pgbackrest_metrics.py's metrics,
    written after every backup and every 15 minutes), one of four ways, its `problem` label says
    which: a stanza's newest backup is too old (the metrics keep being written while the backups
    stop, so it ages; with the metrics stopped too, node_exporter serves the last file and it
    ages all the same); pgBackRest reports a stanza not ok (no valid backup, its directory
    gone...); `pgbackrest info` fails; or no metrics at all on a backup host whose node_exporter
    answers."""
    for hours, names in _by_value(backups, lambda h: h.pgbackrest_backup_max_age_hours):
        newest = _selector("dbzfs_pgbackrest_newest_backup_timestamp_seconds", "node", names)
        ok = _selector("dbzfs_pgbackrest_stanza_ok", "node", names)
        info = _selector("dbzfs_pgbackrest_info_success", "node", names)
        up = _selector("up", "node", names or [h.name for h in backups])
        clauses = [
            _with_label(f"time() - {newest} > {hours * 3600}", "problem", "too_old"),
            _with_label(f"{ok} == 0", "problem", "stanza"),
            _with_label(f"{info} == 0", "problem", "failing"),
            _with_label(f"{up} == 1 unless on(instance) {info}", "problem", "missing"),
        ]
        r.add("dbzfs-backup", "PgbackrestBackupFailing", _or(clauses), threshold=f"{hours}h")


def _binlogs(r: _Rules, backups: list[HostConfig], clusters: list[str]) -> None:
    """The backup hosts' binlog streams (host_scripts/binlog_stream.py's metrics), one per
    MariaDB replication group: stopped, a gap (binlogs purged before they came), or none at all
    on a backup host whose node_exporter answers."""
    if not clusters:
        return
    names = [h.name for h in backups]
    streaming = _selector("dbzfs_binlog_streaming", "node", names)
    gap = _selector("dbzfs_binlog_gap", "node", names)
    up = _selector("up", "node", names)
    clauses = [
        _with_label(f"{streaming} == 0", "problem", "stopped"),
        _with_label(f"{gap} == 1", "problem", "gap"),
    ]
    for cluster in clusters:
        one = _selector("dbzfs_binlog_streaming", "node", names, cluster=cluster)
        clauses.append(
            _with_label(
                _with_label(f"{up} == 1 unless on(instance) {one}", "cluster", cluster), "problem", "missing"
            )
        )
    r.add("dbzfs-backup", "BinlogStreamFailing", _or(clauses))


def rules(hosts: list[HostConfig], monitoring: HostConfig) -> dict:
    """The rule file (groups of alerting rules) for `hosts`, the inventory's database and backup
    hosts (any other is ignored), on the Prometheus host `monitoring` (whose alert_for sets the
    rules' `for:`)."""
    hosts = [h for h in hosts if h.engine in JOBS or h.is_backup_host]
    databases = [h for h in hosts if h.engine in JOBS]
    backups = [h for h in hosts if h.engine not in JOBS]
    r = _Rules(dict(monitoring.monitoring.alert_for))
    _targets(r, hosts, monitoring)
    if hosts:
        _zfs(r, hosts)
    if databases:
        _replication(r, databases)
    if backups:
        _backup(r, backups)
        postgres = [h for h in databases if h.engine == "postgresql"]
        _archive(r, postgres)
        if postgres:
            _pgbackrest(r, backups)
        _binlogs(r, backups, sorted({h.cluster for h in databases if h.engine == "mariadb"}))
    return {"groups": [{"name": name, "rules": group} for name, group in r.groups.items()]}


class _Dumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


def rules_yaml(hosts: list[HostConfig], monitoring: HostConfig) -> str:
    header = (
        f"# Managed by dbzfs (roles/monitoring_rules.py) on {monitoring.name}: the alert rules for "
        "the inventory's database and backup hosts.\n"
    )
    body = yaml.dump(rules(hosts, monitoring), Dumper=_Dumper, sort_keys=False, width=1_000_000)
    return header + body
