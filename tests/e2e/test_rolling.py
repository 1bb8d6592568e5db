"""The rolling converge (`./dbzfs roll`, day2/rolling_run.py) on the converged lab: deploy.py one
host at a time, each group's replicas before its primary, health gates between hosts.

The change (tests/e2e/inventories/rolled.py): PostgreSQL's compression lz4 -> zstd (Heap's
migration: analytics events from bench/datagen.py are rewritten on each node, pg2 then pg1, while
a client writes) and the slow query log (a reload); also MariaDB's redo log buffer, read only at
start, so each server restarts and its replica must reconnect before the roll goes on.

A replica stopped on purpose (pg2) stops a roll of its primary at the primary's replication gate,
before its switchover, pg1 as it was; `--dry` shows the order, each host's changes, the datasets
it would rewrite and the primaries' switchover pre-checks, and changes nothing; the roll converges
host by host with every gate passing, each primary switched over to its replica, converged (and
rewritten) as its replica and switched back; every acknowledged row and every event is on both
nodes after, and the report shows compressratio before and after; a second roll changes nothing
and switches nothing over.

Outside CI's budget (marked long since the lab moved to Debian 13; `./dbzfs test-long`): all four
hosts roll (200,000 events), then pg2's rewrite back to lz4 is cut at a random moment and a roll
back to inventories/lab.py finishes it (the events whole on both nodes, nothing of the rewrite
left).
"""

import json
import random
import subprocess
import time

import pytest

from day2 import rolling
from lab import control, vm as vmmod
from lab.definition import REPO, STATE

from tests import labkit
from tests.e2e.test_switchover import (
    PG_INTACT,
    PG_STOP_WRITER,
    PG_WRITER,
    app_pgpass,
    pg_acked,
    pg_streams,
    pg_wait_for_writes,
    psql,
    sql,
)

pytestmark = [pytest.mark.e2e, pytest.mark.long]  # ./dbzfs test-long

ROLLED = str(REPO / "tests" / "e2e" / "inventories" / "rolled.py")
LAB = str(control.INVENTORY)
ORDER = ["db2", "db1", "pg2", "pg1"]
REWRITE = "runbooks/rewrite_compression.py"
DATASETS = ["dbpool/datastore/postgresql", "dbpool/datastore/postgresql-wal"]
EVENTS = labkit.env_number("DBZFS_ROLL_EVENTS", 200_000, minimum=1)
EVENTS_SUM = (
    "SELECT count(*) || ' ' || md5(string_agg(e::text, ',' ORDER BY user_id, event_id)) FROM events e"
)


def roll(lab, inventory, *args, timeout=3600):
    report = STATE / "roll-report.json"
    report.unlink(missing_ok=True)
    argv = [str(control.PYTHON), "-m", "day2.rolling_run", inventory, "--report", str(report), *args]
    result = lab._local(argv, timeout)
    print(result.stdout[-8000:])
    assert report.exists(), result.stdout[-6000:] + result.stderr[-3000:]
    return result, json.loads(report.read_text())


def compression(lab, name):
    return lab.check(name, "zfs get -H -o value compression dbpool/datastore").strip()


def load_events(lab):
    """bench/datagen.py's analytics events into pg1's application database, flushed."""
    psql(lab, "pg1", "DROP TABLE IF EXISTS events")  # left by a run cut short on a reused lab
    t0 = time.monotonic()
    generate = subprocess.Popen(
        [str(control.PYTHON), "-m", "bench.datagen", "--model", "events", "--engine", "postgresql"]
        + ["--rows", str(EVENTS)],
        cwd=REPO,
        stdout=subprocess.PIPE,
    )
    load = "cd / && runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -d app >/dev/null"
    subprocess.run(vmmod.ssh_argv(lab.vms["pg1"], [load]), stdin=generate.stdout, check=True, timeout=1200)
    assert generate.wait() == 0
    psql(lab, "pg1", "ALTER TABLE events OWNER TO app; CHECKPOINT")
    return time.monotonic() - t0


