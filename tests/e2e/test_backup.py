"""Off-host copies on the lab (roles/backup.py): backup1 (lab.yaml backup_vms) boots and a converge
with inventories/lab_backup.py lets its key in on the database hosts (send only, from its address
only), converges it and runs its first pull, which copies the snapshots of the hosts that take them
(the replicas db2 and pg2); tests/infra/test_backup.py passes on it and a second converge changes
nothing. Then, while each primary commits rows, its replica takes one more snapshot, and a pull
sends only that one, with the position it holds. Last, backup1 leaves: a converge with the lab's
own inventory takes its key and its permission away again."""

import re
import threading
import time

import pytest

from roles import backup

from tests import labkit
from tests.e2e.pyinfra_results import assert_changed_nothing
from tests.labkit import REPO

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


@pytest.fixture(scope="module")
def backed_up(converged, timings):
    t0 = time.monotonic()
    converged.join(BACKUP)
    timings["backup1 boots"] = time.monotonic() - t0
    try:
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
    that holds none (a primary of a fresh lab: they are taken on the replicas) has no copy."""
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
    result = backed_up.testinfra("tests/infra/test_backup.py", hosts=[BACKUP], inventory=INVENTORY)
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and " failed" not in result.stdout


def test_a_second_converge_with_the_backup_host_changes_nothing(backed_up, timings):
    t0 = time.monotonic()
    result = backed_up.pyinfra(inventory=INVENTORY)
    timings["second converge with backup1"] = time.monotonic() - t0
    assert_changed_nothing(result)


def test_a_pull_sends_only_the_new_snapshot_with_its_position(backed_up, timings):
    for engine, spec in ENGINES.items():
        replica = spec["replica"]
        copy = f"dbpool/backup/{engine}/{replica}/data"
        before = guids(backed_up, BACKUP, copy)
        writer = threading.Thread(target=lambda spec=spec: backed_up.check(spec["primary"], spec["writes"]))
        writer.start()
        # A kind the retention does not keep: due at once, pruned by the next sanoid run.
        datasets = " ".join(f"--dataset {d}" for d in spec["datasets"])
        backed_up.check(
            replica,
            f"python3 {SNAPSHOT} --engine {engine} --when replica {datasets} --keep frequently=1"
            " --metrics /run/dbzfs-backup-test.prom",
        )
        writer.join()
        t0 = time.monotonic()
        out = backed_up.check(BACKUP, f"{PULL} && journalctl -o cat -n 20 -u {backup.UNIT}")
        timings[f"incremental pull ({engine})"] = time.monotonic() - t0
        after = guids(backed_up, BACKUP, copy)
        assert set(before) <= set(after) and len(after) > len(before), (before, after, out)
        taken = backed_up.check(
            replica, f"zfs list -H -t snapshot -o name -s createtxg -d 1 {spec['datasets'][0]} | tail -n 1"
        )
        snapshot = taken.split("@", 1)[1].strip()
        assert snapshot.endswith("_frequently"), taken
        position = {
            name: backed_up.check(
                name, f"zfs get -H -o value {spec['property']} {dataset}@{snapshot}"
            ).strip()
            for name, dataset in ((replica, spec["datasets"][0]), (BACKUP, copy))
        }
        assert position[BACKUP] == position[replica] and position[BACKUP] not in ("", "-"), position
        written = backed_up.check(BACKUP, f"zfs get -Hp -o value written {copy}@{snapshot}").strip()
        labkit.log(f"==> incremental pull ({engine}): {int(written) / 1024:.0f} KiB written for {snapshot}")


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
