"""Power loss of both primaries (then of both replicas) under write load, with InnoDB doublewrite
and PostgreSQL full_page_writes off as deploy.py converges them: nothing acknowledged is lost,
nothing is torn.

Each cycle: clients in the replicas (db2, pg2) commit transactions of BATCH rows with known
payloads to the primaries (db1, pg1) as fast as they can, and record a batch as acknowledged only
after COMMIT returned, in a file on the replica (outside the VM that crashes). At a random moment
both primaries' qemu processes are killed (SIGKILL: no guest shutdown, no flush), then booted
again; with nothing done by hand:

- the pool imports ONLINE with no data errors, and a scrub finds nothing;
- the server starts by itself after the ZFS mounts and logs its crash recovery;
- every acknowledged row is there with its exact payload, and every transaction is all there or
  not at all;
- MariaDB `CHECK TABLE ... EXTENDED` on every table, PostgreSQL `pg_amcheck --heapallindexed`
  (data checksums are on); then, on the stopped server, `innochecksum` over every tablespace and
  `pg_checksums --check`;
- the replica catches up and holds the same rows (a checksum of the table on both).

What this simulates and what it cannot: the guest loses everything in its memory and everything
qemu had in flight; what qemu had already written to the drive files stays (the host keeps it),
as a drive keeps what it acknowledged as persisted. A drive that acknowledges a flush it did not
do is out of scope.

In `./dbzfs test` (CI), one power loss of each primary at once (DBZFS_CRASH_CYCLES, 1 by default:
CI's budget on the Debian 13 lab, whose guests boot slower under emulation). `./dbzfs test-crash
--cycles N` runs this module alone on a lab of its own: N (10 by default) power losses of the
primaries, then (marked long, outside CI) one more of the primaries with InnoDB doublewrite and
full_page_writes put back (the checks show they were not needed; the bytes written per transaction
are reported, too noisy over seconds to price them), and one of the replicas while they apply what
the primaries commit (db2 and pg2, the clients in db1 and pg1), which is also pg2's power cycle
for its prebuilt ZFS (test_zfs_install.back_after_power_loss). The checks of the two crashed VMs
run at once. The kill moments are drawn from
DBZFS_CRASH_SEED (printed, to replay a run)."""

import random
import re
import time
from contextlib import contextmanager

import pytest

from lab import control, vm as vmmod

from tests import labkit
from tests.bare_host import prebuilt
from tests.e2e.test_switchover import app_pgpass, follows, pg_streams, psql, sql
from tests.e2e.test_zfs_install import back_after_power_loss
from tests.labkit import in_parallel, wait_for

pytestmark = pytest.mark.e2e

