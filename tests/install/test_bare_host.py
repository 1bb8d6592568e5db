"""deploy.py on a bare Debian server: the storage role installs ZFS (the release's zfs-dkms, kernel headers,
DKMS build for the running kernel), loads it now and at boot, and everything after it converges
as on the lab's ready-made image; a second converge changes nothing; a power cycle brings it all
back with no deploy in between."""

import re
import time

import pytest

from lab import control
from roles import zfs_packages

from tests import labkit
from tests.bare_host import check_dry_run_plans_the_install, check_starts_bare
from tests.e2e.pyinfra_results import assert_changed_nothing
from tests.labkit import log

pytestmark = pytest.mark.install


def test_the_vms_start_bare(bare):
    check_starts_bare(bare)


def test_dry_run_plans_the_install_and_changes_nothing(bare, timings):
    check_dry_run_plans_the_install(bare, timings)


def test_converge_from_bare_installs_zfs_for_the_running_kernel(installed):
    for name in installed.names:
        kernel = installed.check(name, "uname -r").strip()
        versions = dict(
            line.split()
            for line in installed.check(
                name,
                "dpkg-query -W -f '${Package} ${Version}\\n' zfsutils-linux zfs-dkms linux-image-amd64 "
                f"linux-headers-amd64 linux-headers-{kernel}",
            ).splitlines()
        )
        assert "bpo12" in versions["zfsutils-linux"] and versions["zfs-dkms"] == versions["zfsutils-linux"]
        # headers from the kernel's own release (not 6.12 from backports)
        assert versions["linux-headers-amd64"] == versions["linux-image-amd64"], versions
        assert f"linux-headers-{kernel}" in versions
        dkms = installed.check(name, "dkms status zfs")
        assert re.search(rf"zfs/[\d.]+, {re.escape(kernel)}, x86_64: installed", dkms), dkms
        loaded = installed.check(name, "cat /sys/module/zfs/version").strip()
        on_disk = installed.check(name, "modinfo -F version zfs").strip()
        assert loaded == on_disk and versions["zfsutils-linux"].startswith(loaded.split("-")[0]), (
            loaded,
            on_disk,
        )
        assert installed.check(name, "systemctl is-enabled zfs-load-module.service").strip() == "enabled"
        source = zfs_packages.zfs_source(labkit.lab_release())
        assert source.line.split(" ", 2)[2] in installed.check(name, f"cat {source.path}")


def test_testinfra_checks_pass(installed):
    result = installed.testinfra("tests/infra")
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and " failed" not in result.stdout


def test_second_converge_changes_nothing(installed, timings):
    t0 = time.monotonic()
    result = installed.pyinfra()
    timings["second converge"] = time.monotonic() - t0
    assert_changed_nothing(result)


def test_power_cycle_brings_zfs_pool_and_server_back(installed, timings):
    t0 = time.monotonic()
    control.down(installed.definition, installed.names, log=log)
    control.up(installed.definition, installed.names, log=log)
    timings["power cycle"] = time.monotonic() - t0
    for name in installed.names:
        assert installed.check(name, "cat /sys/module/zfs/version").strip()
        assert installed.check(name, "zpool list -H -o name,health").split() == ["dbpool", "ONLINE"]
        mounted = installed.check(name, "zfs list -H -o name,mounted -t filesystem")
        assert "dbpool/datastore/mysql\tyes" in mounted, mounted
        # module parameters from /etc/modprobe.d/zfs.conf, applied at load
        conf = installed.check(name, "cat /etc/modprobe.d/zfs.conf")
        arc = re.search(r"zfs_arc_max=(\d+)", conf).group(1)
        assert installed.check(name, "cat /sys/module/zfs/parameters/zfs_arc_max").strip() == arc
        assert installed.check(name, "systemctl is-active mariadb").strip() == "active"
    result = installed.testinfra("tests/infra")
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
