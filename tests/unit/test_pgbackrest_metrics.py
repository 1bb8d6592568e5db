"""host_scripts/pgbackrest_metrics.py: the `pgbackrest info` it runs (through a stand-in
runner answering with recorded JSON, the shapes of tests/unit/test_pgbackrest_role.py), the
metrics it writes of each stanza and of its own run, its --stanza list and its failures."""

import ast
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from host_scripts import pgbackrest_metrics as m
from roles import pgbackrest

from tests.unit.test_pgbackrest_role import INFO_MISSING, INFO_NO_BACKUP, INFO_OK, START, backup_entry
from tests.unit.test_zfs_metrics import check_with_promtool, parse_exposition

NOW = datetime(2026, 12, 6, 1, 15, tzinfo=UTC)
INFO = [
    "runuser",
    "-u",
    "postgres",
    "--",
    "pgbackrest",
    "--log-level-console=error",
    "--output=json",
    "info",
]
NEWEST = START + 67570  # INFO_OK's incremental backup's stop
ANALYTICS = {**INFO_NO_BACKUP[0], "name": "analytics"}  # a stanza without a backup


class Runner:
    """pgBackRest on the backup host: answers `info` with what it was given."""

    def __init__(self, stdout="", returncode=0, stderr=""):
        self.result = m.Result(returncode, stdout, stderr)
        self.calls = []

    def __call__(self, argv, timeout=None):
        self.calls.append((list(argv), timeout))
        return self.result


def answering(*stanzas):
    return Runner(json.dumps(list(stanzas)))  # pgBackRest prints its JSON on one line


def run(tmp_path, runner, *options):
    return m.main(["--metrics", str(tmp_path / "dbzfs_pgbackrest.prom"), *options], runner=runner, now=NOW)


def metrics(tmp_path):
    text = (tmp_path / "dbzfs_pgbackrest.prom").read_text()
    check_with_promtool(text)
    return {
        (name, dict(labels).get("stanza")): value for (name, labels), value in parse_exposition(text).items()
    }


# --- runs ---------------------------------------------------------------------------------------------


def test_each_stanza_s_state_newest_backup_and_count(tmp_path, capsys):
    runner = answering(INFO_OK[0], ANALYTICS)
    assert run(tmp_path, runner) == 0
    assert runner.calls == [(INFO, 60)]
    assert metrics(tmp_path) == {
        ("dbzfs_pgbackrest_stanza_ok", "postgresql"): 1,
        ("dbzfs_pgbackrest_stanza_ok", "analytics"): 0,
        ("dbzfs_pgbackrest_newest_backup_timestamp_seconds", "postgresql"): NEWEST,
        ("dbzfs_pgbackrest_backups", "postgresql"): 2,
        ("dbzfs_pgbackrest_backups", "analytics"): 0,
        ("dbzfs_pgbackrest_info_success", None): 1,
        ("dbzfs_pgbackrest_last_run_timestamp_seconds", None): NOW.timestamp(),
    }
    assert capsys.readouterr().out.splitlines() == [
        "pgbackrest_metrics: postgresql: ok (status 0), 2 backups, the newest "
        "20261205-061000F_20261206-010002I (ended 2026-12-06 00:56:10 UTC)",
        "pgbackrest_metrics: analytics: no valid backups (status 2), no backup",
    ]


def test_the_newest_backup_is_the_one_that_ended_last_of_any_type():
    late_full = backup_entry(
        "20261207-010000F", "full", START + 158400, START + 158460, "0/B000028", "0/B000100"
    )
    info = {**INFO_OK[0], "backup": [INFO_OK[0]["backup"][1], late_full, INFO_OK[0]["backup"][0]]}
    (stanza,) = m.parse_info(json.dumps([info]))
    assert stanza == m.Stanza("postgresql", 0, "ok", 3, START + 158460, "20261207-010000F")
    (incr_last,) = m.parse_info(json.dumps(INFO_OK))
    assert incr_last.newest == NEWEST and incr_last.newest_label.endswith("I")


def test_a_failed_info_says_so_without_stanzas(tmp_path, capsys):
    runner = Runner(
        returncode=56, stderr="WARN: x\nERROR: [056]: unable to open missing file '/var/lib/pgbackrest'\n"
    )
    assert run(tmp_path, runner) == 1
    assert metrics(tmp_path) == {
        ("dbzfs_pgbackrest_info_success", None): 0,
        ("dbzfs_pgbackrest_last_run_timestamp_seconds", None): NOW.timestamp(),
    }
    err = capsys.readouterr().err
    assert "runuser -u postgres -- pgbackrest --log-level-console=error --output=json info failed" in err
    assert "WARN: x | ERROR: [056]: unable to open missing file '/var/lib/pgbackrest'" in err
    assert pgbackrest.METRICS_SUCCEEDED not in (tmp_path / "dbzfs_pgbackrest.prom").read_text().splitlines()


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "not JSON"),
        ("P00   WARN: something\n[]", "not JSON"),
        ('{"name": "postgresql"}', "not a JSON list of stanzas"),
        ('[{"name": "postgresql"}]', "a stanza not as pgBackRest lists one (KeyError: 'status')"),
        ('[{"name": "p", "status": {"code": 0}, "backup": [{"label": "x"}]}]', "KeyError: 'timestamp'"),
    ],
)
def test_output_that_is_not_info_s_json_is_a_failure(tmp_path, capsys, stdout, message):
    assert run(tmp_path, Runner(stdout)) == 1
    assert metrics(tmp_path)[("dbzfs_pgbackrest_info_success", None)] == 0
    assert message in capsys.readouterr().err