def test_a_stopped_replica_stops_the_roll_of_its_primary(converged, timings):
    timings[f"{EVENTS:,} events loaded on pg1"] = load_events(converged)
    converged.check("pg2", f"systemctl stop {labkit.lab_postgresql().unit}", timeout=600)
    try:
        result, report = roll(converged, ROLLED, "--limit", "pg1", "--gate-timeout", "20")
    finally:
        converged.check("pg2", f"systemctl start {labkit.lab_postgresql().unit}", timeout=600)
    assert result.rc == 1, result.stdout[-6000:]
    [pg1] = report["hosts"]
    # Checked before pg1 is switched over to pg2: nothing changed on pg1.
    assert pg1["host"] == "pg1" and pg1["switchover"]["replication"]["passed"] is False, pg1
    assert "pg2" in pg1["switchover"]["replication"]["detail"] and "s" not in pg1["switchover"], pg1
    assert "roll STOPPED at pg1: gate replication" in result.stdout, result.stdout[-3000:]
    assert compression(converged, "pg1") == "lz4"
    assert psql(converged, "pg1", "SHOW log_min_duration_statement") != "250ms"
    ok, row = pg_streams(converged, "pg2", "pg1", timeout=120)
    assert ok, f"pg2 does not stream from pg1 again: {row}"


def test_dry_shows_the_order_and_changes_nothing(converged, timings):
    t0 = time.monotonic()
    result, report = roll(converged, ROLLED, "--dry")
    timings[f"roll --dry ({len(ORDER)} hosts)"] = time.monotonic() - t0
    assert result.rc == 0, result.stdout[-6000:]
    assert [h["host"] for h in report["hosts"]] == ORDER
    assert all(h["changed"] and h["changed"] > 0 for h in report["hosts"]), report
    assert all(not h["gates"] for h in report["hosts"])
    # The primaries roll through a switchover; --dry ran its runbook's pre-checks.
    targets = {"db2": None, "db1": "db2", "pg2": None, "pg1": "pg2"}
    assert {h["host"]: h.get("switchover", {}).get("to") for h in report["hosts"]} == {
        name: targets[name] for name in ORDER
    }
    rewrites = {h["host"]: h["rewrite"]["datasets"] for h in report["hosts"]}
    assert rewrites == {name: DATASETS if name.startswith("pg") else [] for name in ORDER}, rewrites
    assert compression(converged, "pg1") == "lz4"
    assert sql(converged, "db1", "SELECT @@innodb_log_buffer_size") != str(48 * 1024 * 1024)


def test_roll_converges_host_by_host_through_the_gates(converged, timings):
    lab = converged
    app_pgpass(lab, "pg1")
    psql(
        lab,
        "pg1",
        "CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY, payload text NOT NULL); "
        "ALTER TABLE t OWNER TO app",
    )
    psql(lab, "pg1", "TRUNCATE t")
    lab.check("pg1", PG_WRITER)
    pg_wait_for_writes(lab, 5)
    t0 = time.monotonic()
    try:
        result, report = roll(converged, ROLLED)
    finally:
        lab.check("pg1", PG_STOP_WRITER)
    what = "a rewrite each for PostgreSQL, a restart each for MariaDB"
    timings[f"roll ({len(ORDER)} hosts: {what})"] = time.monotonic() - t0
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
        if h["role"] == "primary":  # converged as its replica's replica, then switched back
            there, back = h["switchover"], h["switch_back"]
            assert there["to"] == {"db1": "db2", "pg1": "pg2"}[h["host"]] and there["replication"]["passed"]
            assert there["refused_s"] is not None and back["refused_s"] is not None, h
            assert back["server"]["passed"] and back["replication"]["passed"], h
            timings[f"roll: {h['host']} switchover, writes refused (runbook)"] = there["refused_s"]
            timings[f"roll: {h['host']} switch back, writes refused (runbook)"] = back["refused_s"]
    for name in ("db1", "db2"):
        assert sql(converged, name, "SELECT @@innodb_log_buffer_size") == str(48 * 1024 * 1024)
    for name in ("pg1", "pg2"):
        assert compression(converged, name) == "zstd"
        assert psql(converged, name, "SHOW log_min_duration_statement") == "250ms"
        rewrite = next(h for h in report["hosts"] if h["host"] == name)["rewrite"]
        for figures in rewrite["datasets"].values():
            assert (figures["before"]["compression"], figures["after"]["compression"]) == ("lz4", "zstd"), (
                rewrite
            )
        assert rewrite["after"]["compressratio"] > rewrite["before"]["compressratio"], rewrite
        timings[f"rewrite lz4 -> zstd: {name}"] = rewrite["s"]
        # Rewritten as a standby (pg1 too, switched over): its primary reported the lag throughout.
        lag = rewrite["lag"]
        assert lag["unit"] == "bytes" and lag["samples"] >= 2 and lag["max"] is not None, lag
        timings[f"rewrite: {name}'s lag at most (MiB of WAL)"] = lag["max"] / 1024**2
    for h in report["hosts"]:
        if "before" in h.get("rewrite", {}):
            labkit.log(f"==> lz4 -> zstd, {h['host']}: {rolling.rewrite_line(h['rewrite'])}")
    labkit.log(f"==> lz4 -> zstd, fleet: {rolling.rewrite_line(report['rewrite'])}")
    assert report["rewrite"]["after"]["used"] < report["rewrite"]["before"]["used"], report["rewrite"]

    # Every acknowledged write and every event on both nodes once pg2 replayed pg1's WAL.
    acked = [r[1] for r in pg_acked(lab)]
    stamps = [float(r[-1]) for r in pg_acked(lab)]
    gap = max(b - a for a, b in zip(stamps, stamps[1:], strict=False))
    timings["roll: longest gap between acknowledged writes (client; pg1 rewritten as pg2's standby)"] = gap
    position = psql(lab, "pg1", "SELECT pg_current_wal_lsn()", "postgres")
    deadline = time.monotonic() + 120
    while psql(lab, "pg2", f"SELECT pg_last_wal_replay_lsn() >= '{position}'", "postgres") != "t":
        assert time.monotonic() < deadline, f"pg2 did not replay pg1's WAL up to {position} in 120 s"
        time.sleep(2)
    events = {name: psql(lab, name, EVENTS_SUM) for name in ("pg1", "pg2")}
    assert events["pg1"] == events["pg2"] and events["pg1"].startswith(f"{EVENTS} "), events
    for name in ("pg1", "pg2"):
        present = set(psql(lab, name, PG_INTACT).split())
        missing = [i for i in acked if i not in present]
        assert not missing, f"{name} lost acknowledged writes: {missing[:20]}"
    psql(lab, "pg1", "DROP TABLE t")


