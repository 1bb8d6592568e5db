"""Failover of both engines at once while clients write (runbooks/failover.py). The primaries'
VMs (db1, pg1) are killed without warning; the most advanced replica takes each primary's place
(and any other MariaDB replica follows it); the old primaries come back fenced (their servers
refuse to start as primaries); a converge with the old inventory refuses; the old primaries are
re-seeded from ZFS snapshots of the new ones (runbooks/seed.py, both engines at once) and follow
them; a converge with the updated inventory changes nothing; switchovers give the lab its primaries
back. Every acknowledged write is accounted for: on every member, or among the last ones the dead
primary acknowledged and had not sent yet (asynchronous replication; counted).

The clients run in replicas that survive (db2, pg2) and write one row per transaction to whichever
server takes writes, trying the last one that did first.

Outside CI's budget: `./dbzfs test-long` runs it (marked `long`; CI's run had grown past 90
minutes on this machine), with DBZFS_TEST_LONG=1: db3 joins first (a third node: the other replica
follows the new primary), 200,000 rows per engine, and the re-seeded hosts also take a
`mariadb-dump` / `pg_basebackup` of the same data for the seeding comparison in
tests/e2e/README.md. Without it (a developer's run on a converged lab), db1 and db2 only and
20,000 rows (DBZFS_FAILOVER_ROWS). CI keeps the switchover runbooks under a writing client
(test_switchover.py) and the converge's topology check (test_topology.py)."""

import os
import re
import time

import pytest

from lab import control, vm as vmmod

from tests import labkit
from tests.e2e.pyinfra_results import assert_changed_nothing
from tests.e2e.test_switchover import INTACT, PG_INTACT, PG_TABLE_SUM, SETUP, app_pgpass, follows, psql, sql
from tests.e2e.topology import inventory
from tests.labkit import in_parallel, runbook, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.long]

ADDRESS = {
    "db1": "10.99.0.11",
    "db2": "10.99.0.12",
    "db3": "10.99.0.13",
    "pg1": "10.99.0.21",
    "pg2": "10.99.0.22",
}
LONG = os.environ.get("DBZFS_TEST_LONG") == "1"
ROWS = labkit.env_number("DBZFS_FAILOVER_ROWS", 200000 if LONG else 20000, minimum=1)
JOINED = ("db3",) if LONG else ()
MARIADB_MEMBERS = ("db1", "db2", *JOINED)

WRITER = r"""cat > /root/fwriter.sh <<'SH'
#!/bin/bash
# One row per transaction; the server that took the last write is tried first. A statement in
# flight when its server's VM dies would wait for TCP's retransmissions (many minutes): each
# client gets 10 s, and a write it did not see acknowledged is not counted.
hosts=({hosts}); n=${{#hosts[@]}}; cur=0; i=0
write() {{
{write}
}}
while [ ! -e /root/fwriter.stop ]; do
  i=$((i + 1)); ok=0
  for ((k = 0; k < n; k++)); do
    h=${{hosts[$(( (cur + k) % n ))]}}
    if write "$h" "$i"; then
      cur=$(( (cur + k) % n )); ok=1; echo "ok $i $h $(date +%s.%N)" >> /root/fwriter.log; break
    fi
  done
  [ "$ok" = 1 ] || {{ echo "refused $i - $(date +%s.%N)" >> /root/fwriter.log; sleep 0.2; }}
done
echo done >> /root/fwriter.log
SH
rm -f /root/fwriter.log /root/fwriter.stop
setsid nohup bash /root/fwriter.sh >/dev/null 2>&1 < /dev/null &"""
MARIADB_WRITE = (
    '  timeout 10 mariadb -h "$1" -u switchtest -pswitchtest --connect-timeout=2 -e '
    "\"INSERT INTO switchtest.t (id, payload) VALUES ($2, SHA2('row $2', 256))\" 2>/dev/null"
)
PG_WRITE = (
    '  timeout 10 psql "host=$1 port=5432 dbname=app user=app target_session_attrs=read-write '
    'connect_timeout=2" '
    "-X -q -v ON_ERROR_STOP=1 -c \"INSERT INTO t (id, payload) VALUES ($2, md5('row $2'))\" 2>/dev/null"
)
STOP = (
    "touch /root/fwriter.stop; for i in $(seq 60); do grep -qx done /root/fwriter.log && break; sleep 1; done"
)