CYCLES = labkit.env_number("DBZFS_CRASH_CYCLES", 1, minimum=1)
SEED = labkit.env_number("DBZFS_CRASH_SEED", int(time.time()))
BATCH = 50  # rows per transaction
PAYLOAD_SQL = {
    "mariadb": "REPEAT(SHA2(CONCAT('row ', seq), 256), 16)",
    "postgresql": "repeat(md5('row ' || g), 32)",
}
SETUP_MARIADB = (
    "CREATE DATABASE crashtest; "
    "CREATE TABLE crashtest.t (id INT PRIMARY KEY, payload TEXT NOT NULL, KEY (payload(16))); "
    "CREATE USER 'crashtest'@'10.99.0.0/255.255.255.0' IDENTIFIED BY 'crashtest'; "
    "GRANT SELECT, INSERT ON crashtest.* TO 'crashtest'@'10.99.0.0/255.255.255.0'"
)
SETUP_PG = (
    "CREATE TABLE crash_t (id int PRIMARY KEY, payload text NOT NULL); "
    "CREATE INDEX ON crash_t (left(payload, 16)); ALTER TABLE crash_t OWNER TO app"
)
# Ids whose payload is the one the client wrote (a torn or wrong row would not match), on the primary.
INTACT = {
    "mariadb": 'mariadb -NB -e "SELECT id FROM crashtest.t '
    "WHERE payload = REPEAT(SHA2(CONCAT('row ', id), 256), 16)\"",
    "postgresql": "cd / && runuser -u postgres -- psql -X -A -t -d app -c "
    "\"SELECT id FROM crash_t WHERE payload = repeat(md5('row ' || id), 32)\"",
}
TABLE_SUM = {
    "mariadb": "SELECT COUNT(*), SUM(CRC32(CONCAT(id, ':', payload))) FROM crashtest.t",
    "postgresql": "SELECT count(*) || ' ' || md5(string_agg(id || ':' || payload, ',' ORDER BY id)) "
    "FROM crash_t",
}
# The clients write to the primaries' addresses from whichever VM does not crash in the cycle.
WRITE = {
    "mariadb": "timeout 10 mariadb -h 10.99.0.11 -u crashtest -pcrashtest --connect-timeout=2 crashtest -e "
    "\"INSERT INTO t SELECT seq, REPEAT(SHA2(CONCAT('row ', seq), 256), 16) FROM seq_${a}_to_${b}\" "
    "2>/dev/null",
    "postgresql": 'timeout 10 psql "host=10.99.0.21 port=5432 dbname=app user=app connect_timeout=2" -X -q '
    "-v ON_ERROR_STOP=1 -c \"INSERT INTO crash_t SELECT g, repeat(md5('row ' || g), 32) "
    'FROM generate_series($a, $b) g" 2>/dev/null',
}
WRITER = r"""cat > /root/cwriter.sh <<'SH'
#!/bin/bash
# One transaction of {batch} rows per loop, ids from $1 on; "ok FIRST LAST" once COMMIT returned.
a=$1; log=$2
while [ ! -e /root/cwriter.stop ]; do
  b=$((a + {batch} - 1))
  if {write}; then echo "ok $a $b" >> "$log"; else sleep 0.2; fi
  a=$((b + 1))
done
echo done >> "$log"
SH
rm -f /root/cwriter.stop {log}
setsid nohup bash /root/cwriter.sh {start} {log} >/dev/null 2>&1 < /dev/null &"""
STOP = "touch /root/cwriter.stop; for i in $(seq 60); do grep -qx done {log} && break; sleep 1; done"
PRIMARY = {"mariadb": "db1", "postgresql": "pg1"}
REPLICA = {"mariadb": "db2", "postgresql": "pg2"}
# MariaDB 10.11 (InnoDB) and PostgreSQL 15 log these only when the last shutdown was not clean
# (a standby: "interrupted while in recovery").
RECOVERY = {
    "mariadb": r"Starting crash recovery",
    "postgresql": r"automatic recovery in progress|was interrupted while in recovery",
}
PG = labkit.lab_postgresql()  # the lab's release's cluster
PG_LOG = PG.log  # pg_ctlcluster's log (Debian)
# The settings the tuning removed, put back for one cycle (a drop-in read after deploy.py's).
DOUBLEWRITE_ON = "/etc/mysql/mariadb.conf.d/99-crashtest-doublewrite.cnf"
# SELECT @@global.innodb_doublewrite: a boolean in MariaDB 10.11 (0/1), an enum in 11.8 (OFF/ON/fast)
DOUBLEWRITE_OFF, DOUBLEWRITE_ON_VALUES = ("0", "OFF"), ("1", "ON")


def log(msg):
    labkit.log(msg)


def engine_of(lab, name):
    return lab.vms[name].engine


def acked(lab, writer, path):
    lines = lab.check(writer, f"cat {path} 2>/dev/null || true").splitlines()
    return [(int(a), int(b)) for _, a, b in (line.split() for line in lines if line.startswith("ok "))]


def wait_for_batches(lab, writer, path, more_than, timeout=180):
    what = f"{writer}'s client acknowledging writes"
    wait_for(lambda: len(acked(lab, writer, path)) > more_than, what, timeout)


# Bytes written to the pool's drives (both sides of each mirror count). With NVMe multipath the
# I/O is counted on the path devices (nvme2c2n1), not on the namespace's head (nvme2n1).
WRITTEN = "awk '$3 ~ /^nvme[0-9]+(c[0-9]+)?n[0-9]+$/ {s += $10} END {print s * 512}' /proc/diskstats"


