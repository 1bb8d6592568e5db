"""The safety rule on a real VM: a drive holding a filesystem stops pool creation, and no drive
is changed. Runs last: it wipes pg2's drives."""

import pytest

pytestmark = pytest.mark.e2e

# Each drive once (the pattern leaves out the namespace aliases ..._1 and -partN links) with
# the signature blkid finds on it, if any.
SIGNATURES = (
    "for d in /dev/disk/by-id/{pattern}; do printf '%s %s\\n' $d \"$(blkid -p -o value -s TYPE $d)\"; done"
)


def test_refuses_a_drive_holding_a_filesystem(converged):
    lab = converged
    victim = "pg2"
    lab.reset_drives(victim)
    target = "/dev/disk/by-id/" + lab.vms[victim].drive_ids[5]
    lab.check(victim, f"mkfs.ext4 -q -F {target}")
    signatures = SIGNATURES.format(pattern=lab.vms[victim].drive_pattern)
    before = lab.check(victim, signatures)
    result = lab.pyinfra("--limit", victim)
    output = result.stdout + result.stderr
    assert not result.ok, output[-4000:]
    assert target in output and "ext4" in output, output[-4000:]
    assert "wipe_drives" in output  # the message says how to opt in
    assert lab.run(victim, "zpool list -H -o name dbpool").rc != 0  # no pool was created
    after = lab.check(victim, signatures)
    assert after == before  # the ext4 is still there, every other drive still blank
    assert f"{target} ext4" in after
    assert after.count(" ext4") == 1
