"""A Prometheus host (the inventory's `monitoring` group): it runs, listens on its replication
address, loads the alert rules, and sees every exporter of every database host (and the node
exporter of every backup host) up."""

import json
import urllib.parse

from model.hostdata import HostConfig
from roles import monitoring, monitoring_rules
from validation import load_inventory_isolated

from tests.infra.test_monitoring import fetch

only_where = "prometheus_server"  # tests/infra/conftest.py: only hosts whose data sets this


def query(host, cfg, promql):
    url = f"http://{monitoring.listen_address(cfg)}:{cfg.monitoring.prometheus_port}/api/v1/"
    return json.loads(fetch(host, url + "query?query=" + urllib.parse.quote(promql)))["data"]["result"]


def test_prometheus_runs_on_the_replication_address(host, cfg):
    service = host.service(monitoring.PROMETHEUS)
    assert service.is_running and service.is_enabled
    port = cfg.monitoring.prometheus_port
    listening = [line.split()[3] for line in host.check_output("ss -Htln").splitlines()]
    assert [s for s in listening if s.endswith(f":{port}")] == [f"{monitoring.listen_address(cfg)}:{port}"]


def configs(request) -> list[HostConfig]:
    hosts = load_inventory_isolated(request.config.getoption("--inventory"))
    return [HostConfig.from_data(n, d) for n, d in hosts.items()]


def test_every_exporter_of_every_database_host_is_up(host, cfg, request):
    expected = {("prometheus", cfg.name)}
    for c in configs(request):
        expected.add(("node", c.name))
        if not c.is_backup_host:
            expected.add(("mysqld" if c.engine == "mariadb" else "postgres", c.name))
    series = {(r["metric"]["job"], r["metric"]["instance"]): r["value"][1] for r in query(host, cfg, "up")}
    assert set(series) == expected
    assert {target: up for target, up in series.items() if up != "1"} == {}


def test_the_alert_rules_are_loaded(host, cfg, request):
    url = f"http://{monitoring.listen_address(cfg)}:{cfg.monitoring.prometheus_port}/api/v1/rules"
    groups = json.loads(fetch(host, url))["data"]["groups"]
    loaded = {rule["name"] for group in groups for rule in group["rules"] if rule["type"] == "alerting"}
    expected = set(monitoring_rules.alert_names())
    if not any(c.is_backup_host for c in configs(request)):
        expected -= set(monitoring_rules.BACKUP_ALERTS)  # written only for an inventory with one
    assert expected <= loaded
