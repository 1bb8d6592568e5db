"""Off-host copies on the lab (roles/backup.py): backup1 (lab.yaml backup_vms) boots and a converge
with inventories/lab_backup.py lets its key in on the database hosts (send only, from its address
only), converges it and runs its first pull, which copies the snapshots of the hosts that take them
(the replicas db2 and pg2); tests/infra/test_backup.py passes on it and a second converge changes
nothing. Then, while each primary commits rows, its replica takes one more snapshot (both at
once), and one pull sends only those, each with the position it holds; db1's binlogs reach
backup1 as db1 wrote them (roles/binlogs.py). Point-in-time recovery (runbooks/restore.py), both
engines at once: a table dropped by mistake is restored on pg2 (pgBackRest's backup and WAL
archive, roles/pgbackrest.py) and on db2 (a ZFS copy and the streamed binlogs,
day2/restore_mariadb.py) to the moment before; then both are restored from the newest backup as
replicas and catch up. Last, backup1 leaves: a converge with the lab's own inventory takes its
keys, accounts and permissions away again."""

import json
import re
import shlex
import threading
import time
from contextlib import contextmanager

import pytest

from roles import backup, binlogs, pgbackrest, snapshots

from tests import labkit
from tests.e2e.pyinfra_results import assert_changed_nothing
from tests.e2e.test_monitoring import PROMETHEUS, query
from tests.labkit import REPO, wait_for

pytestmark = pytest.mark.e2e

BACKUP = "backup1"
INVENTORY = REPO / "inventories" / "lab_backup.py"
SNAPSHOT = "/usr/local/lib/dbzfs/db_snapshot.py"
PULL = f"systemctl start {backup.UNIT}"
ENGINES = {
    "mariadb": {
        "primary": "db1",
        "replica": "db2",
        "datasets": ["dbpool/datastore/mysql", "dbpool/datastore/mysql-log"],
        "property": "dbzfs:gtid",
        "writes": "mariadb -e 'CREATE DATABASE IF NOT EXISTS backuptest;"
        " CREATE TABLE IF NOT EXISTS backuptest.t (id INT AUTO_INCREMENT PRIMARY KEY, at DATETIME(6))';"
        " for i in $(seq 200); do echo 'INSERT INTO backuptest.t (at) VALUES (NOW(6));'; done | mariadb",
    },
    "postgresql": {
        "primary": "pg1",
        "replica": "pg2",
        "datasets": ["dbpool/datastore/postgresql", "dbpool/datastore/postgresql-wal"],
        "property": "dbzfs:lsn",
        "writes": "cd / && runuser -u postgres -- psql -Xq -c 'CREATE TABLE IF NOT EXISTS backuptest"
        " (id serial PRIMARY KEY, at timestamptz)' && for i in $(seq 200); do"
        " echo 'INSERT INTO backuptest (at) VALUES (now());'; done"
        " | runuser -u postgres -- psql -Xq >/dev/null",
    },
}


def leave(lab, timings):
    t0 = time.monotonic()
    lab.leave(BACKUP)
    result = lab.pyinfra()
    timings["backup1 leaves: converge without it"] = time.monotonic() - t0
    return result


# Issue 45: a fleet converged with its backup host in one run from fresh took its first snapshots
# in that converge, after the pull timer had started and pulled nothing; the converge's first pull
# took that run for its own and backup1 held no copy. The lab's hosts took theirs long ago: they
# drop them (and the snapshot job's mark of its first run, and sanoid's timer until the converge
# starts it again), so that the converge that brings backup1 in takes their first ones again.
# A run the timer had queued but not yet started is not "activating": `systemctl stop` of the
# service after the wait cancels it (CI at 797c281: pg2 took two snapshots after they were
# destroyed here).
TIMER_STOPPED = (
    "systemctl stop {timer} && while [ $(systemctl show -p ActiveState --value {service})"
    " = activating ]; do sleep 2; done && systemctl stop {service}"
)
FIRST_SNAPSHOTS_AGAIN = (
    TIMER_STOPPED.format(timer="sanoid.timer", service="sanoid.service")
    + " && rm -f {marker} && for d in {datasets}; do"
    " zfs list -H -o name -t snapshot -d 1 $d | grep @autosnap_ | xargs -r -n 1 zfs destroy; done"
)


