"""A drive pulled from a replica's live pool (its NVMe controller removed from the guest's PCI
bus, as a failed drive drops off): the pool goes DEGRADED, the testinfra checks fail on that host,
and a converge of the degraded host still runs everything but the pool, changes nothing, and says
which drive is missing. The drive then comes back (a PCI rescan, as a drive put back in its slot)
and the pool resilvers to ONLINE."""

import time

import pytest

from tests.e2e.pyinfra_results import assert_changed_nothing
from tests.e2e.test_failover import wait_for

pytestmark = pytest.mark.e2e

NAME = "db2"


def pool_state(lab):
    out = lab.check(NAME, "zpool list -H -o health dbpool")
    return out.strip()


def test_a_pulled_drive_degrades_the_pool_and_the_converge_still_runs(converged, timings):
    lab = converged
    short = lab.vms[NAME].drive_ids[3]
    drive = f"/dev/disk/by-id/{short}"
    device = lab.check(NAME, f"basename $(readlink -f {drive})").strip()  # nvmeXn1
    # The drive's controller (a PCI function) removed from the guest, as a failed drive drops off
    # the bus. With NVMe multipath the namespace's device is its subsystem, which lists the
    # controllers.
    controllers = lab.check(NAME, f"ls -d /sys/block/{device}/device/nvme*").split()
    controllers = [c for c in controllers if c.rsplit("/", 1)[-1][4:].isdigit()]  # nvme3, not nvme3n1
    assert controllers, f"no controller of {device} on {NAME}"
    lab.check(NAME, "; ".join(f"echo 1 > {c}/device/remove" for c in controllers))
    t0 = time.monotonic()
    lab.check(NAME, "dd if=/dev/urandom of=/datastore/mysql-log/pulled bs=1M count=8 conv=fsync; sync")
    wait_for(lambda: pool_state(lab) == "DEGRADED", f"{NAME}'s pool DEGRADED after the drive went", 120)
    timings["drive pulled: pool DEGRADED after"] = time.monotonic() - t0
    assert lab.run(NAME, f"test -e {drive}").rc != 0

    checks = lab.testinfra("tests/infra/test_zfs.py")
    assert not checks.ok and f"test_pool_online[paramiko://{NAME}]" in checks.stdout, checks.stdout[-4000:]

    t0 = time.monotonic()
    result = lab.pyinfra("--limit", NAME)
    output = result.stdout + result.stderr
    timings["converge of the degraded host"] = time.monotonic() - t0
    assert "pool dbpool is DEGRADED and drive_pattern" in output and short in output, output[-4000:]
    assert_changed_nothing(result)

    t0 = time.monotonic()
    lab.check(NAME, "echo 1 > /sys/bus/pci/rescan")
    wait_for(lambda: lab.run(NAME, f"test -e {drive}").rc == 0, f"{short} back on {NAME}", 60)
    lab.check(NAME, f"zpool online dbpool {drive} && zpool clear dbpool")
    wait_for(
        lambda: lab.run(NAME, "zpool status -x dbpool").stdout.strip() == "pool 'dbpool' is healthy",
        f"{NAME}'s pool ONLINE and resilvered after the drive came back",
        300,
    )
    timings["drive back: pool ONLINE after"] = time.monotonic() - t0
    lab.check(NAME, "rm -f /datastore/mysql-log/pulled")
