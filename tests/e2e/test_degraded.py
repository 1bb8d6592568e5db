"""Drives pulled from db2's live pool (Let's Encrypt's layout in the lab: 11 two-way mirrors and
2 hot spares, autoreplace on, ZED running) while it applies what a client commits to db1:

1. a drive pulled (qemu removes its NVMe controller from the running VM: lab/hotplug.py): the
   pool goes DEGRADED, ZED puts a hot spare in and it resilvers by itself; the testinfra pool
   checks fail on db2; a converge of db2 still runs, warns (the missing drive by id, the pool's
   state, the replace runbook) and changes nothing;
2. a new blank drive put in the same bay, of another serial than the host's drive_pattern
   matches (a replacement of another model): with autoreplace it is resilvered into the pool by
   itself and the spare goes back to AVAIL; a converge changes nothing and says that the pool
   holds a drive the inventory does not name, naming it, and to widen drive_pattern (issue 45:
   it called the new drive missing and asked for one to be put in); with drive_pattern widened
   (tests/e2e/inventories/db2_wider_pattern.py) the testinfra checks pass again and a converge
   changes nothing and warns of nothing in the pool;
3. with autoreplace off, another drive pulled and a new one put in holds a filesystem: the
   replace-drive runbook refuses it, naming the drive and what is on it; with wipe=yes it
   replaces the pulled drive and the spare goes back to AVAIL;
and through all of it the client sees no error and db2 ends with db1's rows, no data error."""

import time

import pytest

from lab import hotplug

from tests import labkit
from tests.e2e.pyinfra_results import assert_changed_nothing
from tests.e2e.test_switchover import follows, sql
from tests.labkit import REPO, runbook, wait_for

pytestmark = pytest.mark.e2e

NAME = "db2"
POOL = "dbpool"
# db2's drive_pattern widened to the drive of another serial autoreplace takes in (the first test).
WIDER = str(REPO / "tests" / "e2e" / "inventories" / "db2_wider_pattern.py")
CLIENT = (
    "CREATE DATABASE drivetest; CREATE TABLE drivetest.t (id INT AUTO_INCREMENT PRIMARY KEY, "
    "payload TEXT NOT NULL)"
)
# A client in db1's VM writing to db1 over the network: db2 applies every transaction.
WRITER = r"""cat > /root/dwriter.sh <<'SH'
#!/bin/bash
while [ ! -e /root/dwriter.stop ]; do
  if mariadb -h 10.99.0.11 -u drivetest -pdrivetest --connect-timeout=2 drivetest \
      -e "INSERT INTO t (payload) SELECT REPEAT(SHA2(seq, 256), 16) FROM seq_1_to_50" 2>>/root/dwriter.err
  then echo ok >> /root/dwriter.log; else echo failed >> /root/dwriter.log; fi
done
echo done >> /root/dwriter.log
SH
rm -f /root/dwriter.stop /root/dwriter.log /root/dwriter.err
setsid nohup bash /root/dwriter.sh >/dev/null 2>&1 < /dev/null &"""
STOP = (
    "touch /root/dwriter.stop; for i in $(seq 60); do grep -qx done /root/dwriter.log && break; sleep 1; done"
)
USER = (
    "CREATE USER 'drivetest'@'10.99.0.0/255.255.255.0' IDENTIFIED BY 'drivetest'; "
    "GRANT INSERT, SELECT ON drivetest.* TO 'drivetest'@'10.99.0.0/255.255.255.0'"
)


def status(lab):
    return lab.check(NAME, f"zpool status -P {POOL}")


def health(lab):
    return lab.check(NAME, f"zpool list -H -o health {POOL}").strip()


def spares(lab):
    """{spare by-id path: state} of db2's pool."""
    out = status(lab)
    section = out.split("\tspares\n", 1)[1].split("\n\n", 1)[0] if "\tspares\n" in out else ""
    found = {}
    for line in section.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].startswith("/dev/"):
            found[fields[0].removesuffix("-part1")] = fields[1]
    return found


