"""Monitoring on the converged lab: the testinfra checks of every exporter and of Prometheus (db2,
the lab's `monitoring` group), then faults injected for real and the matching alerts reaching
firing in Prometheus, then clearing after the repair: a drive taken offline on pg1 (the pool
DEGRADED) and db2's replication stopped. The lab's data sets short `for:` durations
(inventories/lab.py), not the rules. Leaves the pool ONLINE and replication running."""

import json
import re
import time
import urllib.parse

import pytest

from roles.monitoring import COLLECTOR_UNIT

from tests.e2e.test_mariadb_role import wait_for

pytestmark = pytest.mark.e2e

PROMETHEUS = "db2"  # lab/lab.yaml: groups: [monitoring]
FIRING_DEADLINE = 180  # seconds from the fault to a firing alert (scrape, rule evaluation, TCG)
CLEAR_DEADLINE = 180


def alerts(lab):
    """Alert name -> {instance: state} as Prometheus reports them now."""
    vm = lab.vms[PROMETHEUS]
    url = f"http://{vm.private_address}:9090/api/v1/alerts"
    script = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=30).read().decode())"
    data = json.loads(lab.check(PROMETHEUS, f"python3 -c {script!r}"))
    found: dict[str, dict[str, str]] = {}
    for alert in data["data"]["alerts"]:
        labels = alert["labels"]
        found.setdefault(labels["alertname"], {})[labels.get("instance", "")] = alert["state"]
    return found


def query(lab, promql):
    vm = lab.vms[PROMETHEUS]
    url = f"http://{vm.private_address}:9090/api/v1/query?query={urllib.parse.quote(promql)}"
    script = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=30).read().decode())"
    return json.loads(lab.check(PROMETHEUS, f"python3 -c {script!r}"))["data"]["result"]


def firing(lab, alert, instance):
    return alerts(lab).get(alert, {}).get(instance) == "firing"


def test_monitoring_checks_pass_on_every_host(converged):
    result = converged.testinfra("tests/infra/test_monitoring.py", "tests/infra/test_prometheus.py")
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout), result.stdout[-3000:]
    assert " failed" not in result.stdout and " skipped" not in result.stdout


def test_the_pools_report_online_and_nothing_fires(converged):
    online = {r["metric"]["instance"]: r["value"][1] for r in query(converged, "dbzfs_zpool_online")}
    assert online == dict.fromkeys(converged.names, "1")
    assert {name: states for name, states in alerts(converged).items() if "firing" in states.values()} == {}


def test_faults_fire_their_alerts_and_clear_after_repair(converged, timings):
    """Two faults at once (they touch different hosts and alerts, and each waits for scrapes and
    the collector's timer): a drive of pg1's pool taken offline, db2's replication stopped."""
    lab = converged
    pool = lab.check("pg1", "zpool list -H -o name").strip()
    drive = lab.vms["pg1"].drive_ids[0].rsplit("/", 1)[-1]
    faults = {  # alert, instance: the fault, the repair
        # The ZFS collector is run at once rather than on its timer's next tick (up to 60 s in the
        # lab): what is tested is the metric, the scrape and the rule (the timer: testinfra).
        ("ZpoolNotOnline", "pg1"): (
            f"zpool offline {pool} {drive} && systemctl start {COLLECTOR_UNIT}.service",
            f"zpool online {pool} {drive} && zpool wait -t resilver {pool} && "
            f"systemctl start {COLLECTOR_UNIT}.service",
        ),
        ("MariaDBReplicationStopped", "db2"): ("mariadb -e 'STOP SLAVE'", "mariadb -e 'START SLAVE'"),
    }
    t0 = time.monotonic()
    for (_, name), (fault, _) in faults.items():
        lab.check(name, fault)
    fired = {}
    try:
        deadline = t0 + FIRING_DEADLINE
        while len(fired) < len(faults) and time.monotonic() < deadline:
            now = alerts(lab)
            for alert, name in faults:
                if (alert, name) not in fired and now.get(alert, {}).get(name) == "firing":
                    fired[(alert, name)] = time.monotonic() - t0
            time.sleep(2)
    finally:
        for (_, name), (_, repair) in faults.items():
            lab.check(name, repair)
    for (alert, name), (fault, _) in faults.items():
        assert (alert, name) in fired, f"{alert} not firing for {name} {FIRING_DEADLINE} s after `{fault}`"
        timings[f"{name}: `{fault.split(' && ')[0]}` -> {alert} firing"] = fired[(alert, name)]
    cleared = wait_for(lambda: not {a for a, _ in faults} & set(alerts(lab)), CLEAR_DEADLINE, interval=2)
    assert cleared is not None, f"still active after the repairs: {set(alerts(lab))}"
    assert lab.check("pg1", f"zpool list -H -o health {pool}").strip() == "ONLINE"
