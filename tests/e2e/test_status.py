"""`./dbzfs status` (day2/status.py, `python -m day2.status`) on the converged lab: one read of every
VM says what runs (db1 and pg1 primaries, db2 and pg2 replicating from them with a small lag, every
pool ONLINE and under its threshold, the replicas' snapshots fresh) and exits 0; with db2's
replication stopped it says so, in its tables, and exits 1. Read-only: nothing on a VM changes."""

import json
import time

import pytest

from lab import control

pytestmark = pytest.mark.e2e

GROUPS = {
    "mariadb": ("db1", "db2", "datastore/mysql"),
    "postgresql": ("pg1", "pg2", "datastore/postgresql"),
}
SMALL_LAG = 30  # seconds: an idle group under TCG is caught up


def status(lab, *args):
    argv = [str(control.PYTHON), "-m", "day2.status", str(lab.inventory), *args]
    return lab._local(argv, timeout=300)


def test_the_converged_lab(converged, timings):
    t0 = time.monotonic()
    result = status(converged, "--json")
    timings["status --json"] = time.monotonic() - t0
    shown = result.stdout[-6000:] + result.stderr[-3000:]
    assert result.rc == 0, shown
    report = json.loads(result.stdout)
    assert report["healthy"] and report["problems"] == [], shown
    assert list(report["groups"]) == list(GROUPS) and report["backup_hosts"] == {}
    for engine, (primary, replica, data) in GROUPS.items():
        group = report["groups"][engine]
        assert group["engine"] == engine and group["problems"] == [] and group["pgbackrest"] is None
        hosts = group["hosts"]
        assert list(hosts) == [primary, replica]
        for row in hosts.values():
            assert row["reachable"] and row["error"] is None and row["server_answers"], row
            assert row["pool"]["name"] == "dbpool" and row["pool"]["health"] == "ONLINE", row
            assert row["pool"]["capacity_percent"] < row["pool"]["threshold_percent"] == 80, row
            assert row["pool"]["over_threshold"] is False and row["problems"] == [], row
            assert row["newest_backup"] is None, row  # inventories/lab.py has no backup host
        p, r = hosts[primary], hosts[replica]
        assert (p["role"], p["inventory_role"], p["replication"]) == ("primary", "primary", None), p
        assert (r["role"], r["inventory_role"]) == ("replica", "replica"), r
        replication = r["replication"]
        assert replication["source"] == primary and replication["running"] is True, r
        assert replication["lag_seconds"] is not None and replication["lag_seconds"] < SMALL_LAG, r
        if engine == "mariadb":
            assert (replication["io_running"], replication["sql_running"]) == ("Yes", "Yes"), r
        else:
            assert replication["state"] == "streaming" and replication["unreplayed_bytes"] is not None, r
        # snapshot_on = "replica": the replica takes them (its first at the converge), the primary none
        assert (p["takes_snapshots"], r["takes_snapshots"]) == (False, True)
        assert r["newest_snapshot"]["name"].startswith(f"dbpool/{data}@autosnap_"), r
        assert r["newest_snapshot"]["age_seconds"] < 26 * 3600, r


def replica_running(lab):
    out = lab.check("db2", "mariadb -E -e 'SHOW SLAVE STATUS'")
    return "Slave_IO_Running: Yes" in out and "Slave_SQL_Running: Yes" in out


def test_a_stopped_replica_is_shown_and_exits_1(converged, timings):
    converged.check("db2", "mariadb -e 'STOP SLAVE'")
    try:
        t0 = time.monotonic()
        result = status(converged)
        timings["status, db2 stopped"] = time.monotonic() - t0
    finally:
        converged.check("db2", "mariadb -e 'START SLAVE'")
    shown = result.stdout[-6000:] + result.stderr[-3000:]
    assert result.rc == 1, shown
    lines = result.stdout.splitlines()
    [db2] = [line for line in lines if line.startswith("  db2 ")]
    assert db2.split()[:2] == ["db2", "replica"] and "from db1: STOPPED (IO No, SQL No)" in db2, shown
    [pg2] = [line for line in lines if line.startswith("  pg2 ")]
    assert "from pg1: streaming" in pg2, shown
    assert lines[-2:] == [
        "1 problem(s):",
        "  - db2: replication from db1 stopped (IO thread No, SQL thread No)",
    ], shown
    deadline = time.monotonic() + 120
    while not replica_running(converged):
        assert time.monotonic() < deadline, "db2 does not replicate again after START SLAVE"
        time.sleep(2)