def resilvering(lab):
    return "resilver in progress" in status(lab)


def healthy(lab):
    return lab.run(NAME, f"zpool status -x {POOL}").stdout.strip() == f"pool '{POOL}' is healthy"


def in_pool(lab, drive):
    return f"{drive}-part1 " in status(lab) or f"{drive} " in status(lab)


def by_id(serial):
    return f"/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_{serial}"


def client_acks(lab):
    lines = lab.check("db1", "cat /root/dwriter.log 2>/dev/null || true").split()
    return lines.count("ok"), lines.count("failed")


def wait_for_more_writes(lab, more=3):
    start = client_acks(lab)[0]
    wait_for(lambda: client_acks(lab)[0] >= start + more, "the client's writes going on", 120)


def pull(lab, index, timings, what):
    vm = lab.definition.vm(NAME)
    t0 = time.monotonic()
    slot = hotplug.pull_drive(vm, index, log=labkit.log)
    wait_for(lambda: health(lab) == "DEGRADED", f"{NAME}'s pool DEGRADED after the drive went", 120)
    timings[f"{what}: pool DEGRADED after"] = time.monotonic() - t0
    wait_for(lambda: "INUSE" in spares(lab).values(), f"a hot spare in use on {NAME} (ZED)", 180)
    timings[f"{what}: a hot spare in (ZED) after"] = time.monotonic() - t0
    wait_for(lambda: not resilvering(lab), f"the spare resilvered on {NAME}", 600)
    timings[f"{what}: the spare resilvered after"] = time.monotonic() - t0
    assert "errors: No known data errors" in status(lab), status(lab)
    return slot


@pytest.fixture(scope="module")
def client(converged):
    lab = converged
    sql(lab, "db1", f"{CLIENT}; {USER}")
    lab.check("db1", WRITER)
    wait_for(lambda: client_acks(lab)[0] >= 3, "the client writing to db1", 120)
    yield lab
    lab.check("db1", STOP)
    ok, failed = client_acks(lab)
    errors = lab.check("db1", "cat /root/dwriter.err 2>/dev/null || true")
    position = sql(lab, "db1", "SELECT @@global.gtid_binlog_pos")
    assert sql(lab, NAME, f"SELECT MASTER_GTID_WAIT('{position}', 300)") == "0"
    count = "SELECT COUNT(*), SUM(CRC32(payload)) FROM drivetest.t"
    assert sql(lab, "db1", count) == sql(lab, NAME, count)
    sql(lab, "db1", "DROP DATABASE drivetest; DROP USER 'drivetest'@'10.99.0.0/255.255.255.0'")
    lab.check("db1", "rm -f /root/dwriter.sh /root/dwriter.log /root/dwriter.err /root/dwriter.stop")
    assert failed == 0 and ok > 0, f"the client saw {failed} failed transactions of {ok + failed}:\n{errors}"