def failover(lab, failed, group, inventory):
    """runbooks/failover.py for `failed`, limited to its group, its dead host left out."""
    argv = ["--data", f"failed={failed}", "--limit", group, "--exclude", failed]
    result = lab.pyinfra(*argv, deploy="runbooks/failover.py", inventory=inventory)
    return result, result.stdout + result.stderr


def acked(lab, name):
    lines = lab.check(name, "cat /root/fwriter.log 2>/dev/null || true").splitlines()
    return [line.split() for line in lines if line.startswith("ok ")]


def wait_for_writes(lab, name, more_than, timeout=180):
    deadline = time.monotonic() + timeout
    while len(acked(lab, name)) <= more_than:
        assert time.monotonic() < deadline, f"the client in {name} acknowledged no new write in {timeout} s"
        time.sleep(2)


# The current ways to build a replica from a primary that holds data, over the same network and
# the same data, measured from the re-seeded host: bytes that cross the network and seconds.
CURRENT_WAY = {
    "db1": "mariadb-dump --defaults-extra-file=/etc/mysql/dbzfs-peers.cnf -h {source} "
    "--single-transaction --master-data=1 --gtid --all-databases --routines --events --triggers",
    "pg1": "runuser -u postgres -- env PGPASSFILE=/var/lib/postgresql/.pgpass pg_basebackup "
    "-h {source} -U replicator -w -D - -Ft -X fetch -c fast",
}


def compare_with_the_current_way(lab, seeds, sources, timings):
    for name, way in CURRENT_WAY.items():
        command = way.format(source=ADDRESS[sources[name]])
        out = lab.check(
            name,
            f"cd /tmp && set -o pipefail && start=$(date +%s%N) && bytes=$({command} | wc -c) && "
            'echo "$bytes $(( ($(date +%s%N) - start) / 1000000 ))"',
        )
        size, millis = out.split()[-2:]
        seconds = int(millis) / 1000
        way = "mariadb-dump" if name == "db1" else "pg_basebackup"
        timings[f"{name}: {way} of the same data: MB over the network"] = int(size) / 1e6
        timings[f"{name}: {way} of the same data: seconds"] = float(seconds)
        found = re.findall(r"send: ([0-9]+) bytes \(([0-9.]+) MiB\) in ([0-9.]+) s", seeds[name][1])
        assert found, seeds[name][1][-3000:]
        timings[f"{name}: snapshot seed: MB over the network (full + incremental)"] = (
            sum(int(size) for size, _, _ in found) / 1e6
        )
        timings[f"{name}: snapshot seed: seconds of sending (full + incremental)"] = sum(
            float(s) for _, _, s in found
        )


