"""host_scripts/binlog_stream.py against a real mariadbd (Debian's, as on the hosts): the
stream's account may stream and nothing else, the files it writes are the server's byte for byte,
and they replay onto another server up to a moment (MariaDB's point-in-time recovery: from a
copy's GTID position, `--stop-datetime`), every transaction committed before it and none after.
The `zfs` listing of the retention is the only stand-in (no pool here: it lists no copy)."""

import socket
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from host_scripts import binlog_stream as s

from tests.unit.real_servers import MARIADBD, mariadb_install_db, require

ACCOUNT = "dbzfs_binlog"
PASSWORD = "stream-only"
SCHEMA = (
    "CREATE DATABASE app;"
    " CREATE TABLE app.events (id INT PRIMARY KEY, payload CHAR(64) CHARACTER SET ascii) ENGINE=InnoDB"
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """A throwaway mariadbd: binlog on (GTIDs), TCP on 127.0.0.1 and a socket."""

    def __init__(self, root: Path, server_id: int):
        self.data = root / "data"
        self.sock = root / "mysqld.sock"
        self.port = free_port()
        mariadb_install_db(self.data, "--skip-test-db")
        self.proc = subprocess.Popen(
            [
                require(MARIADBD),
                "--no-defaults",
                f"--datadir={self.data}",
                "--user=root",
                f"--socket={self.sock}",
                "--bind-address=127.0.0.1",
                f"--port={self.port}",
                "--log-bin=mariadb-bin",
                "--binlog-format=ROW",
                f"--server-id={server_id}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not self.sock.exists():
            assert self.proc.poll() is None and time.monotonic() < deadline, "mariadbd did not start"
            time.sleep(0.2)

    def sql(self, statement: str) -> str:
        return subprocess.run(
            ["mariadb", f"--socket={self.sock}", "-NBe", statement],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()

    def replay(self, files: list[Path], *options: str) -> None:
        """mariadb-binlog FILES | mariadb: what a restore runs on the target."""
        decoded = subprocess.run(
            ["mariadb-binlog", *options, *map(str, files)], capture_output=True, timeout=120, check=True
        ).stdout
        subprocess.run(
            ["mariadb", f"--socket={self.sock}"], input=decoded, capture_output=True, timeout=120, check=True
        )

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


@pytest.fixture
def primary(tmp_path):
    server = Server(tmp_path / "primary", server_id=1)
    server.sql(
        f"CREATE USER {ACCOUNT}@'127.0.0.1' IDENTIFIED BY '{PASSWORD}';"
        f" GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {ACCOUNT}@'127.0.0.1'"
    )
    yield server
    server.stop()


@pytest.fixture
def restored(tmp_path):
    server = Server(tmp_path / "restored", server_id=2)
    yield server
    server.stop()


@pytest.fixture
def config(tmp_path, primary):
    client = tmp_path / "client.cnf"
    client.write_text(s_client_text())
    client.chmod(0o600)
    return s.Config(
        cluster="mariadb",
        host="db1",
        address="127.0.0.1",
        port=primary.port,
        directory=str(tmp_path / "binlogs" / "mariadb" / "db1"),
        defaults_file=str(client),
        server_id=4000000,
        metrics=str(tmp_path / "metrics" / "dbzfs_binlog_mariadb.prom"),
        copies="dbpool/backup/mariadb",
    )


def s_client_text() -> str:
    return f"[client]\nuser = {ACCOUNT}\npassword = {PASSWORD}\n"


class Streaming:
    """binlog_stream.run in a thread, its mariadb-binlog a real process, stopped by stop()."""

    def __init__(self, config: s.Config):
        self.config = config
        self.procs: list[subprocess.Popen] = []
        self.done = threading.Event()
        self.rc = None

        def runner(argv, **kwargs):
            if argv[0] == "zfs":  # the retention's listing: no pool here, so no copy and no prune
                return subprocess.CompletedProcess(argv, 1, "", "no pool in a unit test")
            return subprocess.run(argv, **kwargs)

        def popen(argv):
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.procs.append(proc)
            return proc

        def run():
            self.rc = s.run(config, runner=runner, popen=popen, sleep=lambda _: self.done.wait(0.2))

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        self.thread.join(timeout=60)


def caught_up(primary: Server, directory: Path, timeout: float = 60) -> list[Path]:
    """The held files once the newest has every byte the server wrote to its current one."""
    deadline = time.monotonic() + timeout
    while True:
        listed = [line.split("\t") for line in primary.sql("SHOW BINARY LOGS").splitlines()]
        name, size = listed[-1][0], int(listed[-1][1])
        held = directory / name
        if held.exists() and held.stat().st_size >= size:
            return [directory / f for f in s.local_files(str(directory))]
        assert time.monotonic() < deadline, (
            f"{name}: {held.stat().st_size if held.exists() else 0} of {size} bytes"
        )
        time.sleep(0.2)


def rows(server: Server, first: int, last: int) -> None:
    server.sql(
        f"INSERT INTO app.events (id, payload) SELECT seq, SHA2(seq, 256) FROM app.seq_{first}_to_{last}"
    )


def test_the_stream_account_streams_and_may_do_nothing_else(primary, config):
    denied = subprocess.run(
        [
            "mariadb",
            f"--defaults-extra-file={config.defaults_file}",
            "-h127.0.0.1",
            f"-P{primary.port}",
            "-e",
            "CREATE DATABASE stolen",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert denied.returncode != 0 and "access denied" in denied.stderr.lower(), denied


def test_streamed_files_are_the_servers_and_replay_to_a_moment(primary, restored, config):
    primary.sql(SCHEMA)
    rows(primary, 1, 100)
    copy_position = primary.sql("SELECT @@global.gtid_binlog_pos")  # a copy taken here
    primary.sql("FLUSH BINARY LOGS")
    stream = Streaming(config)
    try:
        rows(primary, 101, 200)
        time.sleep(1.1)  # mariadb-binlog's --stop-datetime has whole seconds
        moment = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        time.sleep(1.1)
        rows(primary, 201, 300)
        primary.sql("DROP TABLE app.events")  # the mistake
        held = caught_up(primary, Path(config.directory))
    finally:
        stream.stop()

    # the stream began at the server's oldest file (it held none) and wrote each one as it is
    server_files = [line.split("\t")[0] for line in primary.sql("SHOW BINARY LOGS").splitlines()]
    assert [f.name for f in held] == server_files
    for f in held[:-1]:
        assert f.read_bytes() == (primary.data / f.name).read_bytes(), f.name
    # the server's current file differs in one flag only: LOG_EVENT_BINLOG_IN_USE_F, set in the
    # header of its first event (bytes 21-22) while the server writes to it
    newest, theirs = held[-1].read_bytes(), (primary.data / held[-1].name).read_bytes()
    assert len(newest) == len(theirs) and newest[:21] + newest[23:] == theirs[:21] + theirs[23:]
    metrics = Path(config.metrics).read_text()
    assert 'dbzfs_binlog_gap{cluster="mariadb",source="db1"} 0' in metrics
    assert f'dbzfs_binlog_files{{cluster="mariadb",source="db1"}} {len(held)}' in metrics

    # the restore: a copy at copy_position (here: replayed up to it), then from it to the moment
    restored.replay(held, f"--stop-position={copy_position}")
    assert restored.sql("SELECT count(*) FROM app.events") == "100"
    restored.replay(held, f"--start-position={copy_position}", f"--stop-datetime={moment}")
    got = restored.sql(
        "SELECT count(*), min(id), max(id), sum(payload = CONVERT(SHA2(id, 256) USING ascii)) FROM app.events"
    )
    assert got == "200\t1\t200\t200", got


def test_a_stream_started_again_goes_on_from_its_newest_file_and_says_when_it_missed_some(primary, config):
    directory = Path(config.directory)
    primary.sql(SCHEMA)
    stream = Streaming(config)
    try:
        rows(primary, 1, 100)
        caught_up(primary, directory)
    finally:
        stream.stop()
    # down a while (a restart, the network): the primary rotates; the stream takes its newest
    # file again whole and goes on
    rows(primary, 101, 200)
    primary.sql("FLUSH BINARY LOGS")
    rows(primary, 201, 300)
    stream = Streaming(config)
    try:
        held = caught_up(primary, directory)
    finally:
        stream.stop()
    server_files = [line.split("\t")[0] for line in primary.sql("SHOW BINARY LOGS").splitlines()]
    assert [f.name for f in held] == server_files
    assert held[0].read_bytes() == (primary.data / held[0].name).read_bytes()
    assert 'dbzfs_binlog_gap{cluster="mariadb",source="db1"} 0' in Path(config.metrics).read_text()

    # down longer than the primary keeps its binlogs: the files it never got are gone for good;
    # the stream says so and goes on from the server's oldest
    primary.sql("FLUSH BINARY LOGS")
    rows(primary, 301, 400)
    primary.sql("FLUSH BINARY LOGS")
    newest = primary.sql("SHOW BINARY LOGS").splitlines()[-1].split("\t")[0]
    primary.sql(f"PURGE BINARY LOGS TO '{newest}'")
    stream = Streaming(config)
    try:
        held = caught_up(primary, directory)
    finally:
        stream.stop()
    assert held[-1].name == newest
    assert 'dbzfs_binlog_gap{cluster="mariadb",source="db1"} 1' in Path(config.metrics).read_text()