def test_a_pulled_drive_is_replaced_by_a_spare_then_by_a_new_drive_in_its_bay(client, timings):
    lab = client
    vm = lab.definition.vm(NAME)
    assert lab.check(NAME, f"zpool get -H -o value autoreplace {POOL}").strip() == "on"
    assert lab.check(NAME, "systemctl is-active zfs-zed").strip() == "active"
    assert set(spares(lab).values()) == {"AVAIL"} and len(spares(lab)) == 2
    pulled = vm.drive_ids[3]
    slot = pull(lab, 3, timings, "drive pulled")
    assert lab.run(NAME, f"test -e /dev/disk/by-id/{pulled}").rc != 0
    wait_for_more_writes(lab)

    checks = lab.testinfra("tests/infra/test_zfs.py", hosts=[NAME])
    assert not checks.ok and f"test_pool_online[paramiko://{NAME}]" in checks.stdout, checks.stdout[-4000:]

    t0 = time.monotonic()
    result = lab.pyinfra("--limit", NAME)
    output = result.stdout + result.stderr
    timings["converge of the degraded host"] = time.monotonic() - t0
    assert f"pool {POOL} is DEGRADED and drive_pattern" in output and pulled in output, output[-4000:]
    assert "runbooks/replace_drive.py" in output, output[-4000:]
    assert_changed_nothing(result)

    t0 = time.monotonic()
    # A serial the host's drive_pattern (db2-nvme??) does not match: a replacement of another model.
    new = "db2-other24"
    hotplug.insert_drive(vm, 3, slot, new, log=labkit.log)
    wait_for(lambda: in_pool(lab, by_id(new)), f"{new} taken into the pool (autoreplace)", 180)
    timings["new drive in the bay: in the pool after"] = time.monotonic() - t0
    wait_for(lambda: healthy(lab) and set(spares(lab).values()) == {"AVAIL"}, "ONLINE, spares AVAIL", 600)
    timings["new drive in the bay: resilvered, spare AVAIL after"] = time.monotonic() - t0
    wait_for_more_writes(lab)

    result = lab.pyinfra("--limit", NAME)
    output = result.stdout + result.stderr
    warned = [line for line in output.splitlines() if f"pool {POOL} is ONLINE and drive_pattern" in line]
    assert warned, output[-4000:]
    warning = warned[0]
    assert f"the pool holds 1 drive(s) the inventory does not name: {by_id(new)} (" in warning, warning
    assert f"widen drive_pattern to match {by_id(new)} too" in warning, warning
    assert "missing" not in warning and "replace_drive.py" not in warning, warning
    assert_changed_nothing(result)

    checks = lab.testinfra("tests/infra/test_zfs.py", hosts=[NAME], inventory=WIDER)
    assert checks.ok, checks.stdout[-4000:]
    result = lab.pyinfra("--limit", NAME, inventory=WIDER)
    output = result.stdout + result.stderr
    for said in ("does not name", "missing from /dev/disk/by-id", "does not hold", "replace_drive.py"):
        assert said not in output, output[-4000:]
    assert_changed_nothing(result)


def test_without_autoreplace_the_runbook_replaces_a_drive_refusing_one_that_holds_data(client, timings):
    lab = client
    vm = lab.definition.vm(NAME)
    lab.check(NAME, f"zpool set autoreplace=off {POOL}")
    try:
        pulled = vm.drive_ids[5]
        slot = pull(lab, 5, timings, "second drive pulled")
        new = "db2-nvme25"
        hotplug.insert_drive(vm, 5, slot, new, log=labkit.log)
        wait_for(lambda: lab.run(NAME, f"test -e {by_id(new)}").rc == 0, f"{new} seen by {NAME}", 60)
        time.sleep(20)
        assert not in_pool(lab, by_id(new)), "autoreplace is off, yet the new drive was taken in"
        lab.check(NAME, f"mkfs.ext4 -q {by_id(new)}")

        data = ("host=db2", f"old=/dev/disk/by-id/{pulled}", f"new={by_id(new)}")
        result, output = runbook(lab, "runbooks/replace_drive.py", *data, limit=NAME)
        assert result.rc != 0, output[-3000:]
        assert f"drive {by_id(new)}" in output and "ext4 filesystem" in output, output[-3000:]
        assert "To reuse it, replace with wipe" in output, output[-3000:]
        assert not in_pool(lab, by_id(new))

        t0 = time.monotonic()
        result, output = runbook(lab, "runbooks/replace_drive.py", *data, "wipe=yes", limit=NAME)
        assert result.rc == 0, output[-3000:]
        timings["replace-drive runbook, resilver included"] = time.monotonic() - t0
        assert f"==> {NAME}: {by_id(new)} in pool {POOL} in place of /dev/disk/by-id/{pulled}" in output
        wait_for(lambda: healthy(lab) and set(spares(lab).values()) == {"AVAIL"}, "ONLINE, spares AVAIL", 300)
    finally:
        lab.check(NAME, f"zpool set autoreplace=on {POOL}")
    assert lab.testinfra("tests/infra/test_zfs.py", hosts=[NAME], inventory=WIDER).ok  # db2-other24
    assert follows(lab, NAME, "db1")[0]