def first_snapshots_again(lab):
    labkit.in_parallel(
        **{
            name: lambda name=name, spec=spec: lab.check(
                name,
                FIRST_SNAPSHOTS_AGAIN.format(marker=snapshots.METRICS, datasets=" ".join(spec["datasets"])),
                timeout=900,
            )
            for spec in ENGINES.values()
            for name in (spec["primary"], spec["replica"])
        }
    )
    for spec in ENGINES.values():
        for name in (spec["primary"], spec["replica"]):
            assert not guids(lab, name, spec["datasets"][0]), name


@pytest.fixture(scope="module")
def backed_up(converged, timings):
    t0 = time.monotonic()
    converged.join(BACKUP)
    timings["backup1 boots"] = time.monotonic() - t0
    try:
        t0 = time.monotonic()
        first_snapshots_again(converged)
        timings["the database hosts' snapshots dropped"] = time.monotonic() - t0
        t0 = time.monotonic()
        result = converged.pyinfra(inventory=INVENTORY)
        timings["converge with backup1 (its first pull included)"] = time.monotonic() - t0
        result.check()
        yield converged
    finally:
        if BACKUP in converged.names:  # the lab as it was, whatever failed
            leave(converged, timings).check()


def test_the_first_converge_copied_the_replicas_snapshots(backed_up):
    """Every snapshot of ours a host holds is on the backup host, the same snapshot (guid); a host
    that holds none (a primary of a fresh lab: they are taken on the replicas) has no copy. The
    replicas took their first snapshots in the converge that brought backup1 in
    (first_snapshots_again), as a fleet converged with its backup host in one run does."""
    for cluster, spec in ENGINES.items():
        for name in (spec["replica"], spec["primary"]):
            for dataset, role in zip(spec["datasets"], ("data", "log"), strict=True):
                source = guids(backed_up, name, dataset)
                copy = f"dbpool/backup/{cluster}/{name}/{role}"
                if source:
                    # Up to the newest copy: the host may have taken one since the pull
                    held = guids(backed_up, BACKUP, copy)
                    assert held and held[-1] in source, (name, role, source, held)
                    upto = source[: source.index(held[-1]) + 1]
                    assert set(upto) <= set(held), (name, role, upto, held)
                else:
                    assert backed_up.run(BACKUP, f"zfs list -H {copy}").rc != 0, (name, role)
        assert guids(backed_up, spec["replica"], spec["datasets"][0]), "the replica takes them"


def guids(lab, name, dataset):
    out = lab.check(name, f"zfs list -Hp -t snapshot -o name,guid -s createtxg -d 1 {dataset}")
    return [line.split("\t")[1] for line in out.splitlines() if "@autosnap_" in line]


def test_testinfra_checks_pass_on_the_backup_host(backed_up):
    result = backed_up.testinfra(
        "tests/infra/test_backup.py",
        "tests/infra/test_pgbackrest.py",
        "tests/infra/test_binlogs.py",
        hosts=[BACKUP],
        inventory=INVENTORY,
    )
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and " failed" not in result.stdout


def test_a_second_converge_with_the_backup_host_changes_nothing(backed_up, timings):
    t0 = time.monotonic()
    result = backed_up.pyinfra(inventory=INVENTORY)
    timings["second converge with backup1"] = time.monotonic() - t0
    assert_changed_nothing(result)


def snapshot_while_writing(lab, engine, spec):
    """The replica takes a snapshot while its primary commits rows."""
    writer = threading.Thread(target=lambda: lab.check(spec["primary"], spec["writes"]))
    writer.start()
    # A kind the retention does not keep: due at once, pruned by the next sanoid run.
    datasets = " ".join(f"--dataset {d}" for d in spec["datasets"])
    lab.check(
        spec["replica"],
        f"python3 {SNAPSHOT} --engine {engine} --when replica {datasets} --keep frequently=1"
        " --metrics /run/dbzfs-backup-test.prom",
    )
    writer.join()


