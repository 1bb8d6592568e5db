"""The release upgrade's lab: the lab's MariaDB group (db1, db2) on Debian 12, with ZFS from the
lab's module repository (DBZFS_LAB_ZFS_INSTALL=prebuilt: no DKMS build for the new kernel under
emulation), converged once with an inventory of that group alone (INVENTORY). `./dbzfs
test-upgrade` sets the environment and builds Debian 13's images first, so that the repository
carries the new kernel's module too (lab/module_repo.py). Not part of `./dbzfs test`: release
upgrades under TCG take hours."""

import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from lab.definition import SUITE_ENV, ZFS_ENV, load  # noqa: E402

from tests import labkit  # noqa: E402

INVENTORY = REPO / ".lab" / "upgrade-inventory.py"
GROUP = ("db1", "db2")


def inventory_text() -> str:
    lab = REPO / "inventories" / "lab.py"
    return (
        '"""tests/upgrade: the lab\'s MariaDB group alone (inventories/lab.py\'s)."""\n\nimport runpy\n\n'
        f"mariadb = runpy.run_path({str(lab)!r})['mariadb']\n"
    )


@pytest.fixture(scope="session")
def timings():
    measured = {}
    yield measured
    if measured:
        labkit.log("==> upgrade timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in measured.items()))


@pytest.fixture(scope="session")
def on_12(request, timings):
    if os.environ.get(SUITE_ENV) != "bookworm" or os.environ.get(ZFS_ENV) != "prebuilt":
        pytest.fail(
            f"run these with ./dbzfs test-upgrade ({SUITE_ENV}=bookworm, {ZFS_ENV}=prebuilt)", pytrace=False
        )
    labkit.set_capture(request)
    definition = load()
    INVENTORY.parent.mkdir(exist_ok=True)
    INVENTORY.write_text(inventory_text())
    with labkit.fresh(definition, list(GROUP), INVENTORY, what="upgrade") as lab:
        t0 = time.monotonic()
        lab.pyinfra(timeout=3 * 3600).check()
        timings["first converge on Debian 12"] = time.monotonic() - t0
        yield lab
