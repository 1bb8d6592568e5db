"""host_scripts/binlog_stream.py against stand-ins for mariadb and mariadb-binlog."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from host_scripts import binlog_stream as s


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
        "copies": "dbpool/backup/mariadb",
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
        if argv[0] == "zfs":
            return subprocess.CompletedProcess(argv, 0, "", "")  # no copy yet: nothing pruned
        return subprocess.CompletedProcess(argv, 0, "mariadb-bin.000001\t1234\nmariadb-bin.000002\t99\n", "")

    def popen(argv):
        calls.append(argv)
        (config_dir := Path(config.directory)).mkdir(parents=True, exist_ok=True)
        (config_dir / "mariadb-bin.000001").write_text("x")
        return Stream(config.directory)

    assert s.run(config, runner=runner, popen=popen, sleep=lambda _: None) == 1
    assert calls[1][-1] == "mariadb-bin.000001"
    assert calls[2] == s.oldest_copy_command(config)
    text = open(config.metrics).read()
    assert 'dbzfs_binlog_streaming{cluster="mariadb",source="db1"} 0' in text
    assert 'dbzfs_binlog_gap{cluster="mariadb",source="db1"} 0' in text


def test_a_server_that_cannot_list_its_binlogs_fails_the_run(config):
    def runner(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 1, "", "ERROR 1045 (28000): Access denied")

    assert s.run(config, runner=runner, popen=None, sleep=lambda _: None) == 1
    assert "dbzfs_binlog_streaming" in open(config.metrics).read()


# --- retention: nothing older than the group's oldest copy ---------------------------------------


def held_files(directory: Path, mtimes: dict[str, int]) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    for name, mtime in mtimes.items():
        (directory / name).write_text("x")
        os.utime(directory / name, (mtime, mtime))
    return s.local_files(str(directory))


def test_the_oldest_copy_is_the_first_creation_zfs_lists():
    assert s.oldest_copy("1796400000\n1796403600\n") == 1796400000
    assert s.oldest_copy("") is None


def test_the_copies_are_listed_recursively_oldest_first(config):
    argv = s.oldest_copy_command(config)
    assert argv[:2] == ["zfs", "list"] and argv[-2:] == ["-r", "dbpool/backup/mariadb"]
    assert "-s" in argv and argv[argv.index("-s") + 1] == "creation"


def test_files_last_written_well_before_the_oldest_copy_are_pruned(tmp_path):
    oldest = 1_000_000
    held = held_files(
        tmp_path,
        {
            "mariadb-bin.000001": oldest - 3 * 3600,
            "mariadb-bin.000002": oldest - 2 * 3600,
            "mariadb-bin.000003": oldest - 1800,  # within the margin: a copy may start in it
            "mariadb-bin.000004": oldest + 60,
            "mariadb-bin.000005": oldest + 120,
        },
    )
    assert s.prunable(str(tmp_path), held, oldest) == ["mariadb-bin.000001", "mariadb-bin.000002"]


def test_the_newest_two_files_are_kept_however_old(tmp_path):
    held = held_files(
        tmp_path, {"mariadb-bin.000001": 10, "mariadb-bin.000002": 20, "mariadb-bin.000003": 30}
    )
    assert s.prunable(str(tmp_path), held, 1_000_000) == ["mariadb-bin.000001"]


def test_nothing_is_pruned_without_a_copy(tmp_path):
    held = held_files(tmp_path, {f"mariadb-bin.00000{i}": 10 for i in range(1, 6)})
    assert s.prunable(str(tmp_path), held, None) == []


def test_prune_deletes_the_old_files_and_keeps_the_rest(config):
    directory = Path(config.directory)
    held_files(directory, {"mariadb-bin.000001": 10, "mariadb-bin.000002": 20, "mariadb-bin.000003": 30})

    def runner(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 0, "1000000\n", "")

    assert s.prune(config, runner) == ["mariadb-bin.000001"]
    assert s.local_files(str(directory)) == ["mariadb-bin.000002", "mariadb-bin.000003"]


def test_a_failed_listing_of_the_copies_prunes_nothing(config, capsys):
    directory = Path(config.directory)
    held_files(directory, {"mariadb-bin.000001": 10, "mariadb-bin.000002": 20, "mariadb-bin.000003": 30})

    def runner(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 1, "", "dataset does not exist")

    assert s.prune(config, runner) == []
    assert len(s.local_files(str(directory))) == 3
    assert "cannot list dbpool/backup/mariadb" in capsys.readouterr().err
