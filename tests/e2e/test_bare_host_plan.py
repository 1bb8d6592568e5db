"""The lab's VMs that start as bare Debian servers (lab.yaml `zfs_install: prebuilt`: the bare
image, no ZFS, no kernel headers, no backports): before the first converge, `deploy.py --dry`
plans their ZFS install from the lab's module repository, and everything after it, and changes
nothing. (The DKMS install compiles ZFS's module in the guest, most of an hour under TCG: tests/install,
`./dbzfs test-install`.)"""

import pytest

from tests.bare_host import check_dry_run_plans_the_install, check_starts_bare, prebuilt

pytestmark = pytest.mark.e2e


def test_the_prebuilt_install_vms_start_bare(lab):
    check_starts_bare(lab, prebuilt(lab))


def test_dry_run_plans_the_prebuilt_install_and_changes_nothing(lab, timings):
    check_dry_run_plans_the_install(lab, timings, how="prebuilt", names=prebuilt(lab))
