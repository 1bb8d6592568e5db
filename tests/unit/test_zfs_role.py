"""The storage role's pool step (roles/zfs.py): which drives it hands zpool.pool, and a host whose
existing pool is short of a drive still converging everything but the pool."""

import logging

import pytest
from pyinfra.api.exceptions import PyinfraError
from pyinfra.context import ctx_host

from facts.drives import BlockDevices, DrivesByPattern
from facts.zfs import ZpoolTopology
from model.hostdata import HostConfig
from roles import zfs

from tests.unit.conftest import host_data
from tests.unit.fact_stubs import FakeHost, fixture_lines

PATTERN = "nvme-INTEL_SSDPE2KE064T8_*"


def drive(n):
    return f"/dev/disk/by-id/nvme-INTEL_SSDPE2KE064T8_PHLN{n:04d}00V6P4BGN"


ALL_24 = [drive(n) for n in range(1, 25)]
# The degraded fixture's drive 8 is UNAVAIL (shown by guid); drive 1 is FAULTED but still there.
WITHOUT_8 = [d for d in ALL_24 if d != drive(8)]
DEGRADED = ZpoolTopology().process(fixture_lines("zfs/zpool_status_degraded.txt"))
HEALTHY = ZpoolTopology().process(fixture_lines("zfs/zpool_status_healthy.txt"))


def db1(**overrides):
    data = host_data(
        engine="mariadb",
        role="primary",
        server_id=1,
        hardware={"ram_bytes": 4 * 1024**3, "cpus": 2},
        replication_address="10.99.0.11",
        drive_pattern=PATTERN,
        drive_count=24,
        zpool_spares=2,
    )
    data.update(overrides)
    return HostConfig.from_data("db1", data)


@pytest.fixture
def pool_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(zfs.zpool, "pool", lambda **kwargs: calls.append(kwargs))
    return calls


def devices(*present):
    """BlockDevices' stub: the drives that are there (by any of their names) resolve."""
    there = {path: f"/dev/nvme{n}n1" for n, path in enumerate(dict.fromkeys(p for ps in present for p in ps))}
    return lambda paths: {path: there[path] for path in paths if path in there}


def run_pool(found, topology, cfg=None, present=()):
    host = FakeHost(
        {DrivesByPattern: found, ZpoolTopology: topology, BlockDevices: devices(found or [], present)}
    )
    with ctx_host.use(host):
        zfs.pool._inner(cfg or db1())
    return host


def warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_all_drives_found_hands_the_layout_to_zpool_pool(pool_calls):
    run_pool(ALL_24, HEALTHY)
    [call] = pool_calls
    assert call["pool_name"] == "dbpool"
    assert call["vdevs"] == [[drive(2 * i + 1), drive(2 * i + 2)] for i in range(11)]
    assert call["spares"] == [drive(23), drive(24)]


def test_existing_pool_short_of_a_drive_is_left_as_it_is(pool_calls, caplog):
    caplog.set_level(logging.WARNING, logger="pyinfra")
    run_pool(WITHOUT_8, DEGRADED)
    assert pool_calls == []
    [warning] = warnings(caplog)
    assert warning.startswith(
        f"[db1.example.net] pool dbpool is DEGRADED and drive_pattern {PATTERN!r} matches 23 drive(s), "
        f"drive_count is 24; pool drives missing from /dev/disk/by-id: {drive(8)}; zpool status: "
    )
    assert f"{drive(1)} is FAULTED (too many errors)" in warning
    assert f"{drive(8)} is UNAVAIL (was {drive(8)}-part1)" in warning
    assert warning.endswith(
        ". The pool is left as it is; put a new drive in and replace the missing one: pyinfra "
        "INVENTORY runbooks/replace_drive.py --data host=db1.example.net --data old=OLD --data new=NEW "
        "(docs/runbooks/replace_drive.md)."
    )


def test_missing_spare_is_named_too(pool_calls, caplog):
    caplog.set_level(logging.WARNING, logger="pyinfra")
    run_pool(ALL_24[:-1], HEALTHY)
    assert pool_calls == []
    [warning] = warnings(caplog)
    assert "pool dbpool is ONLINE " in warning
    assert f"missing from /dev/disk/by-id: {drive(24)}. The pool is left" in warning


# Issue 45: drive 8 pulled, and a drive of another model put in its bay, which ZED's autoreplace
# resilvered into the pool: the pool is ONLINE with its spares AVAIL, drive_pattern matches 23.
OTHER_MODEL = "/dev/disk/by-id/nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0T500123"
AUTOREPLACED = ZpoolTopology().process(
    [
        line.replace(f"{drive(8)}-part1", f"{OTHER_MODEL}-part1")
        for line in fixture_lines("zfs/zpool_status_healthy.txt")
    ]
)


def test_a_drive_autoreplace_took_in_outside_drive_pattern_is_named_not_called_missing(pool_calls, caplog):
    caplog.set_level(logging.WARNING, logger="pyinfra")
    host = run_pool(WITHOUT_8, AUTOREPLACED, present=[OTHER_MODEL])
    assert pool_calls == []
    [warning] = warnings(caplog)
    assert warning == (
        f"[db1.example.net] pool dbpool is ONLINE and drive_pattern {PATTERN!r} matches 23 drive(s), "
        f"drive_count is 24; the pool holds 1 drive(s) the inventory does not name: {OTHER_MODEL} "
        "(/dev/nvme23n1) (there and in the pool, outside drive_pattern: e.g. a replacement drive of "
        "another model or serial that autoreplace took into a failed drive's bay). The pool is left "
        "as it is; no drive needs replacing for that: change the host's inventory so that it names the "
        f"pool's drives: widen drive_pattern to match {OTHER_MODEL} too, or list the pool's drives in "
        "`drives` (zpool status -P dbpool) instead of drive_pattern and drive_count "
        "(docs/runbooks/replace_drive.md)."
    )
    assert "missing" not in warning and "put a new drive in" not in warning
    # Whether the pool's drives outside the pattern are there is asked of the host, once.
    [(_, _, asked)] = [call for call in host.fact_calls if call[0] is BlockDevices]
    assert asked["paths"][0] == OTHER_MODEL


