"""The `bare` fixture: the lab's bare VMs (lab/lab.yaml `bare_vms`: the lab's Debian release as the
installer leaves it, no ZFS, no kernel headers) booted fresh for one session and always powered off at the
end (tests/labkit.py). Its pyinfra runs and testinfra checks use inventories/lab_install.py.

These tests are not part of `./dbzfs test`: building ZFS's DKMS module inside an emulated (TCG)
guest takes most of an hour, more than the whole CI budget. Run them with `./dbzfs test-install`.
"""

import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from lab.definition import load  # noqa: E402

from tests import labkit  # noqa: E402

INVENTORY = REPO / "inventories" / "lab_install.py"


@pytest.fixture(scope="session")
def timings():
    """Phase name -> seconds; printed at the end of the session (reported, not asserted)."""
    measured = {}
    yield measured
    if measured:
        labkit.log("==> install timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in measured.items()))


@pytest.fixture(scope="session")
def bare(request):
    labkit.set_capture(request)
    definition = load()
    with labkit.fresh(definition, list(definition.bare), INVENTORY, what="install") as booted:
        yield booted


@pytest.fixture(scope="session")
def installed(bare, timings):
    """The bare VMs after one converge of deploy.py from nothing."""
    t0 = time.monotonic()
    result = bare.pyinfra(timeout=4 * 3600)
    timings["converge from bare Debian"] = time.monotonic() - t0
    labkit.log(
        f"==> install: converge from bare Debian {timings['converge from bare Debian']:.0f} s "
        f"(rc {result.rc})"
    )
    result.check()
    return bare