def guid(lab, name, snapshot):
    return lab.check(name, f"zfs get -Hp -o value guid {snapshot}").strip()


@contextmanager
def timers_stopped(lab, timers):
    """[(host, timer, its service)]: each timer stopped and a run it started finished, started
    again after. The test's own runs are then the only ones: a pull that began before the
    snapshots would be waited for by `systemctl start` and miss them (CI at d524f9b: the pull
    timer's OnBootSec=5min run, once the join converge took under 5 minutes), and sanoid prunes
    the test's `frequently` snapshot (a kind kept nowhere) at its next run, here or there."""
    for name, timer, service in timers:
        lab.check(name, TIMER_STOPPED.format(timer=timer, service=service), timeout=900)
    try:
        yield
    finally:
        for name, timer, _ in timers:
            lab.check(name, f"systemctl start {timer}")


def test_a_pull_sends_only_the_new_snapshots_with_their_positions(backed_up, timings):
    timers = [(BACKUP, backup.TIMER, backup.UNIT), (BACKUP, "sanoid.timer", "sanoid.service")]
    timers += [(spec["replica"], "sanoid.timer", "sanoid.service") for spec in ENGINES.values()]
    with timers_stopped(backed_up, timers):
        labkit.in_parallel(
            **{
                engine: lambda engine=engine, spec=spec: snapshot_while_writing(backed_up, engine, spec)
                for engine, spec in ENGINES.items()
            }
        )
        taken = {
            # the newest of the kind the test takes (the hourly job may have run meanwhile)
            engine: backed_up.check(
                spec["replica"],
                f"zfs list -H -t snapshot -o name -s createtxg -d 1 {spec['datasets'][0]}"
                " | grep _frequently | tail -n 1",
            ).strip()
            for engine, spec in ENGINES.items()
        }
        t0 = time.monotonic()
        out = backed_up.check(BACKUP, f"{PULL} && journalctl -o cat -n 20 -u {backup.UNIT}")
        timings["incremental pull (both replicas)"] = time.monotonic() - t0
        for engine, spec in ENGINES.items():
            replica, copy = spec["replica"], f"dbpool/backup/{engine}/{spec['replica']}/data"
            snapshot = taken[engine].split("@", 1)[1]
            assert snapshot.endswith("_frequently"), taken
            # the same snapshot (guid) on the backup host, with the position it holds (checked
            # before the timers run again: the replica's sanoid prunes it)
            assert guid(backed_up, replica, taken[engine]) in guids(backed_up, BACKUP, copy), (taken, out)
            position = {
                name: backed_up.check(
                    name, f"zfs get -H -o value {spec['property']} {dataset}@{snapshot}"
                ).strip()
                for name, dataset in ((replica, spec["datasets"][0]), (BACKUP, copy))
            }
            assert position[BACKUP] == position[replica] and position[BACKUP] not in ("", "-"), position
            written = backed_up.check(BACKUP, f"zfs get -Hp -o value written {copy}@{snapshot}").strip()
            kib = int(written) / 1024
            labkit.log(f"==> incremental pull ({engine}): {kib:.0f} KiB written for {snapshot}")


def test_db1s_binlogs_reach_the_backup_host_as_the_server_wrote_them(backed_up, timings):
    """The binlog stream (roles/binlogs.py): db1 closes the binlog file it wrote the pull test's
    rows into; backup1 holds that file as db1 has it (but the in-use flag, bytes 21-22, which the
    server clears when it closes the file it streamed while open) within seconds."""
    lab = backed_up
    closed = lab.check("db1", "mariadb -N -e 'SHOW MASTER STATUS' | cut -f1").strip()
    lab.check("db1", "mariadb -e 'FLUSH BINARY LOGS'")
    server = lab.check("db1", "dirname $(mariadb -N -e 'SELECT @@log_bin_basename')").strip()
    directory = f"{binlogs.DIRECTORY}/mariadb/db1"
    digest = "tail -c +23 {} | sha256sum"
    want = lab.check("db1", digest.format(f"{server}/{closed}"))
    t0 = time.monotonic()
    wait_for(
        lambda: lab.run(BACKUP, digest.format(f"{directory}/{closed}")).stdout == want,
        f"{closed} streamed to {BACKUP} as db1 wrote it",
        timeout=120,
    )
    timings["a closed binlog file on the backup host"] = time.monotonic() - t0
    size = lab.check("db1", f"stat -c %s {server}/{closed}").strip()
    labkit.log(f"==> binlog stream: {closed} ({size} bytes) on {BACKUP} {time.monotonic() - t0:.0f} s after")


