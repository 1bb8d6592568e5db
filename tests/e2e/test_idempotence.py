"""A second converge of the whole lab changes nothing, and `--dry` proposes nothing."""

import time

import pytest

from tests.e2e.pyinfra_results import changed_operations, grand_total, proposed_changes

pytestmark = pytest.mark.e2e


def test_second_converge_changes_nothing(converged, timings):
    t0 = time.monotonic()
    result = converged.pyinfra()
    timings["second converge"] = time.monotonic() - t0
    output = result.stdout + result.stderr
    result.check()
    totals = grand_total(output)
    assert totals["errors"] == 0 and totals["changed"] == 0, (changed_operations(output),
                                                               output[-6000:])
    assert totals["no_change"] > 0


def test_dry_run_proposes_no_change(converged):
    result = converged.pyinfra("--dry", "--diff")
    result.check()
    assert proposed_changes(result.stdout + result.stderr) == []
