"""
operations.zfs.unmount_command against real busy mounts on this machine: tmpfs mounts held
by real processes. `zfs` itself is a small script over `umount`, since this machine has no pool;
what is under test is the waiting, the exit status and the naming of what holds the mount.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from operations.zfs import HOLDERS_SCRIPT, unmount_command

ZFS_OVER_UMOUNT = """#!/bin/bash
# zfs get -H -o value mounted|mountpoint DATASET, zfs unmount DATASET: DATASET is a path here
case "$1 $5" in
  "get mounted") mountpoint -q "$6" && echo yes || echo no ;;
  "get mountpoint") echo "$6" ;;
  "unmount ") umount "$2" ;;
  *) echo "unexpected: $*" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def mount(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("these tests mount tmpfs: run them as root (CI does)")
    mounts = []

    def make(path):
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(path)], check=True)
        mounts.append(path)
        return path

    yield make
    for path in reversed(mounts):
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def zfs_bin(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "zfs").write_text(ZFS_OVER_UMOUNT)
    (bin_dir / "zfs").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def holder(cwd, seconds):
    return subprocess.Popen(["sleep", str(seconds)], cwd=cwd)


def run_unmount(path, env, tries):
    command = unmount_command(str(path), tries=tries).get_raw_value()
    return subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True)


def test_the_holders_are_named_and_nothing_else(tmp_path, mount):
    mp = mount(tmp_path / "datastore" / "postgresql")
    other = mount(tmp_path / "datastore" / "postgresql-wal")  # a sibling whose name extends mp's
    snapshot = mount(mp / ".zfs" / "snapshot" / "autosnap")
    in_mp, in_other = holder(mp, 60), holder(other, 60)
    (mp / "open-file").write_text("")
    with open(mp / "open-file") as held_open:
        opener = subprocess.Popen(["sleep", "60"], stdin=held_open)  # cwd elsewhere: the file holds it
    try:
        out = subprocess.run(
            ["bash", "-c", f"mp={mp}\n{HOLDERS_SCRIPT}"], capture_output=True, text=True, check=True
        ).stderr
    finally:
        for p in (in_mp, in_other, opener):
            p.kill()
            p.wait()
    assert f"pid {in_mp.pid} (sleep): sleep 60" in out
    assert f"pid {opener.pid} (sleep)" in out
    assert f"pid {in_other.pid} " not in out
    assert f"mounted under it: {snapshot} (tmpfs)" in out
    assert str(other) not in out


def test_a_passing_hold_is_waited_out(tmp_path, mount, zfs_bin):
    mp = mount(tmp_path / "data")
    brief = holder(mp, 2)
    t0 = time.monotonic()
    result = run_unmount(mp, zfs_bin, tries=10)
    brief.wait()
    assert result.returncode == 0, result.stderr
    assert not os.path.ismount(mp)
    assert 1 <= time.monotonic() - t0 < 10


def test_a_hold_to_the_end_fails_naming_the_holder(tmp_path, mount, zfs_bin):
    mp = mount(tmp_path / "data")
    stuck = holder(mp, 60)
    try:
        result = run_unmount(mp, zfs_bin, tries=2)
    finally:
        stuck.kill()
        stuck.wait()
    assert result.returncode != 0
    assert f"{mp} is still busy at {mp} after 2 s; what holds it:" in result.stderr
    assert f"pid {stuck.pid} (sleep): sleep 60" in result.stderr
    assert os.path.ismount(mp)


def test_an_unmounted_dataset_is_left_alone(tmp_path, zfs_bin):
    (tmp_path / "data").mkdir()
    result = run_unmount(tmp_path / "data", zfs_bin, tries=2)
    assert result.returncode == 0 and result.stderr == ""
