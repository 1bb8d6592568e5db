"""deploy.py converged on the Vagrantfile's VM through an inventory built from `vagrant ssh-config`,
with ZFS prebuilt: testinfra green and a second converge with no change. `./dbzfs test-long` and
`./dbzfs test-vagrant` run it after test_boot.py (on the same VM); `./dbzfs test` does not (the lab's
first converge proves the same deploy on the same Debian; this proves the Vagrant path)."""

import time

import pytest

from tests.e2e.pyinfra_results import assert_changed_nothing

pytestmark = [pytest.mark.e2e, pytest.mark.vagrant]


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