def test_a_drive_truly_gone_is_still_called_missing(pool_calls, caplog):
    caplog.set_level(logging.WARNING, logger="pyinfra")
    run_pool(WITHOUT_8, DEGRADED)
    [warning] = warnings(caplog)
    assert f"pool drives missing from /dev/disk/by-id: {drive(8)}; " in warning
    assert "does not name" not in warning and "widen drive_pattern" not in warning
    assert (
        "put a new drive in and replace the missing one: pyinfra INVENTORY runbooks/replace_drive.py"
        in warning
    )


def test_a_drive_outside_the_pattern_and_one_gone_are_both_said(pool_calls, caplog):
    """Drive 8 replaced by another model, and drive 3's link gone: each is said for what it is."""
    caplog.set_level(logging.WARNING, logger="pyinfra")
    found = [d for d in WITHOUT_8 if d != drive(3)]
    run_pool(found, AUTOREPLACED, present=[OTHER_MODEL])
    [warning] = warnings(caplog)
    assert f"the pool holds 1 drive(s) the inventory does not name: {OTHER_MODEL} (" in warning
    assert f"; pool drives missing from /dev/disk/by-id: {drive(3)}." in warning
    assert f"widen drive_pattern to match {OTHER_MODEL} too" in warning
    assert (
        "and put a new drive in for the missing one: pyinfra INVENTORY runbooks/replace_drive.py" in warning
    )


def test_no_pool_and_23_drives_is_refused_as_before(pool_calls):
    with pytest.raises(PyinfraError) as error:
        run_pool(WITHOUT_8, None)
    assert str(error.value) == (
        f"db1.example.net: drive_pattern {PATTERN!r} matches 23 drive(s) under /dev/disk/by-id, "
        "drive_count is 24 (nvme-INTEL_SSDPE2KE064T8_PHLN000100V6P4BGN, "
        "nvme-INTEL_SSDPE2KE064T8_PHLN000200V6P4BGN, nvme-INTEL_SSDPE2KE064T8_PHLN000300V6P4BGN, "
        "nvme-INTEL_SSDPE2KE064T8_PHLN000400V6P4BGN, nvme-INTEL_SSDPE2KE064T8_PHLN000500V6P4BGN, "
        "nvme-INTEL_SSDPE2KE064T8_PHLN000600V6P4BGN ...). Check the pattern (ls -l /dev/disk/by-id) "
        "or the hardware; nothing was changed."
    )
    assert pool_calls == []


def test_existing_pool_and_25_drives_is_refused(pool_calls):
    with pytest.raises(PyinfraError, match=r"matches 25 drive\(s\) under /dev/disk/by-id, drive_count is 24"):
        run_pool([*ALL_24, drive(25)], HEALTHY)
    assert pool_calls == []


def test_existing_pool_and_no_drive_found_is_refused(pool_calls):
    with pytest.raises(PyinfraError, match=r"matches 0 drive\(s\) .*drive_count is 24 \(none\)"):
        run_pool([], DEGRADED)
    assert pool_calls == []


def test_explicit_drive_list_is_used_as_given(pool_calls):
    drives = ALL_24[:4]
    host = run_pool(None, None, db1(drive_pattern=None, drive_count=None, drives=drives, zpool_spares=0))
    [call] = pool_calls
    assert call["vdevs"] == [drives[:2], drives[2:]]
    assert host.fact_calls == []


def test_storage_converges_the_rest_when_the_pool_is_left(monkeypatch, pool_calls, caplog):
    cfg = db1()
    done = []
    monkeypatch.setattr(zfs.engine, "host_config", lambda: cfg)
    monkeypatch.setattr(zfs, "pool", zfs.pool._inner)
    for step in ("datasets", "module_parameters", "scrub_and_capacity"):
        monkeypatch.setattr(zfs, step, lambda cfg, step=step: done.append(step))
    facts = {DrivesByPattern: WITHOUT_8, ZpoolTopology: DEGRADED, BlockDevices: devices(WITHOUT_8)}
    with ctx_host.use(FakeHost(facts)):
        zfs.storage._inner()
    assert pool_calls == []
    assert done == ["datasets", "module_parameters", "scrub_and_capacity"]


@pytest.mark.parametrize(
    ("autoreplace", "multipath", "warned"),
    [("on", "Y\n", True), ("on", "N\n", False), ("on", "", False), ("off", "Y\n", False)],
)
def test_multipath_defeats_autoreplace(autoreplace, multipath, warned):
    """A kernel with NVMe multipath on (no nvme_core loaded: "") keeps ZED from matching a new
    drive to a failed drive's bay: the converge says so when the data asks for autoreplace."""
    with ctx_host.use(FakeHost({})):
        warning = zfs.multipath_warning(db1(zpool_autoreplace=autoreplace), multipath)
    assert bool(warning) == warned
    if warned:
        assert "nvme_core.multipath=N" in warning and "runbooks/replace_drive.py" in warning
