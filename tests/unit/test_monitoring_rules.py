"""roles/monitoring_rules.py: the alert rules, checked and tested by Prometheus' own promtool.

promtool comes from Debian's `prometheus` package, extracted into .venv/bin by scripts/bootstrap
(lab mode): a missing promtool fails these tests, it never skips them.

- `promtool check rules --lint-fatal` on the rules rendered for the unit tests' fleet (with and
  without a backup host), for inventories/prod.py, inventories/lab.py and inventories/lab_backup.py;
- `promtool test rules` with the test files in tests/unit/promtool/: each feeds synthetic series
  to the rules rendered for FIXED (below, the data those files are written against: database
  hosts and two backup hosts) and asserts which alerts fire, with which labels, and when; every
  alert of ALERTS is shown firing and not firing there, and the database hosts' alerts are shown
  not firing on a backup host's series. Their expected annotations are ALERTS' own, filled in
  here (promtool compares annotations too: the files list labels only);
- the rule structure: per-host thresholds (one rule when the hosts agree, one per value selecting
  its hosts when they differ), alert_for, and valid_duration against promtool itself.
"""

import copy
import os
import re
import runpy
import subprocess
from pathlib import Path

import pytest
import yaml

from model.hostdata import HostConfig
from roles import monitoring_rules as mr

from tests.unit.conftest import REPO, backup_data, host_data

