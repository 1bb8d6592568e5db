"""The monitoring role's files, rendered offline: exporters listen on the replication address only,
their command lines are ours (no /etc/default), no password is anywhere, a backup host gets
node_exporter and the ZFS collector only, Prometheus scrapes every database and backup host with
the labels the rules select on, and its config passes the real promtool."""

import subprocess

import pytest
import yaml

from model.hostdata import HostConfig
from roles import monitoring, monitoring_rules
from validation import load_inventory

from tests.unit.conftest import REPO, backup_data, host_data

PROMTOOL = REPO / ".venv" / "bin" / "promtool"


def configs(fleet):
    return {name: HostConfig.from_data(name, data) for name, data in fleet.items()}


@pytest.fixture
def with_backup(fleet):
    """The unit fleet and a backup host, last in the inventory's order."""
    return {**fleet, "backup1": backup_data()}


def test_exporters_listen_on_the_replication_address(fleet):
    cfg = configs(fleet)["db1"]
    files = monitoring.units_text(cfg)
    node = files[monitoring.drop_in_path("prometheus-node-exporter")]
    mysqld = files[monitoring.drop_in_path("prometheus-mysqld-exporter")]
    assert "--web.listen-address=10.99.0.11:9100" in node
    assert "--collector.textfile.directory=/var/lib/prometheus/node-exporter" in node
    assert "--web.listen-address=10.99.0.11:9104" in mysqld
    for text in (node, mysqld):
        # the package's /etc/default file is not read: the command line is ours alone
        assert "\nEnvironmentFile=\n" in text and "\nExecStart=\nExecStart=/usr/bin/" in text
    # Debian 13's mysqld_exporter 0.17 reads a my.cnf only (DATA_SOURCE_NAME is gone since 0.15)
    assert "DATA_SOURCE_NAME" not in mysqld
    assert f"--config.my-cnf={monitoring.MYSQLD_EXPORTER_CNF}" in mysqld
    assert (
        "[client]\nuser = prometheus\nsocket = /run/mysqld/mysqld.sock\n"
        in files[monitoring.MYSQLD_EXPORTER_CNF]
    )
    assert "After=network-online.target mariadb.service" in mysqld
    assert monitoring.drop_in_path("prometheus") not in files


def test_debian_12s_mysqld_exporter_takes_its_dsn_from_the_environment(fleet):
    fleet["db1"]["debian_release"] = "12"  # mysqld_exporter 0.14: its my.cnf needs a password
    files = monitoring.units_text(configs(fleet)["db1"])
    mysqld = files[monitoring.drop_in_path("prometheus-mysqld-exporter")]
    assert 'Environment="DATA_SOURCE_NAME=prometheus@unix(/run/mysqld/mysqld.sock)/"' in mysqld
    assert "--config.my-cnf" not in mysqld and monitoring.MYSQLD_EXPORTER_CNF not in files


def test_postgres_exporter_uses_peer_authentication(fleet):
    files = monitoring.units_text(configs(fleet)["pg2"])
    text = files[monitoring.drop_in_path("prometheus-postgres-exporter")]
    assert (
        'Environment="DATA_SOURCE_NAME=user=prometheus host=/run/postgresql dbname=postgres sslmode=disable"'
        in (text)
    )
    assert "postgresql@17-main.service" in text
    assert "password=" not in text.lower()


def test_disabled_collectors_are_turned_off_on_the_command_line(fleet):
    node = monitoring.drop_in_path("prometheus-node-exporter")
    assert "--no-collector." not in monitoring.units_text(configs(fleet)["db1"])[node]
    fleet["db1"]["node_exporter_disabled_collectors"] = ["systemd", "hwmon"]
    text = monitoring.units_text(configs(fleet)["db1"])[node]
    exec_start = [line for line in text.splitlines() if line.startswith("ExecStart=/")][0]
    assert exec_start.endswith(" --no-collector.systemd --no-collector.hwmon"), exec_start


def test_without_a_replication_address_exporters_stay_on_loopback(fleet):
    fleet["db1"]["replication_address"] = None
    files = monitoring.units_text(configs(fleet)["db1"])
    assert "--web.listen-address=127.0.0.1:9100" in files[monitoring.drop_in_path("prometheus-node-exporter")]


def test_the_collector_timer_follows_the_data(fleet):
    fleet["db1"]["zfs_metrics_interval"] = 17
    files = monitoring.units_text(configs(fleet)["db1"])
    timer = files["/etc/systemd/system/dbzfs-zfs-metrics.timer"]
    assert "OnUnitActiveSec=17s" in timer
    service = files["/etc/systemd/system/dbzfs-zfs-metrics.service"]
    assert f"ExecStart=/usr/bin/python3 {monitoring.COLLECTOR} --output " in service


def test_packages_are_the_exporters_and_prometheus_only_where_it_runs(fleet):
    fleet["pg1"]["prometheus_server"] = True
    c = configs(fleet)
    assert monitoring.packages(c["db1"]) == ["prometheus-node-exporter", "prometheus-mysqld-exporter"]
    assert monitoring.packages(c["pg1"]) == [
        "prometheus-node-exporter",
        "prometheus-postgres-exporter",
        "prometheus",
    ]


