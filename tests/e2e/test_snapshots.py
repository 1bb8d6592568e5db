"""Snapshots on the lab after the converge (roles/snapshots.py): the replicas db2 and pg2 take
them, the primaries' jobs take none (and say so to the alerts), and tests/infra/test_snapshots.py
passes on every VM (every kind kept recent where they are taken, one atomic snapshot of the data
and log datasets with the position on it). Then, while each primary commits rows, its replica
takes one more snapshot of a kind the retention does not keep (`frequently`): it holds the
position, replication goes on, and sanoid prunes that snapshot by its kind and keeps the rest."""

import re
import threading
import time

import pytest

pytestmark = pytest.mark.e2e

SCRIPT = "/usr/local/lib/dbzfs/db_snapshot.py"
ROWS = 300
PRUNE = "sanoid --force-update && sanoid --prune-snapshots --verbose"  # its cache: 15 minutes
ENGINES = {
    "mariadb": {
        "primary": "db1",
        "replica": "db2",
        "datasets": ["dbpool/datastore/mysql", "dbpool/datastore/mysql-log"],
        "property": "dbzfs:gtid",
        "setup": "mariadb -e 'DROP DATABASE IF EXISTS snaptest; CREATE DATABASE snaptest;"
        " CREATE TABLE snaptest.t (id INT PRIMARY KEY)'",
        # One session, a commit every ~50 ms: the stream outlasts the snapshot taken into it.
        "writes": f"seq {ROWS} | sed 's/.*/INSERT INTO snaptest.t VALUES (&); DO SLEEP(0.05);/' | mariadb",
        "count": "mariadb -NB -e 'SELECT count(*) FROM snaptest.t'",
        "cleanup": "mariadb -e 'DROP DATABASE IF EXISTS snaptest'",
    },
    "postgresql": {
        "primary": "pg1",
        "replica": "pg2",
        "datasets": ["dbpool/datastore/postgresql", "dbpool/datastore/postgresql-wal"],
        "property": "dbzfs:lsn",
        "setup": "cd / && runuser -u postgres -- psql -Xq -c 'DROP TABLE IF EXISTS snaptest'"
        " -c 'CREATE TABLE snaptest (id int PRIMARY KEY)'",
        "writes": f"cd / && seq {ROWS} | sed 's/.*/INSERT INTO snaptest VALUES (&); SELECT pg_sleep(0.05);/'"
        " | runuser -u postgres -- psql -Xq -v ON_ERROR_STOP=1 >/dev/null",
        "count": "cd / && runuser -u postgres -- psql -XAtc 'SELECT count(*) FROM snaptest'",
        "cleanup": "cd / && runuser -u postgres -- psql -Xqc 'DROP TABLE IF EXISTS snaptest'",
    },
}


def test_testinfra_checks_pass(converged):
    result = converged.testinfra("tests/infra/test_snapshots.py")
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and " failed" not in result.stdout


def test_a_primary_runs_the_job_and_takes_none(converged):
    """The same unit everywhere; the server's live role decides (--when replica), and the job
    tells the alerts so."""
    count = "zfs list -H -t snapshot -o name -r dbpool | grep -c @autosnap_ || true"
    for primary, replica in (("db1", "db2"), ("pg1", "pg2")):
        before = converged.check(primary, count)  # none on a fresh lab; a switchover leaves some
        for name in (primary, replica):
            converged.check(name, "systemctl start dbzfs-snapshot.service")
        out = converged.check(primary, "journalctl -o cat -n 5 -u dbzfs-snapshot")
        assert "none taken here: the server is a primary (--when replica)" in out, out
        metrics = {
            name: converged.check(name, "grep -v '^#' /var/lib/prometheus/node-exporter/dbzfs_snapshots.prom")
            for name in (primary, replica)
        }
        assert metrics[primary].split("\n")[0] == "dbzfs_snapshots_taken_here 0", metrics
        assert metrics[replica].split("\n")[0] == "dbzfs_snapshots_taken_here 1", metrics
        assert (
            "dbzfs_snapshots_success 1" in metrics[primary]
            and "dbzfs_snapshots_success 1" in metrics[replica]
        )
        assert converged.check(primary, count) == before


def autosnaps(lab, name, dataset, kind):
    out = lab.check(name, f"zfs list -H -t snapshot -o name -d 1 {dataset}")
    return [line for line in out.splitlines() if line.endswith(f"_{kind}") and "@autosnap_" in line]


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_snapshot_under_writes_then_pruned_by_its_kind(converged, timings, engine):
    e = ENGINES[engine]
    primary, replica = e["primary"], e["replica"]
    data, log = e["datasets"]
    converged.check(primary, e["setup"])
    writer = threading.Thread(target=converged.check, args=(primary, e["writes"]), kwargs={"timeout": 900})
    writer.start()
    try:
        converged.check(replica, PRUNE)  # a run cut short may have left one
        assert autosnaps(converged, replica, data, "frequently") == []
        time.sleep(3)  # into the write stream
        t0 = time.monotonic()
        out = converged.check(
            replica,
            f"python3 {SCRIPT} --engine {engine} --when replica --dataset {data} --dataset {log}"
            " --keep frequently=1",
        )
        timings[f"{replica}: a snapshot while {primary} commits (s)"] = time.monotonic() - t0
        assert "db_snapshot: took" in out, out
        [taken] = autosnaps(converged, replica, data, "frequently")
        snap = taken.split("@")[1]
        # The data's createtxg and position, then the log's: one transaction group, one position.
        txg, position, log_txg, log_position = converged.check(
            replica, f"zfs get -H -o value createtxg,{e['property']} {data}@{snap} {log}@{snap}"
        ).split()
        assert txg == log_txg and position == log_position != "-"
        writer.join(timeout=900)
        # Replication went on through the snapshot: every row on the replica.
        deadline = time.monotonic() + 180
        while converged.run(replica, e["count"]).stdout.strip() != str(ROWS):
            assert time.monotonic() < deadline, converged.run(replica, e["count"]).stdout
            time.sleep(3)
    finally:
        writer.join(timeout=900)
        converged.check(primary, e["cleanup"])
    # sanoid keeps no `frequently` snapshot (its count is 0): pruned; the hourly ones stay.
    hourly = autosnaps(converged, replica, data, "hourly")
    converged.check(replica, PRUNE)
    assert autosnaps(converged, replica, data, "frequently") == []
    assert autosnaps(converged, replica, log, "frequently") == []
    assert autosnaps(converged, replica, data, "hourly") == hourly != []