def pg(lab, name, sql):
    return lab.check(name, f"cd / && runuser -u postgres -- psql -X -A -t -q -c {shlex.quote(sql)}").strip()


def restore(lab, *data):
    args = [arg for item in data for arg in ("--data", item)]
    return lab.pyinfra(*args, inventory=INVENTORY, deploy="runbooks/restore.py")


def archived(lab, primary, timeout=180):
    """Waits until the primary's current WAL segment (switched to now) is in the archive."""
    segment = pg(lab, primary, "SELECT pg_walfile_name(pg_switch_wal())")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pg(lab, primary, "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver") >= segment:
            return segment
        time.sleep(2)
    raise AssertionError(f"{segment} not archived after {timeout} s")


def test_the_restore_refuses_the_groups_live_primary(backed_up):
    result = restore(backed_up, "host=pg1", "mode=standalone", "wipe=yes")
    assert result.rc != 0
    assert "is its group's declared primary" in result.stdout + result.stderr, result.stdout[-3000:]
    assert pg(backed_up, "pg1", "SELECT pg_is_in_recovery()") == "f"


def maria(lab, name, sql):
    return lab.check(name, f"mariadb -N -B -e {shlex.quote(sql)}").strip()


def pitr_postgresql(lab, timings):
    """Rows in three transactions, an incremental backup between the first and the second, the
    moment noted, more rows, the table dropped; pg2 restored to that moment (stand-alone) holds
    exactly the rows committed before it, each with its payload."""
    pg(lab, "pg1", "DROP TABLE IF EXISTS pitr_probe")
    pg(lab, "pg1", "CREATE TABLE pitr_probe (id int PRIMARY KEY, payload text NOT NULL)")
    rows = "INSERT INTO pitr_probe SELECT g, md5(g::text) FROM generate_series({}, {}) g"
    pg(lab, "pg1", rows.format(1, 100))
    t0 = time.monotonic()
    lab.check(BACKUP, f"systemctl start {pgbackrest.service('incr')}")
    timings["pgBackRest incremental backup"] = time.monotonic() - t0
    pg(lab, "pg1", rows.format(101, 150))
    moment = pg(lab, "pg1", "SELECT clock_timestamp()")
    time.sleep(1)
    pg(lab, "pg1", rows.format(151, 200))
    pg(lab, "pg1", "DROP TABLE pitr_probe")
    archived(lab, "pg1")
    t0 = time.monotonic()
    restore(lab, "host=pg2", "mode=standalone", f"time={moment}", "wipe=yes").check()
    timings["restore pg2 to a moment (stand-alone)"] = time.monotonic() - t0
    got = pg(
        lab, "pg2", "SELECT count(*), min(id), max(id), bool_and(payload = md5(id::text)) FROM pitr_probe"
    )
    assert got == "150|1|150|t", got
    reached = pg(lab, "pg2", "SELECT pg_last_xact_replay_timestamp()")
    labkit.log(f"==> point-in-time recovery (pg2): target {moment}, last transaction replayed {reached}")
    assert pg(lab, "pg2", "SHOW archive_mode") == "off"


