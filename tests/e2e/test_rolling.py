"""The rolling converge (`./dbzfs roll`, roles/rolling_run.py) on the converged lab: deploy.py one
host at a time, each group's replicas before its primary, health gates between hosts.

One change per engine (tests/e2e/inventories/rolled.py): MariaDB's redo log buffer, read only at
start, so each server restarts and its replica must reconnect before the roll goes on; PostgreSQL's
compression lz4 -> zstd and the slow query log (a reload). `--dry` shows the order and each
host's changes and changes nothing; the roll converges host by host with every gate passing; a
second roll changes nothing; a gate that fails (db2's replication stopped on purpose, the roll
limited to db1) stops the roll at that host and leaves the others as they are; rolled back to
inventories/lab.py, which test_idempotence then finds converged.

`./dbzfs test-long` only: four rolls of four hosts (a converge and the gates per host) cost more
than CI's budget holds.
"""

import json
import time

import pytest

from lab import control
from lab.definition import REPO, STATE

from tests.e2e.test_switchover import psql, sql

pytestmark = [pytest.mark.e2e, pytest.mark.long]

ROLLED = str(REPO / "tests" / "e2e" / "inventories" / "rolled.py")
LAB = str(control.INVENTORY)
ORDER = ["db2", "db1", "pg2", "pg1"]


def roll(lab, inventory, *args, timeout=3600):
    report = STATE / "roll-report.json"
    report.unlink(missing_ok=True)
    argv = [str(control.PYTHON), "-m", "roles.rolling_run", inventory, "--report", str(report), *args]
    result = lab._local(argv, timeout)
    print(result.stdout[-8000:])
    assert report.exists(), result.stdout[-6000:] + result.stderr[-3000:]
    return result, json.loads(report.read_text())


def compression(lab, name):
    return lab.check(name, "zfs get -H -o value compression dbpool/datastore").strip()


def test_dry_shows_the_order_and_changes_nothing(converged, timings):
    t0 = time.monotonic()
    result, report = roll(converged, ROLLED, "--dry")
    timings["roll --dry (4 hosts)"] = time.monotonic() - t0
    assert result.rc == 0, result.stdout[-6000:]
    assert [h["host"] for h in report["hosts"]] == ORDER
    assert all(h["changed"] and h["changed"] > 0 for h in report["hosts"]), report
    assert all(not h["gates"] for h in report["hosts"])
    assert compression(converged, "pg1") == "lz4"
    assert sql(converged, "db1", "SELECT @@innodb_log_buffer_size") != str(48 * 1024 * 1024)


def test_roll_converges_host_by_host_through_the_gates(converged, timings):
    t0 = time.monotonic()
    result, report = roll(converged, ROLLED)
    timings["roll (4 hosts, a restart each for MariaDB)"] = time.monotonic() - t0
    assert result.rc == 0, result.stdout[-6000:]
    assert [h["host"] for h in report["hosts"]] == ORDER and report["stopped"] is None
    for h in report["hosts"]:
        assert h["changed"] > 0, h
        assert [g for g, v in h["gates"].items() if v["passed"]] == [
            "server",
            "replication",
            "pool",
            "checks",
        ], h
        timings[f"roll: {h['host']} converge"] = h["converge_s"]
        timings[f"roll: {h['host']} gates"] = sum(v["s"] for v in h["gates"].values())
    for name in ("db1", "db2"):
        assert sql(converged, name, "SELECT @@innodb_log_buffer_size") == str(48 * 1024 * 1024)
    for name in ("pg1", "pg2"):
        assert compression(converged, name) == "zstd"
        assert psql(converged, name, "SHOW log_min_duration_statement") == "250ms"


def test_a_second_roll_changes_nothing(converged):
    result, report = roll(converged, ROLLED)
    assert result.rc == 0, result.stdout[-6000:]
    assert [h["changed"] for h in report["hosts"]] == [0, 0, 0, 0], report


def test_a_failing_gate_stops_the_roll_at_that_host(converged):
    converged.check("db2", "mariadb -e 'STOP SLAVE'")
    try:
        result, report = roll(converged, LAB, "--hosts", "db1,pg2,pg1", "--gate-timeout", "20")
    finally:
        converged.check("db2", "mariadb -e 'START SLAVE'")
    assert result.rc == 1, result.stdout[-6000:]
    [db1] = report["hosts"]
    assert db1["host"] == "db1" and db1["gates"]["replication"]["passed"] is False
    assert "db2" in db1["gates"]["replication"]["detail"]
    assert report["untouched"] == ["pg2", "pg1"]
    assert "roll STOPPED at db1: gate replication" in result.stdout
    assert compression(converged, "pg2") == "zstd"  # left as it was


def test_rolled_back_to_the_lab_inventory(converged, timings):
    t0 = time.monotonic()
    result, report = roll(converged, LAB)
    timings["roll back (4 hosts)"] = time.monotonic() - t0
    assert result.rc == 0, result.stdout[-6000:]
    assert report["stopped"] is None
    assert compression(converged, "pg1") == "lz4"
    assert sql(converged, "db1", "SELECT @@innodb_log_buffer_size") != str(48 * 1024 * 1024)