def server_answers(lab, name):
    if engine_of(lab, name) == "mariadb":
        return lab.run(name, "mariadb -NB -e 'SELECT 1'").stdout.strip() == "1"
    return lab.run(name, "cd / && runuser -u postgres -- psql -X -A -t -c 'SELECT 1'").stdout.strip() == "1"


def pool_is_clean(lab, name, cycle):
    status = lab.check(name, "zpool status -v dbpool")
    assert "state: ONLINE" in status and "errors: No known data errors" in status, (
        f"cycle {cycle}: {name}'s pool after the power loss:\n{status}"
    )
    lab.check(name, "zpool scrub -w dbpool", timeout=900)
    status = lab.check(name, "zpool status -v dbpool")
    scrubbed = re.search(r"scrub repaired 0B .* with 0 errors", status)
    assert scrubbed, f"cycle {cycle}: {name}'s scrub:\n{status}"
    assert "errors: No known data errors" in status, f"cycle {cycle}: {name} after the scrub:\n{status}"


def rows_accounted_for(lab, engine, writer, path, cycle):
    """Every acknowledged batch whole on the primary, with its payloads; every batch there whole."""
    primary = PRIMARY[engine]
    present = {int(i) for i in lab.check(primary, INTACT[engine], timeout=900).split()}
    batches = acked(lab, writer, path)
    lost = [(a, b) for a, b in batches if not set(range(a, b + 1)) <= present]
    assert not lost, f"cycle {cycle}: {primary} lost acknowledged transactions (first ids) {lost[:10]}"
    first = {i - (i - 1) % BATCH for i in present}  # ids start at 1 modulo BATCH
    torn = sorted(a for a in first if not set(range(a, a + BATCH)) <= present)
    assert not torn, f"cycle {cycle}: {primary} holds part of transactions starting at {torn[:10]}"
    return len(batches)


# innochecksum over every tablespace of the stopped server. ibdata1 without its doublewrite area:
# its two blocks of 64 pages (where the TRX_SYS page, page 5, says) hold copies of pages whose
# home is elsewhere, each with its home's header, and innochecksum fails every one of them
# (MariaDB 10.11.19, -r included). InnoDB only reads them to repair a torn page at its home.
INNOCHECKSUM = r"""cd /datastore/mysql
h=$(od -A n -t x1 -j $((5 * 16384 + 16384 - 200 + 10)) -N 12 ibdata1 | tr -d ' \n')
if [ "${h:0:8}" = 1fffbd5f ]; then
  b1=$((16#${h:8:8})); b2=$((16#${h:16:8}))
  { innochecksum -e $((b1 - 1)) ibdata1 && innochecksum -s $((b2 + 64)) ibdata1; } >/dev/null 2>&1 \
    || echo "BAD ibdata1 (outside the doublewrite area, pages $b1-$((b2 + 63)))"
else
  innochecksum ibdata1 >/dev/null 2>&1 || echo "BAD ibdata1"
fi
n=1
for f in undo[0-9]* $(find . -name '*.ibd'); do
  [ -e "$f" ] || continue; n=$((n + 1)); innochecksum "$f" >/dev/null 2>&1 || echo "BAD $f"
done
echo "checked $n"
"""


def mariadb_pages_check(lab, name, cycle):
    out = lab.check(name, "mariadb-check --all-databases --extended 2>&1", timeout=1800)
    bad = [line for line in out.splitlines() if re.search(r"error|corrupt|warning", line, re.I)]
    assert not bad, f"cycle {cycle}: CHECK TABLE ... EXTENDED on {name}:\n" + "\n".join(bad)
    lab.check(name, "systemctl stop mariadb", timeout=600)
    try:
        out = lab.check(name, INNOCHECKSUM, timeout=1800)
    finally:
        lab.check(name, "systemctl start mariadb", timeout=600)
    assert "BAD " not in out and int(out.split()[-1]) > 5, f"cycle {cycle}: innochecksum on {name}:\n{out}"