def test_prometheus_scrapes_every_database_host(fleet):
    c = configs(fleet)
    server = c["db2"]
    config = yaml.safe_load(monitoring.prometheus_config(server, list(c.values())))
    assert config["global"]["scrape_interval"] == "15s"
    assert config["rule_files"] == [monitoring.PROMETHEUS_RULES]
    targets = {
        job["job_name"]: {t["labels"]["instance"]: t["targets"] for t in job["static_configs"]}
        for job in config["scrape_configs"]
    }
    assert targets == {
        "prometheus": {"db2": ["10.99.0.12:9090"]},
        "node": {
            "db1": ["10.99.0.11:9100"],
            "db2": ["10.99.0.12:9100"],
            "pg1": ["10.99.0.21:9100"],
            "pg2": ["10.99.0.22:9100"],
        },
        "mysqld": {"db1": ["10.99.0.11:9104"], "db2": ["10.99.0.12:9104"]},
        "postgres": {"pg1": ["10.99.0.21:9187"], "pg2": ["10.99.0.22:9187"]},
    }
    node = next(job for job in config["scrape_configs"] if job["job_name"] == "node")
    assert node["static_configs"][2]["labels"] == {
        "instance": "pg1",
        "engine": "postgresql",
        "cluster": "postgresql",
    }


def test_a_backup_host_gets_node_exporter_and_the_zfs_collector_only(with_backup, fleet):
    cfg = configs(with_backup)["backup1"]
    assert cfg.is_backup_host and cfg.engine is None
    assert monitoring.packages(cfg) == ["prometheus-node-exporter"]
    files = monitoring.units_text(cfg)
    assert sorted(files) == sorted(
        [
            monitoring.drop_in_path("prometheus-node-exporter"),
            "/etc/systemd/system/dbzfs-zfs-metrics.service",
            "/etc/systemd/system/dbzfs-zfs-metrics.timer",
        ]
    )
    # the same drop-in as a database host's, on its own replication address
    node = files[monitoring.drop_in_path("prometheus-node-exporter")]
    assert "--web.listen-address=10.99.0.51:9100" in node
    assert "--collector.textfile.directory=/var/lib/prometheus/node-exporter" in node
    db1 = monitoring.units_text(configs(fleet)["db1"])
    assert node == db1[monitoring.drop_in_path("prometheus-node-exporter")].replace(
        "10.99.0.11", "10.99.0.51"
    )
    for unit in ("service", "timer"):
        path = f"/etc/systemd/system/dbzfs-zfs-metrics.{unit}"
        assert files[path] == db1[path]
    assert "DATA_SOURCE_NAME" not in "".join(files.values())


def test_the_backup_pull_metrics_are_in_node_exporters_textfile_directory():
    from roles import backup

    assert backup.METRICS == f"{monitoring.TEXTFILE_DIR}/dbzfs_backup.prom"


def test_a_backup_host_may_run_prometheus(with_backup):
    with_backup["backup1"]["prometheus_server"] = True
    cfg = configs(with_backup)["backup1"]
    assert monitoring.packages(cfg) == ["prometheus-node-exporter", "prometheus"]
    assert (
        "--web.listen-address=10.99.0.51:9090"
        in monitoring.units_text(cfg)[monitoring.drop_in_path("prometheus")]
    )


def test_prometheus_scrapes_the_backup_hosts_node_exporter_only(with_backup):
    c = configs(with_backup)
    config = yaml.safe_load(monitoring.prometheus_config(c["db2"], list(c.values())))
    targets = {
        job["job_name"]: {t["labels"]["instance"]: t for t in job["static_configs"]}
        for job in config["scrape_configs"]
    }
    assert list(targets["node"]) == ["db1", "db2", "pg1", "pg2", "backup1"]  # the inventory's order
    assert targets["node"]["backup1"] == {
        "targets": ["10.99.0.51:9100"],
        "labels": {"instance": "backup1", "role": "backup"},
    }
    assert list(targets["mysqld"]) == ["db1", "db2"] and list(targets["postgres"]) == ["pg1", "pg2"]
    assert targets["node"]["db1"]["labels"] == {"instance": "db1", "engine": "mariadb", "cluster": "mariadb"}


def test_hosts_neither_database_nor_backup_are_not_scraped(fleet):
    fleet["odd"] = host_data(role="primary", replication_address="10.99.0.99")
    c = configs(fleet)
    assert not monitoring.is_monitored(c["odd"])
    config = yaml.safe_load(monitoring.prometheus_config(c["db2"], list(c.values())))
    instances = {t["labels"]["instance"] for job in config["scrape_configs"] for t in job["static_configs"]}
    assert "odd" not in instances


class Recorder:
    """Stands in for an operation: records each call's keyword arguments."""

    def __init__(self):
        self.calls = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)


