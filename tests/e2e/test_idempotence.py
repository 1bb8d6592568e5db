"""A second converge of the whole lab changes nothing, even a week later (the apt lists made to
look old first), and `--dry` proposes nothing."""

import subprocess
import time
from pathlib import Path

import pytest

from lab import control

from tests.e2e.pyinfra_results import assert_changed_nothing, proposed_changes

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


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
    # Not lab.pyinfra(): with -y pyinfra skips change detection.
    result = subprocess.run(
        [str(control.PYINFRA), str(converged.inventory), "deploy.py", "--dry", "--diff"],
        cwd=REPO,
        env=control.lab_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert proposed_changes(output) == [], output[-6000:]