PROMTOOL = REPO / ".venv" / "bin" / "promtool"
PROMTOOL_TESTS = Path(__file__).resolve().parent / "promtool"
RULE_FILE = "dbzfs-alerts.yml"  # what the test files' rule_files name
GIB = 1024**3


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert os.access(PROMTOOL, os.X_OK), (
        f"{PROMTOOL} missing: run scripts/bootstrap (lab mode extracts promtool from Debian's prometheus)"
    )
    return subprocess.run(
        [str(PROMTOOL), *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


# The data tests/unit/promtool/*.yml are written against. Thresholds differ between hosts on
# purpose, so that both the per-host rules and the shared ones are exercised.
FIXED = {
    "db1": {"engine": "mariadb", "role": "primary", "zpool_name": "tank"},
    "db2": {"engine": "mariadb", "role": "replica", "primary": "db1", "zpool_name": "tank"},
    "db3": {
        "engine": "mariadb",
        "role": "replica",
        "primary": "db1",
        "zpool_name": "tank",
        "zfs_capacity_threshold": 90,
        "replica_lag_alert_seconds": 600,
        "arc_metadata_hit_ratio_alert": 0.8,
    },
    "pg1": {"engine": "postgresql", "role": "primary", "replication_slot_alert_bytes": GIB},
    "pg2": {"engine": "postgresql", "role": "replica", "primary": "pg1"},
    "pg3": {"engine": "postgresql", "role": "replica", "primary": "pg1"},
    # Backup hosts (no engine): bk1 with the defaults (copies at most 2h old, a pull every 15m,
    # pgBackRest backups at most 26h old), bk2 with its own pool, thresholds and interval.
    "bk1": {"role": "backup"},
    "bk2": {
        "role": "backup",
        "zpool_name": "vault",
        "zfs_capacity_threshold": 90,
        "backup_max_age_hours": 6,
        "backup_pull_minutes": 60,
        "pgbackrest_backup_max_age_hours": 4,
    },
}
FIXED_COMMON = {"scrub_max_age_days": 2, "snapshot_max_age_hours": 26, "zfs_metrics_interval": 60}
FIXED_POSTGRESQL = {"snapshot_max_age_hours": 48}
FIXED_MONITORING = (
    "mon1",
    {"alert_for": {"TargetDown": "2m", "ZpoolCapacityHigh": "10m", "ZpoolSpareInUse": "0s"}},
)


def configs(fleet: dict) -> list[HostConfig]:
    return [HostConfig.from_data(name, data) for name, data in fleet.items()]


def fixed() -> tuple[list[HostConfig], HostConfig]:
    fleet = {}
    for name, data in FIXED.items():
        extra = FIXED_POSTGRESQL if data.get("engine") == "postgresql" else {}
        fleet[name] = host_data(**{**FIXED_COMMON, **extra, **data})
    name, data = FIXED_MONITORING
    return configs(fleet), HostConfig.from_data(name, host_data(**data))


def monitor(**data) -> HostConfig:
    return HostConfig.from_data("mon1", host_data(**data))


def write_rules(tmp_path: Path, hosts: list[HostConfig], monitoring: HostConfig) -> Path:
    path = tmp_path / RULE_FILE
    path.write_text(mr.rules_yaml(hosts, monitoring))
    return path


def check(path: Path) -> None:
    r = promtool("check", "rules", "--lint-fatal", str(path))
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n{path.read_text()}"


def rules_named(doc: dict, alert: str) -> list[dict]:
    return [rule for group in doc["groups"] for rule in group["rules"] if rule["alert"] == alert]


def inventory_hosts(path: Path) -> tuple[list[HostConfig], HostConfig]:
    """An inventory file's database and backup hosts over group_data/all.py, and its Prometheus
    host (the `monitoring` group's first, or the first database host when it has none)."""
    inv = runpy.run_path(str(path))
    groups = inv["mariadb"] + inv["postgresql"] + inv.get("backup", [])
    fleet = {name: host_data(**data) for name, data in groups}
    monitoring = [m if isinstance(m, str) else m[0] for m in inv.get("monitoring") or []]
    mon = monitoring[0] if monitoring else next(iter(fleet))
    return configs(fleet), HostConfig.from_data(mon, fleet.get(mon, host_data()))


# --- promtool check rules -----------------------------------------------------------------------


def test_promtool_is_bootstraps_version():
    r = promtool("--version")
    assert r.returncode == 0 and "version 2.42.0" in r.stdout + r.stderr, r.stdout + r.stderr


def test_rules_for_the_unit_fleet_pass_promtool(fleet, tmp_path):
    check(write_rules(tmp_path, configs(fleet), monitor()))


@pytest.mark.parametrize("inventory", ["prod.py", "lab.py", "lab_backup.py"])
def test_rules_for_the_inventories_pass_promtool(inventory, tmp_path):
    """Every alert, the backup ones only where the inventory has a backup host."""
    hosts, mon = inventory_hosts(REPO / "inventories" / inventory)
    assert {h.engine for h in hosts if not h.is_backup_host} == {"mariadb", "postgresql"}
    path = write_rules(tmp_path, hosts, mon)
    check(path)
    doc = yaml.safe_load(path.read_text())
    expected = set(mr.ALERTS) - (set() if any(h.is_backup_host for h in hosts) else set(mr.BACKUP_ALERTS))
    assert {rule["alert"] for group in doc["groups"] for rule in group["rules"]} == expected


def test_the_backup_alerts_are_only_for_an_inventory_with_a_backup_host(fleet):
    doc = mr.rules(configs(fleet), monitor())
    assert not {r["alert"] for g in doc["groups"] for r in g["rules"]} & set(mr.BACKUP_ALERTS)
    assert set(mr.BACKUP_ALERTS) <= set(mr.ALERTS)


def test_rules_for_the_fixed_data_pass_promtool(tmp_path):
    check(write_rules(tmp_path, *fixed()))


def test_one_engine_only_has_no_rules_of_the_other(fleet, tmp_path):
    mariadb = {n: d for n, d in fleet.items() if d["engine"] == "mariadb"}
    path = write_rules(tmp_path, configs(mariadb), monitor())
    check(path)
    doc = yaml.safe_load(path.read_text())
    exprs = "\n".join(rule["expr"] for group in doc["groups"] for rule in group["rules"])
    assert "pg_" not in exprs and 'job="postgres"' not in exprs
    assert not [rule for group in doc["groups"] for rule in group["rules"] if "Postgres" in rule["alert"]]


def test_rules_for_the_unit_fleet_with_a_backup_host_pass_promtool(fleet, tmp_path):
    fleet["backup1"] = backup_data()
    path = write_rules(tmp_path, configs(fleet), monitor())
    check(path)
    doc = yaml.safe_load(path.read_text())
    assert {r["alert"] for g in doc["groups"] for r in g["rules"]} == set(mr.ALERTS)
    (missing,) = rules_named(doc, "TargetMissing")
    assert 'absent(up{job="node",instance="backup1"})' in missing["expr"]
    assert not re.search(r'job="(mysqld|postgres)",instance="backup1"', missing["expr"])
    (copy_age,) = rules_named(doc, "BackupCopyTooOld")
    assert copy_age["expr"] == (
        'time() - dbzfs_backup_newest_copy_timestamp_seconds{job="node"} > 7200\n'
        'and on(instance, source, dataset) dbzfs_backup_pull_success{job="node"}'
    )
    assert copy_age["labels"] == {"severity": "warning", "threshold": "2h"} and copy_age["for"] == "30m"
    (pull,) = rules_named(doc, "BackupPullFailing")
    assert pull["labels"] == {"severity": "warning", "threshold": "45m"} and pull["for"] == "30m"
    assert pull["expr"].count("\nor ") == 2
    for problem in ("failing", "stale", "missing"):
        assert f'"problem", "{problem}"' in pull["expr"]
    assert "> 2700" in pull["expr"]
    # `up` is every host's: the missing clause names the backup hosts.
    assert (
        'up{job="node",instance="backup1"} == 1 unless on(instance) dbzfs_backup_run_success' in pull["expr"]
    )
    (pgbackrest,) = rules_named(doc, "PgbackrestBackupFailing")
    assert pgbackrest["labels"] == {"severity": "warning", "threshold": "26h"} and pgbackrest["for"] == "30m"
    assert pgbackrest["expr"].count("\nor ") == 3
    for problem in ("too_old", "stanza", "failing", "missing"):
        assert f'"problem", "{problem}"' in pgbackrest["expr"]
    assert (
        'time() - dbzfs_pgbackrest_newest_backup_timestamp_seconds{job="node"} > 93600' in pgbackrest["expr"]
    )
    assert (
        'up{job="node",instance="backup1"} == 1 unless on(instance) dbzfs_pgbackrest_info_success{job="node"}'
        in pgbackrest["expr"]
    )


def test_the_pgbackrest_alert_needs_postgresql_hosts(fleet, tmp_path):
    """Without PostgreSQL hosts nothing archives to the backup host, which takes no pgBackRest
    backups: its pulls are still watched."""
    mariadb = {n: d for n, d in fleet.items() if d["engine"] == "mariadb"} | {"backup1": backup_data()}
    path = write_rules(tmp_path, configs(mariadb), monitor())
    check(path)
    alerts = {r["alert"] for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]}
    assert {"BackupCopyTooOld", "BackupPullFailing"} <= alerts
    assert not alerts & {"PgbackrestBackupFailing", "PostgresArchiveFailing"}


def test_a_backup_host_is_in_no_database_alert(fleet):
    """Its pool and collector are watched; no rule of the engines or the snapshots selects it:
    those select a job only the database hosts have, engine="mariadb", or the database hosts by
    name."""
    fleet["backup1"] = backup_data()
    doc = mr.rules(configs(fleet), monitor())
    for alert in ("ZfsSnapshotTooOld",):
        (rule,) = rules_named(doc, alert)
        assert 'instance=~"db1|db2|pg1|pg2"' in rule["expr"] and "backup1" not in rule["expr"]
    for alert in ("DatabaseDown", "MariaDBReplicationStopped", "MariaDBReplicaLagging"):
        for rule in rules_named(doc, alert):
            assert 'job="node"' not in rule["expr"] and "backup1" not in rule["expr"], rule
    for alert in ("PostgresStandbyNotStreaming", "PostgresReplicationSlotWALHigh"):
        for rule in rules_named(doc, alert):
            assert 'job="node"' not in rule["expr"] and "backup1" not in rule["expr"], rule
    (arc,) = rules_named(doc, "ArcMetadataHitRatioLow")
    assert set(re.findall(r"\{[^}]*\}", arc["expr"])) == {'{job="node",engine="mariadb"}'}
    (online,) = rules_named(doc, "ZpoolNotOnline")
    assert 'instance=~"db1|db2|pg1|pg2|backup1"' in online["expr"]


def test_backup_hosts_that_differ_get_one_rule_per_value(fleet, tmp_path):
    fleet["backup1"] = backup_data()
    fleet["backup2"] = backup_data(replication_address="10.99.0.52")
    fleet["backup3"] = backup_data(replication_address="10.99.0.53")
    agree = mr.rules(configs(fleet), monitor())
    for alert in mr.BACKUP_ALERTS:
        assert len(rules_named(agree, alert)) == 1, alert
    (pull,) = rules_named(agree, "BackupPullFailing")
    assert 'up{job="node",instance=~"backup1|backup2|backup3"}' in pull["expr"]
    fleet["backup3"] |= {"backup_max_age_hours": 5, "backup_pull_minutes": 60}
    fleet["backup1"] |= {"pgbackrest_backup_max_age_hours": 50}
    doc = mr.rules(configs(fleet), monitor())
    found = {
        alert: {r["labels"]["threshold"]: r["expr"] for r in rules_named(doc, alert)}
        for alert in ("BackupCopyTooOld", "BackupPullFailing", "PgbackrestBackupFailing")
    }
    assert set(found["BackupCopyTooOld"]) == {"2h", "5h"}
    assert set(found["BackupPullFailing"]) == {"45m", "180m"}
    assert 'instance=~"backup1|backup2"' in found["BackupCopyTooOld"]["2h"]
    assert "> 7200" in found["BackupCopyTooOld"]["2h"] and "> 18000" in found["BackupCopyTooOld"]["5h"]
    assert 'instance="backup3"' in found["BackupPullFailing"]["180m"]
    assert "> 10800" in found["BackupPullFailing"]["180m"]
    assert set(found["PgbackrestBackupFailing"]) == {"50h", "26h"}
    assert 'instance="backup1"' in found["PgbackrestBackupFailing"]["50h"]
    assert "> 180000" in found["PgbackrestBackupFailing"]["50h"]
    assert 'up{job="node",instance=~"backup2|backup3"}' in found["PgbackrestBackupFailing"]["26h"]
    check(write_rules(tmp_path, configs(fleet), monitor()))


def test_no_database_hosts_still_watches_prometheus(tmp_path):
    path = write_rules(tmp_path, [], monitor())
    check(path)
    doc = yaml.safe_load(path.read_text())
    assert [r["alert"] for g in doc["groups"] for r in g["rules"]] == ["TargetDown", "TargetMissing"]
    assert rules_named(doc, "TargetMissing")[0]["expr"] == 'absent(up{job="prometheus",instance="mon1"})'


# --- promtool test rules ------------------------------------------------------------------------


def promtool_test_files() -> list[Path]:
    return sorted(PROMTOOL_TESTS.glob("*.yml"))


def with_annotations(test_file: dict) -> dict:
    """The test file with every expected alert's annotations, ALERTS' summary and action."""
    doc = copy.deepcopy(test_file)
    for case in doc["tests"]:
        for alert_test in case.get("alert_rule_test", []):
            meta = mr.ALERTS[alert_test["alertname"]]
            for expected in alert_test.get("exp_alerts") or []:
                assert "exp_annotations" not in expected, "annotations come from ALERTS, not the file"
                expected["exp_annotations"] = {"summary": meta.summary, "action": meta.action}
    return doc


def test_there_are_promtool_test_files():
    assert [p.name for p in promtool_test_files()], f"no test files in {PROMTOOL_TESTS}"


@pytest.mark.parametrize("test_file", promtool_test_files(), ids=lambda p: p.stem)
def test_promtool_unit_tests(test_file, tmp_path):
    write_rules(tmp_path, *fixed())
    doc = yaml.safe_load(test_file.read_text())
    assert doc["rule_files"] == [RULE_FILE]
    (tmp_path / test_file.name).write_text(yaml.safe_dump(with_annotations(doc), sort_keys=False))
    r = promtool("test", "rules", test_file.name, cwd=tmp_path)
    assert r.returncode == 0, f"{test_file.name}:\n{r.stdout}\n{r.stderr}"
    assert "SUCCESS" in r.stdout + r.stderr


def test_every_alert_is_tested_firing_and_not_firing():
    fires, quiet = set(), set()
    for path in promtool_test_files():
        for case in yaml.safe_load(path.read_text())["tests"]:
            for alert_test in case.get("alert_rule_test", []):
                name = alert_test["alertname"]
                assert name in mr.ALERTS, f"{path.name}: {name} is no alert of ALERTS"
                (fires if alert_test.get("exp_alerts") else quiet).add(name)
    assert set(mr.ALERTS) - fires == set(), "never shown firing"
    assert set(mr.ALERTS) - quiet == set(), "never shown not firing"


# --- rule structure -----------------------------------------------------------------------------

# alert -> (the host data key of its threshold, a value that differs from the default, the engine
# of the hosts it applies to: None for all)
PER_HOST = {
    "ZpoolCapacityHigh": ("zfs_capacity_threshold", 90, None),
    "ZpoolScrubOverdue": ("scrub_max_age_days", 10, None),
    "ZfsSnapshotTooOld": ("snapshot_max_age_hours", 50, None),
    "ZfsMetricsCollectorFailing": ("zfs_metrics_interval", 30, None),
    "ArcMetadataHitRatioLow": ("arc_metadata_hit_ratio_alert", 0.75, "mariadb"),
    "MariaDBReplicaLagging": ("replica_lag_alert_seconds", 900, "mariadb"),
    "PostgresReplicationSlotWALHigh": ("replication_slot_alert_bytes", GIB, "postgresql"),
}


def test_every_per_host_threshold_is_covered():
    """Each threshold of a host's data (MonitoringSpec's, and the pool capacity's) is in PER_HOST."""
    spec = vars(HostConfig.from_data("x", host_data(engine="mariadb")).monitoring)
    suffixes = ("_alert", "_alert_seconds", "_alert_bytes", "_days", "_hours")
    thresholds = {k for k in spec if k.endswith(suffixes)}
    thresholds |= {"zfs_capacity_threshold", "zfs_metrics_interval"}
    assert thresholds == {key for key, _, _ in PER_HOST.values()}


@pytest.mark.parametrize("alert", PER_HOST)
def test_hosts_that_agree_share_one_rule(alert, fleet):
    doc = mr.rules(configs(fleet), monitor())
    found = rules_named(doc, alert)
    expected = 2 if alert == "ZpoolScrubOverdue" else 1  # scrubbed once / never: two rules
    assert len(found) == expected
    assert not [rule for rule in found if re.search(r'instance=~?"', rule["expr"])], found


@pytest.mark.parametrize("alert", PER_HOST)
def test_hosts_that_differ_get_one_rule_per_value(alert, fleet, tmp_path):
    key, value, engine = PER_HOST[alert]
    hosts = [n for n, d in fleet.items() if engine in (None, d["engine"])]
    odd, others = hosts[-1], hosts[:-1]

    def threshold(data: dict) -> set[str]:
        return {r["labels"]["threshold"] for r in rules_named(mr.rules(configs(data), monitor()), alert)}

    default = threshold(fleet)
    everywhere = threshold({n: d | {key: value} for n, d in fleet.items()})
    assert len(default) == len(everywhere) == 1 and default != everywhere

    fleet[odd][key] = value
    found = rules_named(mr.rules(configs(fleet), monitor()), alert)
    assert len(found) == (4 if alert == "ZpoolScrubOverdue" else 2)  # that one: scrubbed once / never
    own = f'instance="{odd}"'
    rest = f'instance="{others[0]}"' if len(others) == 1 else f'instance=~"{"|".join(others)}"'
    for rule in found:
        selects = [s for s in (own, rest) if s in rule["expr"]]
        assert len(selects) == 1, rule["expr"]
        assert {rule["labels"]["threshold"]} == (everywhere if selects == [own] else default)
    assert {own, rest} <= {s for r in found for s in (own, rest) if s in r["expr"]}
    check(write_rules(tmp_path, configs(fleet), monitor()))


def test_instance_regex_is_escaped_for_host_names_with_dots_and_dashes(tmp_path):
    """Host names are matched literally: `db-1.example.net` does not select `db-1xexample.net`."""
    names = ["db-1.example.net", "db-2.example.net", "db-3.example.net"]
    fleet = {n: host_data(engine="mariadb", role="primary") for n in names}
    fleet[names[2]]["zfs_capacity_threshold"] = 95
    write_rules(tmp_path, configs(fleet), monitor())
    check(tmp_path / RULE_FILE)

    def series(instance: str, value: int) -> dict:
        labels = f'job="node",instance="{instance}",engine="mariadb",cluster="mariadb",pool="dbpool"'
        return {"series": f"dbzfs_zpool_capacity_percent{{{labels}}}", "values": f"{value}x20"}

    def firing(instance: str, threshold: str) -> dict:
        labels = {"job": "node", "instance": instance, "engine": "mariadb", "cluster": "mariadb"}
        return {"exp_labels": {**labels, "pool": "dbpool", "severity": "warning", "threshold": threshold}}

    test = {
        "rule_files": [RULE_FILE],
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    series("db-1.example.net", 85),
                    series("db-1xexample.net", 85),  # no host of the data
                    series("db-3.example.net", 85),
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "15m",
                        "alertname": "ZpoolCapacityHigh",
                        "exp_alerts": [firing(names[0], "80%")],
                    }
                ],
            }
        ],
    }
    (tmp_path / "escape.yml").write_text(yaml.safe_dump(with_annotations(test), sort_keys=False))
    r = promtool("test", "rules", "escape.yml", cwd=tmp_path)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"