@pytest.fixture
def operations(monkeypatch):
    """The operations the role's deploys call, recorded instead of run."""
    ops = {}
    for module, name in (
        (monitoring.common, "config_files"),
        (monitoring.common, "config_file"),
        (monitoring.units, "current"),
        (monitoring.mariadb_ops, "socket_user"),
        (monitoring.mariadb_ops, "grants"),
        (monitoring.pg_ops, "monitoring_role"),
    ):
        ops[name] = Recorder()
        monkeypatch.setattr(module, name, ops[name])
    return ops


class InventoryHost:
    def __init__(self, name, data):
        self.name, self.data = name, data


def test_the_deploys_on_a_backup_host_have_nothing_of_an_engine(with_backup, operations):
    cfg = configs(with_backup)["backup1"]
    monitoring.before_install._inner(cfg)
    (placed,) = operations["config_files"].calls
    assert set(placed["files"]) == {*monitoring.units_text(cfg), monitoring.COLLECTOR}
    assert placed["modes"] == {monitoring.COLLECTOR: "755"}
    assert operations["config_file"].calls == []  # no Prometheus there
    monitoring.account._inner(cfg)
    assert not any(operations[name].calls for name in ("socket_user", "grants", "monitoring_role"))
    monitoring.running._inner(cfg)
    (current,) = operations["current"].calls
    assert current["units"] == {
        "prometheus-node-exporter.service": [monitoring.drop_in_path("prometheus-node-exporter")],
        "dbzfs-zfs-metrics.timer": ["/etc/systemd/system/dbzfs-zfs-metrics.timer"],
    }
    assert current["loaded"] == ["dbzfs-zfs-metrics.service"]


def test_the_deploys_on_a_database_host_are_unchanged(with_backup, operations):
    cfg = configs(with_backup)["db1"]
    monitoring.account._inner(cfg)
    assert len(operations["socket_user"].calls) == len(operations["grants"].calls) == 1
    monitoring.running._inner(cfg)
    (current,) = operations["current"].calls
    assert list(current["units"]) == [
        "prometheus-node-exporter.service",
        "prometheus-mysqld-exporter.service",
        "dbzfs-zfs-metrics.timer",
    ]


def test_the_prometheus_host_scrapes_and_alerts_on_the_backup_hosts(with_backup, operations, monkeypatch):
    with_backup["db2"]["prometheus_server"] = True
    with_backup["odd"] = host_data(role="primary", replication_address="10.99.0.99")  # neither
    monkeypatch.setattr(monitoring, "inventory", [InventoryHost(n, d) for n, d in with_backup.items()])
    assert [h.name for h in monitoring.monitored_hosts()] == ["db1", "db2", "pg1", "pg2", "backup1"]
    c = configs(with_backup)
    monitoring.before_install._inner(c["db2"])
    rules, config = operations["config_file"].calls
    assert rules["path"] == monitoring.PROMETHEUS_RULES and config["path"] == monitoring.PROMETHEUS_CONFIG
    hosts = [c[n] for n in ("db1", "db2", "pg1", "pg2", "backup1")]
    assert rules["content"] == monitoring_rules.rules_yaml(hosts, c["db2"])
    assert config["content"] == monitoring.prometheus_config(c["db2"], hosts)
    assert "BackupCopyTooOld" in rules["content"] and '"10.99.0.51:9100"' in config["content"]
    monitoring.running._inner(c["db2"])
    (current,) = operations["current"].calls
    assert current["units"]["prometheus.service"] == [
        monitoring.drop_in_path("prometheus"),
        monitoring.PROMETHEUS_CONFIG,
        monitoring.PROMETHEUS_RULES,
    ]


def test_prometheus_server_drop_in_uses_our_config_and_address(fleet):
    fleet["db2"]["prometheus_server"] = True
    files = monitoring.units_text(configs(fleet)["db2"])
    text = files[monitoring.drop_in_path("prometheus")]
    assert f"--config.file={monitoring.PROMETHEUS_CONFIG}" in text
    assert "--web.listen-address=10.99.0.12:9090" in text
    assert "--storage.tsdb.retention.time=15d" in text


@pytest.mark.parametrize("with_a_backup_host", [False, True])
def test_promtool_accepts_the_config_and_its_rules(fleet, tmp_path, with_a_backup_host):
    assert PROMTOOL.exists(), f"{PROMTOOL} is missing: run scripts/bootstrap"
    if with_a_backup_host:
        fleet["backup1"] = backup_data()
    c = configs(fleet)
    hosts = list(c.values())
    rules = tmp_path / "rules.yml"
    rules.write_text(monitoring_rules.rules_yaml(hosts, c["db2"]))
    config = tmp_path / "prometheus.yml"
    config.write_text(
        monitoring.prometheus_config(c["db2"], hosts).replace(monitoring.PROMETHEUS_RULES, str(rules))
    )
    result = subprocess.run([str(PROMTOOL), "check", "config", str(config)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("inventory", ["inventories/lab.py", "inventories/prod.py"])
def test_the_inventories_monitoring_group_runs_prometheus(inventory):
    data = load_inventory(str(REPO / inventory))
    servers = [name for name, d in data.items() if HostConfig.from_data(name, d).prometheus_server]
    assert len(servers) == 1, servers
