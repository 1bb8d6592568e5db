"""A bare Debian 12 VM (no ZFS, no kernel headers, no backports): `deploy.py --dry` plans the
ZFS install and everything after it, and changes nothing. (The install itself compiles ZFS's
module in the guest, most of an hour under TCG: tests/install, `./dbzfs test-install`.)"""

import pytest

from lab.definition import load

from tests import labkit
from tests.bare_host import check_dry_run_plans_the_install, check_starts_bare

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bare(request):
    labkit.set_capture(request)
    definition = load()
    with labkit.fresh(
        definition, list(definition.bare), labkit.REPO / "inventories" / "lab_install.py", what="bare host"
    ) as booted:
        yield booted


def test_the_vm_starts_bare(bare):
    check_starts_bare(bare)


def test_dry_run_plans_the_install_and_changes_nothing(bare, timings):
    check_dry_run_plans_the_install(bare, timings)