def test_a_run_that_read_info_is_what_the_converge_s_first_run_looks_for(tmp_path):
    assert run(tmp_path, answering(*INFO_MISSING)) == 0  # a stanza not ok is the alert's business
    lines = (tmp_path / "dbzfs_pgbackrest.prom").read_text().splitlines()
    assert pgbackrest.METRICS_SUCCEEDED in lines
    assert m.METRICS == pgbackrest.METRICS


# --- --stanza -------------------------------------------------------------------------------------------


def test_the_stanzas_named_are_written_and_only_they(tmp_path, capsys):
    old = {**INFO_OK[0], "name": "retired"}  # a group gone from the inventory, still in the repository
    runner = answering(old, INFO_OK[0])
    assert run(tmp_path, runner, "--stanza", "postgresql", "--stanza", "analytics") == 0
    assert metrics(tmp_path) == {
        ("dbzfs_pgbackrest_stanza_ok", "postgresql"): 1,
        ("dbzfs_pgbackrest_stanza_ok", "analytics"): 0,  # not in the repository at all
        ("dbzfs_pgbackrest_newest_backup_timestamp_seconds", "postgresql"): NEWEST,
        ("dbzfs_pgbackrest_backups", "postgresql"): 2,
        ("dbzfs_pgbackrest_backups", "analytics"): 0,
        ("dbzfs_pgbackrest_info_success", None): 1,
        ("dbzfs_pgbackrest_last_run_timestamp_seconds", None): NOW.timestamp(),
    }
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "pgbackrest_metrics: analytics: not in the repository (status 1), no backup"
    assert out[2] == "pgbackrest_metrics: retired: not backed up here (no --stanza retired), left out"


def test_an_empty_repository_is_no_success_for_the_stanzas_named(tmp_path):
    assert run(tmp_path, answering(), "--stanza", "postgresql") == 0
    assert metrics(tmp_path)[("dbzfs_pgbackrest_stanza_ok", "postgresql")] == 0
    assert run(tmp_path, answering()) == 0  # without --stanza: nothing to say of any
    assert ("dbzfs_pgbackrest_stanza_ok", "postgresql") not in metrics(tmp_path)


# --- the metrics file ---------------------------------------------------------------------------------


def test_metrics_text():
    stanzas = [m.Stanza('a "b"\\c', 0, "ok", 1, 1_765_000_000, "L"), m.Stanza("d", 2, "no valid backups", 0)]
    text = m.metrics_text(stanzas, NOW)
    check_with_promtool(text)
    assert text.startswith(
        "# HELP dbzfs_pgbackrest_stanza_ok 1 when pgBackRest reports the stanza ok (status code 0), else 0.\n"
        "# TYPE dbzfs_pgbackrest_stanza_ok gauge\n"
        'dbzfs_pgbackrest_stanza_ok{stanza="a \\"b\\"\\\\c"} 1\n'
        'dbzfs_pgbackrest_stanza_ok{stanza="d"} 0\n'
    )
    series = parse_exposition(text)
    assert {name for name, _ in series} == set(m.HELP)
    assert (
        series[("dbzfs_pgbackrest_newest_backup_timestamp_seconds", (("stanza", 'a "b"\\c'),))]
        == 1_765_000_000
    )
    # A failed run: no family without samples.
    assert set(parse_exposition(m.metrics_text(None, NOW))) == {
        ("dbzfs_pgbackrest_info_success", ()),
        ("dbzfs_pgbackrest_last_run_timestamp_seconds", ()),
    }


def test_metrics_are_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "dbzfs_pgbackrest.prom"
    path.write_text("old\n")
    seen = {}
    replace = os.replace

    def watched(source, destination):
        seen["name"] = Path(source).name
        seen["mode"] = Path(source).stat().st_mode & 0o777
        assert path.read_text() == "old\n"
        replace(source, destination)

    monkeypatch.setattr(m.os, "replace", watched)
    m.write_metrics(str(path), "new\n")
    assert seen["name"].startswith(".dbzfs_pgbackrest.prom.") and seen["mode"] == 0o644
    assert path.read_text() == "new\n"

    def broken(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(m.os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        m.write_metrics(str(path), "newer\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dbzfs_pgbackrest.prom"]


def test_metrics_that_cannot_be_written_fail_the_run(tmp_path, capsys):
    runner = answering(INFO_OK[0])
    assert m.main(["--metrics", str(tmp_path / "absent" / "m.prom")], runner=runner, now=NOW) == 1
    assert "cannot write" in capsys.readouterr().err


# --- the script itself ----------------------------------------------------------------------------------


def test_the_default_runner_runs_from_root_and_never_raises():
    assert m.run(["pwd"]) == m.Result(0, "/\n", "")
    assert m.run(["sh", "-c", "echo err >&2; exit 3"]) == m.Result(3, "", "err\n")
    assert m.run(["sleep", "5"], timeout=0.1).returncode == m.TIMED_OUT
    assert m.run(["/nonexistent/runuser"]).returncode == 127


def test_the_script_uses_the_standard_library_only():
    tree = ast.parse(Path(m.__file__).read_text())
    modules = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    modules |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert modules <= sys.stdlib_module_names | {"__future__"}