def test_replication_rules_follow_what_the_servers_are_not_the_inventorys_roles(fleet):
    fleet["pg3"] = copy.deepcopy(fleet["pg2"])
    doc = mr.rules(configs(fleet), monitor())
    # PostgreSQL: every host of the group, its primary too, is watched by whether it is in hot
    # standby, and looked for among the streaming walsenders of the whole group; no standby or
    # primary is named by the inventory.
    (streaming,) = rules_named(doc, "PostgresStandbyNotStreaming")
    pg = 'job="postgres",instance=~"pg1|pg2|pg3"'
    assert f"pg_settings_in_hot_standby{{{pg}}} == 1" in streaming["expr"]
    assert f'pg_stat_replication_pg_current_wal_lsn_bytes{{{pg},state="streaming"}}' in streaming["expr"]
    assert "application_name=" not in streaming["expr"]
    swapped = copy.deepcopy(fleet)  # the same hosts after a switchover to pg2
    swapped["pg1"].update(role="replica", primary="pg2")
    swapped["pg2"].update(role="primary", primary=None)
    swapped["pg3"].update(primary="pg2")
    assert rules_named(mr.rules(configs(swapped), monitor()), "PostgresStandbyNotStreaming") == [streaming]
    # MariaDB's rules watch every server by what it is (replica status, read_only), not by the
    # inventory's roles: they stay right through a switchover the inventory does not show yet.
    (stopped,) = rules_named(doc, "MariaDBReplicationStopped")
    assert 'instance=~"db1|db2"' in stopped["expr"] and "mysql_global_variables_read_only" in stopped["expr"]
    (missing,) = rules_named(doc, "TargetMissing")
    expected = {("prometheus", "mon1")} | {
        (job, h)
        for h in fleet
        for job in ("node", "mysqld" if fleet[h]["engine"] == "mariadb" else "postgres")
    }
    assert set(re.findall(r'absent\(up\{job="(\w+)",instance="(\w+)"\}\)', missing["expr"])) == expected


