"""roles/host_scripts/binlog_stream.py against stand-ins for mariadb and mariadb-binlog."""

import json
import subprocess
from pathlib import Path

import pytest

from roles.host_scripts import binlog_stream as s


@pytest.fixture
def config(tmp_path):
    raw = {
        "cluster": "mariadb",
        "host": "db1",
        "address": "10.99.0.11",
        "port": 3306,
        "directory": str(tmp_path / "binlogs" / "mariadb" / "db1"),
        "defaults_file": "/etc/dbzfs/binlogs/client.cnf",
        "server_id": 4000000,
        "metrics": str(tmp_path / "metrics" / "dbzfs_binlog_mariadb.prom"),
    }
    return s.load_config(json.dumps(raw))


def test_a_first_stream_starts_at_the_servers_oldest_file():
    assert s.start_file([], ["mariadb-bin.000007", "mariadb-bin.000008"]) == ("mariadb-bin.000007", False)


def test_a_later_stream_fetches_its_newest_file_again_whole():
    held = ["mariadb-bin.000007", "mariadb-bin.000008"]
    assert s.start_file(held, ["mariadb-bin.000008", "mariadb-bin.000009"]) == ("mariadb-bin.000008", False)


def test_files_the_server_purged_before_they_came_leave_a_gap():
    assert s.start_file(["mariadb-bin.000003"], ["mariadb-bin.000009"]) == ("mariadb-bin.000009", True)


def test_a_server_without_binlogs_is_an_error():
    with pytest.raises(RuntimeError, match="log_bin"):
        s.start_file([], [])


def test_the_held_files_in_their_numbers_order(tmp_path):
    for name in ("mariadb-bin.000010", "mariadb-bin.000009", "mariadb-bin.index", "notes.txt"):
        (tmp_path / name).write_text("")
    assert s.local_files(str(tmp_path)) == ["mariadb-bin.000009", "mariadb-bin.000010"]


def test_the_stream_command_reads_as_a_replica_and_writes_the_files_raw(config):
    argv = s.stream_command(config, "mariadb-bin.000008")
    assert argv[0] == "mariadb-binlog" and argv[-1] == "mariadb-bin.000008"
    for option in (
        "--defaults-extra-file=/etc/dbzfs/binlogs/client.cnf",
        "--read-from-remote-server",
        "--host=10.99.0.11",
        "--raw",
        "--stop-never",
        "--stop-never-slave-server-id=4000000",
        f"--result-file={config.directory}/",
    ):
        assert option in argv, option
    assert not any("password" in a for a in argv)


class Stream:
    def __init__(self, directory, polls=2, rc=1):
        self.directory, self.polls, self.returncode = directory, polls, rc

    def poll(self):
        self.polls -= 1
        return None if self.polls > 0 else self.returncode


def test_a_run_streams_from_the_start_file_and_says_so_in_the_metrics(config):
    calls = []

    def runner(argv, **kwargs):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "mariadb-bin.000001\t1234\nmariadb-bin.000002\t99\n", "")

    def popen(argv):
        calls.append(argv)
        (config_dir := Path(config.directory)).mkdir(parents=True, exist_ok=True)
        (config_dir / "mariadb-bin.000001").write_text("x")
        return Stream(config.directory)

    assert s.run(config, runner=runner, popen=popen, sleep=lambda _: None) == 1
    assert calls[1][-1] == "mariadb-bin.000001"
    text = open(config.metrics).read()
    assert 'dbzfs_binlog_streaming{cluster="mariadb",source="db1"} 0' in text
    assert 'dbzfs_binlog_gap{cluster="mariadb",source="db1"} 0' in text


def test_a_server_that_cannot_list_its_binlogs_fails_the_run(config):
    def runner(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 1, "", "ERROR 1045 (28000): Access denied")

    assert s.run(config, runner=runner, popen=None, sleep=lambda _: None) == 1
    assert "dbzfs_binlog_streaming" in open(config.metrics).read()