def test_failover_of_both_primaries_fence_reseed_and_back(converged, timings):
    lab = converged
    joined = inventory(joined=JOINED)
    if JOINED:
        # db3 joins db1's group: a new server, converged in with the inventory that lists it.
        t0 = time.monotonic()
        lab.join("db3")
        result = lab.pyinfra(inventory=joined)
        assert result.rc == 0, (result.stdout + result.stderr)[-6000:]
        assert follows(lab, "db3", "db1")[0], follows(lab, "db3", "db1", timeout=0)
        timings["db3 joins: boot and converge"] = time.monotonic() - t0

    # Data to seed from, and the clients.
    sql(lab, "db1", SETUP)
    load = f"SELECT seq, SHA2(CONCAT('row ', seq), 256) FROM switchtest.seq_1000001_to_{1_000_000 + ROWS}"
    sql(lab, "db1", f"INSERT INTO switchtest.t {load}")
    app_pgpass(lab, "pg2")
    psql(lab, "pg1", "CREATE TABLE t (id int PRIMARY KEY, payload text NOT NULL); ALTER TABLE t OWNER TO app")
    psql(
        lab,
        "pg1",
        f"INSERT INTO t SELECT g, md5('row ' || g) FROM generate_series(1000001, {1_000_000 + ROWS}) g",
    )
    db_hosts = " ".join(ADDRESS[n] for n in MARIADB_MEMBERS)
    lab.check("db2", WRITER.format(hosts=db_hosts, write=MARIADB_WRITE))
    lab.check("pg2", WRITER.format(hosts="10.99.0.21 10.99.0.22", write=PG_WRITE))
    wait_for_writes(lab, "db2", 5)
    wait_for_writes(lab, "pg2", 5)

    # Power loss of both primaries.
    vmmod.stop([lab.definition.vm("db1"), lab.definition.vm("pg1")], timeout=0)
    killed = {"db2": len(acked(lab, "db2")), "pg2": len(acked(lab, "pg2"))}

    # The most advanced MariaDB replica is promoted (db2 when db3 holds nothing more: inventory
    # order), the others follow it. The operator updates the inventory after the first failover.
    t0 = time.monotonic()
    # Each run limited to its group, its dead primary left out (--exclude): pyinfra would count a
    # host it cannot reach as failed and exit 1; the failover judges the dead server from the
    # replicas, and a failover that succeeds exits 0.
    result, output = failover(lab, "db1", "mariadb", joined)
    assert "failover done" in output and result.rc == 0, output[-6000:]
    new = re.search(r"(db[23]): role 'primary'", output).group(1)
    others = [n for n in MARIADB_MEMBERS[1:] if n != new]
    promotion = {"db1": float(re.search(r"the promotion took ([0-9.]+) s", output).group(1))}
    result, output = failover(lab, "pg1", "postgresql", inventory(new, joined=JOINED))
    assert "failover done" in output and result.rc == 0, output[-6000:]
    assert "pg2: role 'primary'" in output, output[-3000:]
    promotion["pg1"] = float(re.search(r"the promotion took ([0-9.]+) s", output).group(1))
    timings["failover (both runbooks, dead hosts included)"] = time.monotonic() - t0
    timings[f"failover db1->{new}: promotion (runbook)"] = promotion["db1"]
    timings["failover pg1->pg2: promotion (runbook)"] = promotion["pg1"]
    for other in others:
        assert follows(lab, other, new)[0], follows(lab, other, new, timeout=0)
    wait_for_writes(lab, "db2", killed["db2"] + 5)
    wait_for_writes(lab, "pg2", killed["pg2"] + 5)
    assert acked(lab, "db2")[-1][2] == ADDRESS[new] and acked(lab, "pg2")[-1][2] == ADDRESS["pg2"]
    after = inventory(new, "pg2", joined=JOINED)

    # The old primaries come back fenced.
    control.up(lab.definition, ["db1", "pg1"])
    for name, unit in (("db1", "mariadb"), ("pg1", labkit.lab_postgresql().unit)):
        state = f"systemctl show -p ActiveState --value {unit}"
        wait_for(
            lambda name=name, state=state: lab.run(name, state).stdout.strip() == "failed",
            f"{name}'s server refusing to start",
        )
        journal = lab.check(name, f"journalctl -b -u {unit} --no-pager | grep 'dbzfs fence' || true")
        assert f"{name} refuses to start as a primary" in journal, journal
    stale = lab.pyinfra(inventory=joined)
    assert stale.rc != 0 and "the live server is a primary" in stale.stdout + stale.stderr

    # Re-seeded from ZFS snapshots of the new primaries, both engines at once (their runs touch
    # disjoint hosts), with the inventory updated as printed.
    def seed(replica, group):
        t0 = time.monotonic()
        data = (f"host={replica}", "wipe=yes")
        result, output = runbook(lab, "runbooks/seed.py", *data, inventory=after, limit=group)
        assert result.rc == 0 and f"==> seeding done: {replica} replicates" in output, output[-6000:]
        return time.monotonic() - t0, output

    t0 = time.monotonic()
    # --limit takes host or group names (one per option): each run's group.
    seeds = in_parallel(db1=lambda: seed("db1", "mariadb"), pg1=lambda: seed("pg1", "postgresql"))
    timings["seed db1 and pg1 from snapshots, at once (runbooks)"] = time.monotonic() - t0
    for replica, (seconds, _) in seeds.items():
        timings[f"seed {replica} from a snapshot (runbook)"] = seconds
    assert follows(lab, "db1", new)[0], follows(lab, "db1", new, timeout=0)
    assert_changed_nothing(lab.pyinfra(inventory=after))
    if LONG:
        compare_with_the_current_way(lab, seeds, {"db1": new, "pg1": "pg2"}, timings)

    # Back to the lab's primaries; every MariaDB replica follows db1. After the first, `after` is
    # stale for MariaDB: a runbook checks only its own group's topology, so the second goes on.
    for back in ("db1", "pg1"):
        result, output = runbook(lab, "runbooks/switchover.py", f"new_primary={back}", inventory=after)
        assert result.rc == 0, output[-6000:]
    for name in MARIADB_MEMBERS[1:]:
        assert follows(lab, name, "db1")[0], follows(lab, name, "db1", timeout=0)
    lab.check("db2", STOP)
    lab.check("pg2", STOP)

    # Every acknowledged write: on every member now, or among the last the dead primary took.
    position = sql(lab, "db1", "SELECT @@global.gtid_binlog_pos")
    for name in MARIADB_MEMBERS[1:]:
        assert sql(lab, name, f"SELECT MASTER_GTID_WAIT('{position}', 60)") == "0"
    for writer, members, intact in (
        ("db2", MARIADB_MEMBERS, lambda n: lab.check(n, f'mariadb -NB -e "{INTACT}"')),
        ("pg2", ("pg1", "pg2"), lambda n: psql(lab, n, PG_INTACT)),
    ):
        rows = acked(lab, writer)
        present = {name: set(intact(name).split()) for name in members}
        primary = members[0]
        missing = [r[1] for r in rows if r[1] not in present[primary]]
        in_flight = {r[1] for r in rows[max(0, killed[writer] - 20) : killed[writer]]}
        assert set(missing) <= in_flight, (
            f"{primary} lost writes acknowledged long before the kill: {missing[:20]}"
        )
        timings[f"{primary}: acknowledged writes lost with the dead primary (async)"] = len(missing)
        for name in members[1:]:
            assert present[name] == present[primary], f"{name} and {primary} differ"
    sums = {name: psql(lab, name, PG_TABLE_SUM) for name in ("pg1", "pg2")}
    assert sums["pg1"] == sums["pg2"], sums
    sql(lab, "db1", "DROP DATABASE switchtest; DROP USER 'switchtest'@'10.99.0.0/255.255.255.0'")
    psql(lab, "pg1", "DROP TABLE t")
    lab.check("pg2", "rm -f /root/.pgpass /root/fwriter.sh")
    lab.check("db2", "rm -f /root/fwriter.sh")

    if JOINED:
        # db3 leaves: powered off, then a converge with the lab's inventory takes it out of the
        # others' configuration (fence peers, Prometheus targets).
        t0 = time.monotonic()
        lab.leave("db3")
        result = lab.pyinfra()
        assert result.rc == 0, (result.stdout + result.stderr)[-6000:]
        timings["db3 leaves: converge without it"] = time.monotonic() - t0