def test_a_standby_is_looked_for_in_its_own_replication_group_only(fleet, tmp_path):
    """Two PostgreSQL groups: a walsender named pg2 on a host of the other group does not make
    pg2 streaming."""
    fleet = {n: d for n, d in fleet.items() if d["engine"] == "postgresql"}
    fleet["pg3"] = copy.deepcopy(fleet["pg1"]) | {"cluster": "other"}
    fleet["pg4"] = copy.deepcopy(fleet["pg2"]) | {"primary": "pg3", "cluster": "other"}
    path = write_rules(tmp_path, configs(fleet), monitor())
    check(path)
    (rule,) = rules_named(yaml.safe_load(path.read_text()), "PostgresStandbyNotStreaming")
    assert rule["expr"].count('instance=~"pg1|pg2"') == rule["expr"].count('instance=~"pg3|pg4"') == 2

    def labels(instance: str, cluster: str) -> str:
        return (
            f'job="postgres",instance="{instance}",engine="postgresql",cluster="{cluster}",'
            'server="/run/postgresql:5432"'
        )

    def in_hot_standby(instance: str, cluster: str, value: int) -> dict:
        return {
            "series": f"pg_settings_in_hot_standby{{{labels(instance, cluster)}}}",
            "values": f"{value}x10",
        }

    def walsender(instance: str, cluster: str, standby: str) -> dict:
        extra = f'application_name="{standby}",client_addr="10.99.0.99",slot_name="4242",state="streaming"'
        name = "pg_stat_replication_pg_current_wal_lsn_bytes"
        return {"series": f"{name}{{{labels(instance, cluster)},{extra}}}", "values": "5e7+1000x10"}

    firing = {"job": "postgres", "instance": "pg2", "engine": "postgresql", "cluster": "postgresql"}
    firing |= {"server": "/run/postgresql:5432", "severity": "critical", "standby": "pg2"}
    test = {
        "rule_files": [RULE_FILE],
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    in_hot_standby("pg1", "postgresql", 0),
                    in_hot_standby("pg2", "postgresql", 1),
                    in_hot_standby("pg3", "other", 0),
                    in_hot_standby("pg4", "other", 1),
                    walsender("pg3", "other", "pg4"),
                    walsender("pg3", "other", "pg2"),  # not pg2's group
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "10m",
                        "alertname": "PostgresStandbyNotStreaming",
                        "exp_alerts": [{"exp_labels": firing}],
                    }
                ],
            }
        ],
    }
    (tmp_path / "groups.yml").write_text(yaml.safe_dump(with_annotations(test), sort_keys=False))
    r = promtool("test", "rules", "groups.yml", cwd=tmp_path)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"