def postgresql_pages_check(lab, name, cycle):
    amcheck = lab.run(
        name,
        "cd / && runuser -u postgres -- "
        f"/usr/lib/postgresql/{PG.version}/bin/pg_amcheck -d app -d postgres --heapallindexed 2>&1",
        timeout=1800,
    )
    assert amcheck.rc == 0, f"cycle {cycle}: pg_amcheck on {name}:\n{amcheck.stdout}"
    lab.check(name, f"systemctl stop {PG.unit}", timeout=600)
    try:
        out = lab.run(
            name,
            f"runuser -u postgres -- /usr/lib/postgresql/{PG.version}/bin/pg_checksums --check "
            f"-D /datastore/postgresql/{PG.version}/main 2>&1",
            timeout=1800,
        )
    finally:
        lab.check(name, f"systemctl start {PG.unit}", timeout=600)
    clean = out.rc == 0 and "Bad checksums:  0" in out.stdout
    assert clean, f"cycle {cycle}: pg_checksums on {name}:\n{out.stdout}"


def replicating(lab, engine, cycle):
    # After db1 went away (a power loss, a restart) db2's IO thread tries again every 10 s
    # (MASTER_CONNECT_RETRY, operations.mariadb.CONNECT_RETRY_SECONDS).
    replica, primary = REPLICA[engine], PRIMARY[engine]
    check = follows if engine == "mariadb" else pg_streams
    ok, status = check(lab, replica, primary, timeout=180)
    assert ok, f"cycle {cycle}: {replica} not replicating from {primary}: {status}"