def pitr_mariadb(lab, timings):
    """The same for MariaDB (day2/restore_mariadb.py): db2 restored from the newest copy on
    backup1 taken before the moment, then db1's binlogs streamed to backup1 replayed up to it.
    --stop-datetime has whole seconds: the moment is taken with a second clear on each side."""
    maria(lab, "db1", "CREATE DATABASE IF NOT EXISTS pitr; DROP TABLE IF EXISTS pitr.probe")
    maria(lab, "db1", "CREATE TABLE pitr.probe (id INT PRIMARY KEY, payload CHAR(32) NOT NULL)")
    rows = "INSERT INTO pitr.probe SELECT seq, md5(seq) FROM pitr.seq_{}_to_{}"
    maria(lab, "db1", rows.format(1, 100))
    maria(lab, "db1", rows.format(101, 150))
    time.sleep(1.5)
    moment = maria(lab, "db1", "SELECT DATE_FORMAT(UTC_TIMESTAMP(), '%Y-%m-%d %H:%i:%s+00')")
    time.sleep(1.5)
    maria(lab, "db1", rows.format(151, 200))
    maria(lab, "db1", "DROP TABLE pitr.probe")
    t0 = time.monotonic()
    result = restore(lab, "host=db2", "mode=standalone", f"time={moment}", "wipe=yes")
    result.check()
    timings["restore db2 to a moment (stand-alone)"] = time.monotonic() - t0
    got = maria(lab, "db2", "SELECT count(*), min(id), max(id), sum(payload = md5(id)) FROM pitr.probe")
    assert got.split() == ["150", "1", "150", "150"], got
    assert maria(lab, "db2", "SHOW SLAVE STATUS") == "" and maria(lab, "db2", "SELECT @@read_only") == "1"
    output = result.stdout + result.stderr
    assert "==> restore of db2 (standalone)" in output, output[-3000:]  # the report
    # the restore's record on the copy in place: the last transaction replayed, and its time
    records = lab.check(
        "db2", "zfs get -H -o name,value -t snapshot -d 1 dbzfs:replayed dbpool/datastore/mysql"
    )
    [(snapshot, reached)] = [line.split("\t") for line in records.splitlines() if not line.endswith("\t-")]
    assert reached.startswith("reached GTID "), records
    labkit.log(f"==> point-in-time recovery (db2): target {moment}, {reached} over the copy {snapshot}")
    for line in output.splitlines():
        if line.strip().startswith(("copy: ", "sent: ", "binlogs replayed: ")):
            labkit.log(f"==> restore of db2: {line.strip()}")


def test_a_table_dropped_by_mistake_is_restored_on_another_host_as_it_was_just_before(backed_up, timings):
    """Both engines at once: pg2 from pgBackRest's backup and archive, db2 from a ZFS copy and
    the streamed binlogs. backup1's sanoid is stopped meanwhile: it prunes the pull test's copy (a
    kind kept nowhere), which may be the one db2's restore sends."""
    with timers_stopped(backed_up, [(BACKUP, "sanoid.timer", "sanoid.service")]):
        labkit.in_parallel(
            postgresql=lambda: pitr_postgresql(backed_up, timings),
            mariadb=lambda: pitr_mariadb(backed_up, timings),
        )


def replica_postgresql(lab, timings):
    t0 = time.monotonic()
    restore(lab, "host=pg2", "mode=replica", "wipe=yes").check()
    timings["restore pg2 as a replica"] = time.monotonic() - t0
    pg(lab, "pg1", "CREATE TABLE IF NOT EXISTS restore_probe (id serial PRIMARY KEY, at timestamptz)")
    pg(lab, "pg1", "INSERT INTO restore_probe (at) SELECT now() FROM generate_series(1, 100)")
    want = pg(lab, "pg1", "SELECT count(*), sum(id) FROM restore_probe")
    deadline = time.monotonic() + 120
    while pg(lab, "pg2", "SELECT count(*), sum(id) FROM restore_probe") != want:
        assert time.monotonic() < deadline, "pg2 did not catch up within 120 s"
        time.sleep(2)
    streaming = pg(lab, "pg1", "SELECT state FROM pg_stat_replication WHERE application_name = 'pg2'")
    assert streaming == "streaming"
    assert pg(lab, "pg2", "SELECT count(*) FROM pg_class WHERE relname = 'pitr_probe'") == "0"