# --- alert_for and durations --------------------------------------------------------------------


def test_alert_for_overrides_the_default_for(fleet):
    doc = mr.rules(configs(fleet), monitor(alert_for={"ZpoolNotOnline": "0s", "TargetDown": "1h30m"}))
    for group in doc["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == "ZpoolNotOnline":
                assert rule["for"] == "0s"
            elif rule["alert"] == "TargetDown":
                assert rule["for"] == "1h30m"
            elif rule["labels"].get("last_scrub") == "never":
                assert rule["for"] == "35d"  # the age itself: see ZpoolScrubOverdue
            else:
                assert rule["for"] == mr.ALERTS[rule["alert"]].default_for, rule


def test_only_the_prometheus_hosts_alert_for_counts(fleet):
    fleet["db1"]["alert_for"] = {"ZpoolNotOnline": "7m"}
    doc = mr.rules(configs(fleet), monitor())
    assert {r["for"] for r in rules_named(doc, "ZpoolNotOnline")} == {mr.ALERTS["ZpoolNotOnline"].default_for}


def test_unknown_alert_names_are_refused_not_ignored(fleet):
    assert mr.alert_names() == list(mr.ALERTS)
    assert "ZpoolOffline" not in mr.alert_names()
    with pytest.raises(ValueError, match="ZpoolOffline"):
        mr.rules(configs(fleet), monitor(alert_for={"ZpoolOffline": "5m"}))
    with pytest.raises(ValueError, match="not Prometheus durations"):
        mr.rules(configs(fleet), monitor(alert_for={"ZpoolNotOnline": "5 minutes"}))


DURATIONS = ["0s", "0", "30s", "5m", "1h30m", "2d", "1w", "1y", "100ms", "1h0m0s", "90m", "1d12h"]
NOT_DURATIONS = ["", "5", "5M", "1.5h", "-5m", "5m1h", "m", "1h 30m", "5mins", "1s1s", "99999999999999y"]


@pytest.mark.parametrize("duration", DURATIONS + NOT_DURATIONS)
def test_valid_duration_agrees_with_promtool(duration, tmp_path):
    path = tmp_path / "rules.yml"
    rule = {"alert": "X", "expr": "up == 0", "for": duration}
    path.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [rule]}]}))
    accepted = promtool("check", "rules", str(path)).returncode == 0
    assert mr.valid_duration(duration) == accepted == (duration in DURATIONS)