def replicas_match(lab, cycle):
    replicating(lab, "mariadb", cycle)
    position = sql(lab, "db1", "SELECT @@global.gtid_binlog_pos")
    waited = sql(lab, "db2", f"SELECT MASTER_GTID_WAIT('{position}', 300)")
    assert waited == "0", f"cycle {cycle}: db2 did not reach db1's {position} in 300 s"
    sums = {n: sql(lab, n, TABLE_SUM["mariadb"]) for n in ("db1", "db2")}
    assert sums["db1"] == sums["db2"], f"cycle {cycle}: db1 and db2 differ: {sums}"
    lsn = psql(lab, "pg1", "SELECT pg_current_wal_lsn()")
    wait_for(
        lambda: psql(lab, "pg2", f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn") == "t",
        f"cycle {cycle}: pg2 replaying up to pg1's {lsn}",
        300,
    )
    sums = {n: psql(lab, n, TABLE_SUM["postgresql"]) for n in ("pg1", "pg2")}
    assert sums["pg1"] == sums["pg2"], f"cycle {cycle}: pg1 and pg2 differ: {sums}"


def crash_cycle(lab, cycle, crashed, rng, timings):
    """One power loss of `crashed` ({engine: VM}, one per engine) under write load, the clients
    in the engine's other VM; every check after it. Returns the acknowledged transactions per
    engine and the bytes written to each crashed VM's drives per transaction."""
    writers = {e: REPLICA[e] if name == PRIMARY[e] else PRIMARY[e] for e, name in crashed.items()}
    volume = {}
    path = f"/root/cwriter-{cycle}.log"
    start = cycle * 10_000_000 + 1
    for engine, name in crashed.items():
        if name == REPLICA[engine]:
            replicating(lab, engine, cycle)  # what it applies while the power goes is the point
    for engine, writer in writers.items():
        lab.check(writer, WRITER.format(batch=BATCH, write=WRITE[engine], start=start, log=path))
    for writer in writers.values():
        wait_for_batches(lab, writer, path, 3)
    pg_log_lines = int(lab.check(crashed["postgresql"], f"wc -l < {PG_LOG}"))
    before = {e: (int(lab.check(n, WRITTEN)), len(acked(lab, writers[e], path))) for e, n in crashed.items()}
    time.sleep(rng.uniform(3, 15))
    after = {e: (int(lab.check(n, WRITTEN)), len(acked(lab, writers[e], path))) for e, n in crashed.items()}
    vmmod.pull_plug([lab.definition.vm(n) for n in crashed.values()], log=log)
    for engine, name in crashed.items():
        written, transactions = after[engine][0] - before[engine][0], after[engine][1] - before[engine][1]
        if transactions:
            volume[name] = written / transactions
    for writer in writers.values():
        lab.check(writer, STOP.format(log=path), timeout=120)

    t0 = time.monotonic()
    control.up(lab.definition, list(crashed.values()))
    for name in crashed.values():
        what = f"cycle {cycle}: {name}'s server answering"
        wait_for(lambda name=name: server_answers(lab, name), what, 600)
    timings[f"cycle {cycle}: boot until both servers answer"] = time.monotonic() - t0
    logs = {
        "mariadb": lab.check(crashed["mariadb"], "journalctl -b -u mariadb --no-pager"),
        "postgresql": lab.check(crashed["postgresql"], f"tail -n +{pg_log_lines + 1} {PG_LOG}"),
    }
    for engine, pattern in RECOVERY.items():
        shown, name = logs[engine][-3000:], crashed[engine]
        assert re.search(pattern, logs[engine]), f"cycle {cycle}: {name} logged no crash recovery:\n{shown}"

    t0 = time.monotonic()
    pages_check = {"mariadb": mariadb_pages_check, "postgresql": postgresql_pages_check}

    def checks(engine):
        """One crashed VM's checks; the two VMs' run at once (each is its own guest's work)."""
        name = crashed[engine]
        pool_is_clean(lab, name, cycle)
        committed = rows_accounted_for(lab, engine, writers[engine], path, cycle)
        pages_check[engine](lab, name, cycle)
        return committed

    committed = in_parallel(**{engine: lambda engine=engine: checks(engine) for engine in crashed})
    wait_for(lambda: all(server_answers(lab, n) for n in crashed.values()), "servers back", 300)
    replicas_match(lab, cycle)
    timings[f"cycle {cycle}: checks (scrub, rows, pages, replicas)"] = time.monotonic() - t0
    return committed, volume


class Cycles:
    """Runs and counts the cycles of the module; the figures for its report."""

    def __init__(self, lab, timings):
        self.lab, self.timings = lab, timings
        self.rng = random.Random(SEED)
        self.number = 0
        self.survived = 0
        self.committed = {"mariadb": 0, "postgresql": 0}
        self.volume: dict[str, dict[str, list[float]]] = {}  # kind -> VM -> bytes per transaction

    def run(self, kind, crashed):
        self.number += 1
        try:
            acknowledged, written = crash_cycle(self.lab, self.number, crashed, self.rng, self.timings)
        except AssertionError:
            failed = f"cycle {self.number} ({kind}) failed (seed {SEED})"
            log(f"==> crash: {self.survived} cycles survived; {failed}")
            raise
        for engine, count in acknowledged.items():
            self.committed[engine] += count
        for name, per_transaction in written.items():
            self.volume.setdefault(kind, {}).setdefault(name, []).append(per_transaction)
        self.survived += 1
        log(f"==> crash cycle {self.number} ({kind}) survived")

    def kib(self, kind, name):
        values = sorted(self.volume.get(kind, {}).get(name, []))
        return f"{values[len(values) // 2] / 1024:.0f} KiB" if values else "n/a"


@pytest.fixture(scope="module")
def cycles(converged, timings):
    lab = converged
    log(f"==> crash cycles: seed {SEED} (DBZFS_CRASH_SEED={SEED} replays the kill moments)")
    assert sql(lab, "db1", "SELECT @@global.innodb_doublewrite") in DOUBLEWRITE_OFF
    assert psql(lab, "pg1", "SHOW full_page_writes") == "off"
    sql(lab, "db1", SETUP_MARIADB)
    psql(lab, "pg1", SETUP_PG)
    for database in ("app", "postgres"):  # pg_amcheck's functions, on pg2 too by replication
        psql(lab, "pg1", "CREATE EXTENSION IF NOT EXISTS amcheck", database=database)
    app_pgpass(lab, "pg2")
    app_pgpass(lab, "pg1")
    runs = Cycles(lab, timings)
    yield runs
    log(
        f"==> crash: {runs.survived} of {runs.number} cycles survived (seed {SEED}); acknowledged "
        f"transactions of {BATCH} rows: MariaDB {runs.committed['mariadb']}, PostgreSQL "
        f"{runs.committed['postgresql']}, none lost"
    )
    sql(lab, "db1", "DROP DATABASE crashtest; DROP USER 'crashtest'@'10.99.0.0/255.255.255.0'")
    psql(lab, "pg1", "DROP TABLE crash_t; DROP EXTENSION IF EXISTS amcheck")
    psql(lab, "pg1", "DROP EXTENSION IF EXISTS amcheck", database="postgres")
    for name in ("db1", "db2", "pg1", "pg2"):
        lab.check(name, "rm -f /root/.pgpass /root/cwriter.sh /root/cwriter-*.log /root/cwriter.stop")


def test_power_loss_of_both_primaries_under_write_load(cycles):
    for _ in range(CYCLES):
        cycles.run("tuned", PRIMARY)
    log(
        f"==> crash: {CYCLES} power losses of db1 and pg1 with deploy.py's settings survived; written to "
        f"the drives per transaction (median): db1 {cycles.kib('tuned', 'db1')}, "
        f"pg1 {cycles.kib('tuned', 'pg1')}"
    )


@contextmanager
def doublewrite_and_full_page_writes_on(lab):
    """db1 with InnoDB doublewrite (a restart: not dynamic in 10.11 or 11.8), pg1 with full_page_writes
    (a reload); both back to deploy.py's settings after."""
    lab.check("db1", f"printf '[mariadb]\\ninnodb_doublewrite = ON\\n' > {DOUBLEWRITE_ON}")
    lab.check("db1", "systemctl restart mariadb", timeout=600)
    psql(lab, "pg1", "ALTER SYSTEM SET full_page_writes = on")
    psql(lab, "pg1", "SELECT pg_reload_conf()")
    try:
        assert sql(lab, "db1", "SELECT @@global.innodb_doublewrite") in DOUBLEWRITE_ON_VALUES
        wait_for(lambda: psql(lab, "pg1", "SHOW full_page_writes") == "on", "pg1's full_page_writes on", 60)
        yield
    finally:
        lab.check("db1", f"rm -f {DOUBLEWRITE_ON} && systemctl restart mariadb", timeout=600)
        psql(lab, "pg1", "ALTER SYSTEM RESET full_page_writes")
        psql(lab, "pg1", "SELECT pg_reload_conf()")
    assert sql(lab, "db1", "SELECT @@global.innodb_doublewrite") in DOUBLEWRITE_OFF
    wait_for(lambda: psql(lab, "pg1", "SHOW full_page_writes") == "off", "pg1's full_page_writes off", 60)


@pytest.mark.long  # ./dbzfs test-crash
def test_power_loss_with_doublewrite_and_full_page_writes_back_on(cycles):
    """The same cycle with the settings the tuning removed: more written, no safer."""
    with doublewrite_and_full_page_writes_on(cycles.lab):
        cycles.run("doublewrite and full_page_writes on", PRIMARY)
    on = "doublewrite and full_page_writes on"
    log(
        "==> crash: written to the drives per transaction, deploy.py's settings against the removed "
        f"ones put back: db1 {cycles.kib('tuned', 'db1')} vs {cycles.kib(on, 'db1')} (doublewrite on), "
        f"pg1 {cycles.kib('tuned', 'pg1')} vs {cycles.kib(on, 'pg1')} (full_page_writes on)"
    )


@pytest.mark.long  # ./dbzfs test-crash
def test_power_loss_of_both_replicas_under_write_load(cycles):
    """db2 and pg2 lose power while clients in db1 and pg1 write: they recover, follow again and
    hold every row."""
    cycles.run("replicas", REPLICA)
    # pg2 got ZFS prebuilt from the first converge (lab.yaml): this power loss is its power cycle.
    back_after_power_loss(cycles.lab, [n for n in prebuilt(cycles.lab) if n in REPLICA.values()])
    log(
        "==> crash: power loss of db2 and pg2 survived; written to their drives per primary "
        f"transaction: db2 {cycles.kib('replicas', 'db2')}, pg2 {cycles.kib('replicas', 'pg2')}"
    )
