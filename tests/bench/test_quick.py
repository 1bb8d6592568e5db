"""
`./dbzfs bench --quick` on its own VM (lab.yaml bench_vms), as a person runs it: every variant of
both engines built, loaded and measured once, the compression table, and a complete report. It
asserts that every figure is there and finite, never how fast anything was.

In `./dbzfs test-long`, not `./dbzfs test`: under TCG it takes about 40 minutes, outside CI's
budget (the table in tests/e2e/README.md). The unit tests check its parts on every change.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import report

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.long
PNG = b"\x89PNG\r\n\x1a\n"


def test_a_quick_run_writes_a_complete_report(tmp_path):
    out = tmp_path / "report"
    result = subprocess.run(
        [str(REPO / "dbzfs"), "bench", "--quick", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3 * 3600,
    )
    print(result.stdout)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    assert f"==> report: {out / 'report.md'}" in result.stdout
    results = report.load_results(out)
    report.check_complete(results)
    assert set(results["engines"]) == {"mariadb", "postgresql"}
    assert results["command"] == "./dbzfs bench --quick"
    text = (out / "report.md").read_text()
    for chart in report.CHARTS.values():
        assert (out / chart).read_bytes().startswith(PNG)
        assert f"]({chart})" in text
    assert "## Compression" in text
