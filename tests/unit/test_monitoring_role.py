"""The monitoring role's files, rendered offline: exporters listen on the replication address only,
their command lines are ours (no /etc/default), no password is anywhere, Prometheus scrapes every
database host with the labels the rules select on, and its config passes the real promtool."""

import subprocess

import pytest
import yaml

from roles import monitoring, monitoring_rules
from roles.hostdata import HostConfig
from roles.validation import load_inventory

from tests.unit.conftest import REPO

PROMTOOL = REPO / ".venv" / "bin" / "promtool"


def configs(fleet):
    return {name: HostConfig.from_data(name, data) for name, data in fleet.items()}


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
    assert 'Environment="DATA_SOURCE_NAME=prometheus@unix(/run/mysqld/mysqld.sock)/"' in mysqld
    assert "After=network-online.target mariadb.service" in mysqld
    assert monitoring.drop_in_path("prometheus") not in files


def test_postgres_exporter_uses_peer_authentication(fleet):
    files = monitoring.units_text(configs(fleet)["pg2"])
    text = files[monitoring.drop_in_path("prometheus-postgres-exporter")]
    assert (
        'Environment="DATA_SOURCE_NAME=user=prometheus host=/run/postgresql dbname=postgres sslmode=disable"'
        in (text)
    )
    assert "postgresql@15-main.service" in text
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


def test_prometheus_server_drop_in_uses_our_config_and_address(fleet):
    fleet["db2"]["prometheus_server"] = True
    files = monitoring.units_text(configs(fleet)["db2"])
    text = files[monitoring.drop_in_path("prometheus")]
    assert f"--config.file={monitoring.PROMETHEUS_CONFIG}" in text
    assert "--web.listen-address=10.99.0.12:9090" in text
    assert "--storage.tsdb.retention.time=15d" in text


def test_promtool_accepts_the_config_and_its_rules(fleet, tmp_path):
    assert PROMTOOL.exists(), f"{PROMTOOL} is missing: run scripts/bootstrap"
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