def replica_mariadb(lab, timings):
    t0 = time.monotonic()
    restore(lab, "host=db2", "mode=replica", "wipe=yes").check()
    timings["restore db2 as a replica"] = time.monotonic() - t0
    maria(lab, "db1", "CREATE TABLE IF NOT EXISTS pitr.restore_probe (id INT PRIMARY KEY)")
    maria(lab, "db1", "INSERT INTO pitr.restore_probe SELECT seq FROM pitr.seq_1_to_100")
    want = maria(lab, "db1", "SELECT count(*), sum(id) FROM pitr.restore_probe")
    deadline = time.monotonic() + 120
    while (
        lab.run("db2", "mariadb -N -B -e 'SELECT count(*), sum(id) FROM pitr.restore_probe'").stdout.strip()
        != want
    ):
        assert time.monotonic() < deadline, "db2 did not catch up within 120 s"
        time.sleep(2)
    status = lab.check("db2", "mariadb -e 'SHOW SLAVE STATUS\\G'")
    assert "Slave_IO_Running: Yes" in status and "Slave_SQL_Running: Yes" in status, status
    assert (
        maria(lab, "db2", "SELECT count(*) FROM information_schema.tables WHERE table_name = 'probe'") == "0"
    )


def test_the_newest_backup_restored_as_a_replica_catches_up(backed_up, timings):
    with timers_stopped(backed_up, [(BACKUP, "sanoid.timer", "sanoid.service")]):
        labkit.in_parallel(
            postgresql=lambda: replica_postgresql(backed_up, timings),
            mariadb=lambda: replica_mariadb(backed_up, timings),
        )


def test_prometheus_watches_the_archive(backed_up):
    """PostgresArchiveFailing is loaded, and the counters it reads are scraped from pg1, which has
    archived (a fault that fires it takes longer than CI has: the rule's promtool tests)."""
    lab = backed_up
    wait_for(
        lambda: query(lab, 'pg_stat_archiver_archived_count{job="postgres",instance="pg1"} > 0'),
        "pg1's archived segments counted in Prometheus",
        timeout=120,
    )
    vm = lab.vms[PROMETHEUS]
    url = f"http://{vm.private_address}:9090/api/v1/rules"
    script = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=30).read().decode())"
    groups = json.loads(lab.check(PROMETHEUS, f"python3 -c {script!r}"))["data"]["groups"]
    assert "PostgresArchiveFailing" in {rule["name"] for group in groups for rule in group["rules"]}


def test_the_database_hosts_hold_no_key_to_the_backup_host(backed_up):
    for name in ("db1", "db2", "pg1", "pg2"):
        r = backed_up.run(
            name,
            "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
            " -o ConnectTimeout=10 root@10.99.0.51 true",
        )
        assert r.rc != 0, f"{name} logs in to the backup host"
        # Its account may send, not snapshot (nor destroy, rename or set: tests/infra/test_backup.py)
        r = backed_up.run(name, f"runuser -u {backup.USER} -- zfs snapshot dbpool/datastore@dbzfs-probe")
        assert r.rc != 0 and "permission denied" in (r.stdout + r.stderr).lower(), (name, r)


def test_when_the_backup_host_leaves_its_access_goes(backed_up, timings):
    leave(backed_up, timings).check()
    for name in ("db1", "db2", "pg1", "pg2"):
        assert backed_up.run(name, f"test -e {backup.AUTHORIZED_KEYS}").rc != 0, name
        allowed = backed_up.check(name, "zfs allow dbpool/datastore")
        assert backup.USER not in allowed, (name, allowed)
    accounts = backed_up.check(
        "db1", f"mariadb -N -e \"SELECT host FROM mysql.user WHERE user = '{binlogs.ACCOUNT}'\""
    )
    assert accounts.strip() == "", accounts
    for name in ("pg1", "pg2"):
        assert pg(backed_up, name, "SHOW archive_mode") == "off", name
        for path in (pgbackrest.AUTHORIZED_KEYS, pgbackrest.KEY, pgbackrest.SSHD_DROPIN):
            assert backed_up.run(name, f"test -e {path}").rc != 0, (name, path)
