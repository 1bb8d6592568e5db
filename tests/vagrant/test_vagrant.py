"""The Vagrantfile for real (libvirt): one VM up through `vagrant up`, its 24 NVMe drives by id
with the lab's serials, deploy.py converged on it with ZFS prebuilt, testinfra green, and a
second converge with no change."""

import time

import pytest

from tests.e2e.pyinfra_results import assert_changed_nothing
from tests.vagrant.conftest import NAME, on_vm

pytestmark = pytest.mark.vagrant


def test_the_vm_has_its_24_nvme_drives_by_id_with_the_lab_serials(vagrant_vm):
    listed = on_vm(vagrant_vm, "ls /dev/disk/by-id")
    assert listed.returncode == 0, listed.stderr
    wanted = [d.rsplit("/", 1)[-1] for d in vagrant_vm.definition.vm(NAME).drive_ids]
    assert len(wanted) == 24 and set(wanted) <= set(listed.stdout.split()), listed.stdout


def test_apt_reaches_only_the_hosts_cache(vagrant_vm):
    direct = on_vm(vagrant_vm, "timeout 10 bash -c 'exec 3<>/dev/tcp/151.101.2.132/80' && echo reached")
    assert "reached" not in direct.stdout, "the guest reached an address beyond the host"
    proxied = on_vm(vagrant_vm, "apt-get -o Debug::NoLocking=1 update -qq && echo ok", timeout=900)
    assert proxied.returncode == 0 and "ok" in proxied.stdout, proxied.stdout + proxied.stderr


def test_deploy_converges_checks_pass_and_a_second_converge_changes_nothing(vagrant_vm, timings):
    t0 = time.monotonic()
    first = vagrant_vm.pyinfra(timeout=3600)
    timings["converge (ZFS prebuilt, MariaDB, monitoring)"] = time.monotonic() - t0
    assert first.rc == 0, (first.stdout + first.stderr)[-6000:]
    t0 = time.monotonic()
    checks = vagrant_vm.testinfra()
    timings["testinfra checks"] = time.monotonic() - t0
    assert checks.ok, checks.stdout[-6000:] + checks.stderr[-2000:]
    assert " failed" not in checks.stdout and " skipped" not in checks.stdout
    t0 = time.monotonic()
    assert_changed_nothing(vagrant_vm.pyinfra())
    timings["second converge"] = time.monotonic() - t0
