"""A second converge of the whole lab changes nothing, even a week later (the apt lists made to
look old first), and `--dry` proposes nothing."""

import time

import pytest

from tests.e2e.pyinfra_results import assert_changed_nothing, proposed_changes

pytestmark = pytest.mark.e2e


AGE_APT_LISTS = (
    "touch -d '8 days ago' /var/lib/apt/lists /var/lib/apt/lists/* /var/cache/apt/*.bin "
    "$(ls -d /var/lib/apt/periodic/* 2>/dev/null)"
)


def test_second_converge_a_week_later_changes_nothing(converged, timings):
    for name, r in converged.run_all(AGE_APT_LISTS).items():
        assert r.ok, (name, r.stderr)
    t0 = time.monotonic()
    result = converged.pyinfra(profile="noop")
    timings["second converge"] = time.monotonic() - t0
    assert_changed_nothing(result)


def test_dry_run_detects_no_change(converged):
    result = converged.pyinfra_dry()
    output = result.stdout + result.stderr
    assert result.rc == 0, output[-6000:]
    assert proposed_changes(output) == [], output[-6000:]
