"""bench/converge_cost.py's figures from a converge profile, and the report of a converge-only run."""

from __future__ import annotations

import pytest

from bench import converge_cost, report

PROFILE = {
    "wall_s": 30.0,
    "operations": [
        {"operation": "Packages", "host": "db1", "s": 10.0, "changed": True, "ok": True},
        {"operation": "Packages", "host": "pg1", "s": 12.5, "changed": False, "ok": True},
        {"operation": "my.cnf", "host": "db1", "s": 1.25, "changed": None, "ok": False},
    ],
    "facts": [{"fact": "Zpools", "host": "db1", "s": 0.5, "stage": 2}],
    "commands": [],
}


def test_per_host_operations_changes_and_seconds():
    assert converge_cost.figures(PROFILE, 31.04, 0) == {
        "rc": 0,
        "wall_seconds": 31.0,
        "operations": 3,
        "changed": 1,
        "facts": 1,
        "hosts": {
            "db1": {"operations": 2, "changed": 1, "facts": 1, "seconds": 11.8},
            "pg1": {"operations": 1, "changed": 0, "facts": 0, "seconds": 12.5},
        },
    }


def converge_results():
    runs = [{"name": name, **converge_cost.figures(PROFILE, 31.0, 0)} for name, _ in converge_cost.RUNS]
    return {
        "machine": "here",
        "command": "./dbzfs bench --converge",
        "date": "now",
        "engines": {},
        "converge": runs,
    }


def test_a_converge_only_report_has_its_table_and_no_chart(tmp_path):
    path = report.write_report(converge_results(), tmp_path)
    text = path.read_text()
    assert "## Converge cost" in text and ".png" not in text
    assert "| first converge | 31 | 3 (1) | 1 | 12 s, 2 | 12 s, 1 |" in text
    assert not list(tmp_path.glob("*.png"))


def test_a_converge_figure_missing_is_incomplete():
    results = converge_results()
    results["converge"][1]["hosts"]["pg1"]["seconds"] = float("nan")
    with pytest.raises(report.IncompleteResults, match="converge 'first converge': pg1.seconds is nan"):
        report.check_complete(results)
    with pytest.raises(report.IncompleteResults, match="no engine was measured and no converge timed"):
        report.check_complete({**results, "converge": []})