def test_a_second_roll_changes_nothing(converged):
    result, report = roll(converged, ROLLED)
    assert result.rc == 0, result.stdout[-6000:]
    assert [h["changed"] for h in report["hosts"]] == [0] * len(ORDER), report
    assert all("s" not in h.get("switchover", {}) for h in report["hosts"]), report  # no switchover
    assert "rewrite" not in report and "rewrite (" not in result.stdout, result.stdout[-3000:]


def test_rolled_back_to_the_lab_inventory(converged, timings):
    # pg2's rewrite back to lz4 cut at a random moment (pyinfra SIGKILLed): the roll finishes it.
    converged.pyinfra("--limit", "pg2").check()  # lz4 for new blocks: the rewrite's pre-check
    at = round(random.uniform(3.0, 40.0), 1)
    cut = converged.pyinfra_killed(after=at, deploy=REWRITE, args=("--limit", "pg2", "--data", "host=pg2"))
    labkit.log(f"==> pg2's rewrite to lz4 killed {at} s into its operations, during: {cut.operation}")
    converged.wait_for_leftovers()
    t0 = time.monotonic()
    result, report = roll(converged, LAB)
    timings["roll back (4 hosts)"] = time.monotonic() - t0
    assert result.rc == 0, result.stdout[-6000:]
    assert report["stopped"] is None
    assert compression(converged, "pg1") == "lz4"
    assert sql(converged, "db1", "SELECT @@innodb_log_buffer_size") != str(48 * 1024 * 1024)
    # Back to lz4: the events rewritten once more, on both nodes.
    blocks = "zfs get -H -o value dbzfs:blocks-compression dbpool/datastore/postgresql"
    assert [converged.check(n, blocks).strip() for n in ("pg1", "pg2")] == ["lz4", "lz4"]
    events = {name: psql(converged, name, EVENTS_SUM) for name in ("pg1", "pg2")}
    assert events["pg1"] == events["pg2"] and events["pg1"].startswith(f"{EVENTS} "), events
    for name in ("pg1", "pg2"):
        # Nothing of the rewrite's left; the snapshots role's own (autosnap_) stay: a host that was
        # a replica while it was rewritten took its first ones of the new datasets then.
        found = converged.check(name, "zfs list -H -o name -t all -r dbpool/datastore").split()
        left = [n for n in found if "@autosnap_" not in n]
        assert left == ["dbpool/datastore", *DATASETS], (name, left)
    psql(converged, "pg1", "DROP TABLE events")