def test_valid_duration_refuses_what_is_no_string():
    assert not any(mr.valid_duration(v) for v in (None, 5, 5.0, ["5m"]))


# --- the table ----------------------------------------------------------------------------------


def test_alerts_table_is_plain():
    assert list(mr.ALERTS) == mr.alert_names()
    for name, alert in mr.ALERTS.items():
        assert re.fullmatch(r"(?:[A-Z][a-z]+|DB|WAL|SQL|ARC)+", name.replace("MariaDB", "Mariadb")), name
        assert mr.valid_duration(alert.default_for), name
        assert alert.severity in ("critical", "warning"), name
        for text in (alert.summary, alert.action):
            assert "\n" not in text and text.endswith(".") and "{{" not in text, (name, text)
            assert len(text) < 160, (name, text)


def test_rules_yaml_is_rules(fleet):
    hosts, mon = configs(fleet), monitor()
    text = mr.rules_yaml(hosts, mon)
    assert text.startswith("# Managed by dbzfs")
    assert yaml.safe_load(text) == mr.rules(hosts, mon)


def test_the_monitoring_page_lists_every_alert_as_the_rules_define_it():
    page = (REPO / "docs" / "monitoring.md").read_text()
    assert mr.alerts_markdown() in page, "docs/monitoring.md's alert table is stale: paste alerts_markdown()"
