"""The safety rule on a real VM: a drive holding a filesystem stops pool creation, and no drive
is changed. Runs last: it wipes pg2's drives."""

import pytest

pytestmark = pytest.mark.e2e

SIGNATURES = ("for d in /dev/disk/by-id/nvme-QEMU*; do case $d in *-part*) continue;; esac; "
              "printf '%s %s\\n' $d \"$(blkid -p -o value -s TYPE $d)\"; done")


def test_refuses_a_drive_holding_a_filesystem(converged):
    lab = converged
    victim = "pg2"
    lab.reset_drives(victim)
    target = "/dev/disk/by-id/" + lab.vms[victim].drive_ids[5]
    lab.check(victim, f"mkfs.ext4 -q -F {target}")
    before = lab.check(victim, SIGNATURES)
    result = lab.pyinfra("--limit", victim)
    output = result.stdout + result.stderr
    assert not result.ok, output[-4000:]
    assert target in output and "ext4" in output, output[-4000:]
    assert "wipe_drives" in output  # the message says how to opt in
    assert lab.run(victim, "zpool list -H -o name dbpool").rc != 0  # no pool was created
    after = lab.check(victim, SIGNATURES)
    assert after == before  # the ext4 is still there, every other drive still blank
    assert f"{target} ext4" in after
    assert after.count(" ext4") == 1
