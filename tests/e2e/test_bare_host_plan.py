"""A bare Debian 12 VM (no ZFS, no kernel headers, no backports): `deploy.py --dry` plans the
ZFS install and everything after it, and changes nothing. (The install itself compiles ZFS's
module in the guest, most of an hour under TCG: tests/install, `./dbzfs test-install`.)"""

import time

import pytest

from lab.definition import load
from tests import labkit
from tests.bare_host import BARE_STATE, assert_proposes_the_install, dry_run

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bare(request):
    labkit.set_capture(request)
    definition = load()
    with labkit.fresh(definition, list(definition.bare), labkit.REPO / "inventories" / "lab_install.py",
                      what="bare host") as booted:
        yield booted


def test_the_vm_starts_bare(bare):
    for name in bare.names:
        assert bare.check(name, BARE_STATE).split() == [], name


def test_dry_run_plans_the_install_and_changes_nothing(bare, timings):
    t0 = time.monotonic()
    rc, output, proposed = dry_run(bare)
    timings["--dry on bare Debian"] = time.monotonic() - t0
    assert rc == 0, output[-6000:]
    assert_proposes_the_install(proposed, output)
    assert any("MariaDB server and client from Debian" in p for p in proposed), proposed
    for name in bare.names:
        assert bare.check(name, BARE_STATE).split() == [], name
