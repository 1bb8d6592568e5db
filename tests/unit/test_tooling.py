"""The tree is lint-clean and formatted: `ruff check .` and `ruff format --check .` with the
settings in pyproject.toml and the ruff pinned in requirements.txt (in .venv, from scripts/bootstrap).

Fix with `.venv/bin/ruff check --fix .` and `.venv/bin/ruff format .`; type hints are by hand.
"""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_ruff_is_the_pinned_one():
    pinned = next(
        line.split("==", 1)[1].strip()
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.startswith("ruff==")
    )
    r = _ruff("--version")
    assert r.returncode == 0, f"ruff is not installed in this venv: run scripts/bootstrap\n{r.stderr}"
    assert r.stdout.split() == ["ruff", pinned], r.stdout


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("check", "--no-cache", "."), id="check"),
        pytest.param(("format", "--no-cache", "--check", "."), id="format"),
    ],
)
def test_ruff(args):
    r = _ruff(*args)
    assert r.returncode == 0, f"ruff {' '.join(args)}:\n{r.stdout}{r.stderr}"
