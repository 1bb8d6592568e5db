"""host_scripts/db_snapshot.py: which snapshots are due, their names, the positions stored on
them, and the MariaDB session that blocks commits while the snapshot is taken (against a real
mariadbd)."""

import subprocess
import threading
import time
from datetime import UTC, datetime

import pytest

from host_scripts import db_snapshot as s
from roles import snapshots

from tests.unit.real_servers import MARIADBD, mariadb_install_db, require

NOW = datetime(2026, 12, 4, 22, 37, 12, tzinfo=UTC)  # a Friday
DATA = "dbpool/datastore/mysql"


def ts(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def test_the_script_knows_the_kinds_the_role_writes():
    assert s.TYPES == snapshots.KINDS


@pytest.mark.parametrize(
    "kind, start",
    [
        ("frequently", "2026-12-04 22:30:00"),
        ("hourly", "2026-12-04 22:00:00"),
        ("daily", "2026-12-04 00:00:00"),
        ("weekly", "2026-11-30 00:00:00"),  # Monday
        ("monthly", "2026-12-01 00:00:00"),
        ("yearly", "2026-01-01 00:00:00"),
    ],
)
def test_periods_begin_where_sanoid_counts_them(kind, start):
    assert s.period_start(kind, NOW).timestamp() == ts(start)


def listing(*rows: tuple[str, str]) -> str:
    return "".join(f"{name}\t{ts(when)}\n" for name, when in rows)


def test_only_kinds_kept_and_not_taken_in_their_period_are_due():
    text = listing(
        (f"{DATA}@autosnap_2026-12-04_22:00:04_hourly", "2026-12-04 22:00:04"),
        (f"{DATA}@autosnap_2026-12-03_00:00:02_daily", "2026-12-03 00:00:02"),
        (f"{DATA}@autosnap_2026-12-01_00:00:02_monthly", "2026-12-01 00:00:02"),
        (f"{DATA}@dbzfs-seed-full", "2026-12-04 22:30:00"),  # not ours: ignored
        (f"{DATA}-rewrite@autosnap_2026-12-04_22:30:00_daily", "2026-12-04 22:30:00"),  # another dataset
    )
    newest = s.newest_by_type(text, DATA)
    assert newest == {
        "hourly": ts("2026-12-04 22:00:04"),
        "daily": ts("2026-12-03 00:00:02"),
        "monthly": ts("2026-12-01 00:00:02"),
    }
    keep = {"frequently": 0, "hourly": 36, "daily": 30, "weekly": 0, "monthly": 3, "yearly": 0}
    assert s.due(keep, newest, NOW) == ["daily"]
    assert s.due(keep, {}, NOW) == ["hourly", "daily", "monthly"]  # a first run takes every kind
    assert s.due({"hourly": 0}, {}, NOW) == []


def test_one_name_per_dataset_and_kind_in_sanoids_format():
    groups = s.snapshot_names([DATA, "dbpool/datastore/mysql-log"], ["hourly", "daily"], NOW)
    # One `zfs snapshot` per kind: a command takes one snapshot of a dataset at most.
    assert groups == [
        [
            f"{DATA}@autosnap_2026-12-04_22:37:12_hourly",
            "dbpool/datastore/mysql-log@autosnap_2026-12-04_22:37:12_hourly",
        ],
        [
            f"{DATA}@autosnap_2026-12-04_22:37:12_daily",
            "dbpool/datastore/mysql-log@autosnap_2026-12-04_22:37:12_daily",
        ],
    ]
    assert [s.snapshot_type(n.split("@")[1]) for names in groups for n in names] == ["hourly"] * 2 + [
        "daily"
    ] * 2
    # The position is set by the same command that takes them: never a snapshot without it.
    assert s.snapshot_command(groups[0], s.GTID_PROPERTY, "0-1-5") == [
        "zfs",
        "snapshot",
        "-o",
        "dbzfs:gtid=0-1-5",
        *groups[0],
    ]


@pytest.mark.parametrize(
    "text, stored", [("0-1-42\n", "0-1-42"), ("0-1-4,1-2-9", "0-1-4,1-2-9"), ("\n", "empty")]
)
def test_gtid_positions(text, stored):
    assert s.gtid_checked(text) == stored


@pytest.mark.parametrize("text", ["NULL", "0-1", "0-1-x", "ERROR 1045"])
def test_anything_but_a_gtid_position_is_refused(text):
    with pytest.raises(s.SnapshotError, match="unexpected GTID position"):
        s.gtid_checked(text)


def test_lsn_positions():
    assert s.lsn_checked("0/3000148\n") == "0/3000148"
    for bad in ("", "\n", "0/", "zz/1"):
        with pytest.raises(s.SnapshotError, match="unexpected WAL position"):
            s.lsn_checked(bad)


def test_retention_is_taken_as_sanoid_counts_it():
    assert s.parse_keep(["hourly=36", "daily=30"]) == {"hourly": 36, "daily": 30}
    with pytest.raises(SystemExit, match="TYPE=COUNT"):
        s.parse_keep(["hour=36"])


# --- the MariaDB session, against a real server ------------------------------------------------


@pytest.fixture
def mariadb_socket(tmp_path):
    """A throwaway mariadbd with its binlog on (GTIDs), listening on a socket only."""
    data = tmp_path / "data"
    mariadb_install_db(data, "--skip-test-db")
    sock = tmp_path / "mysqld.sock"
    server = subprocess.Popen(
        [
            require(MARIADBD),
            "--no-defaults",
            f"--datadir={data}",
            "--user=root",
            f"--socket={sock}",
            "--skip-networking",
            "--log-bin=binlog",
            "--server-id=1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not sock.exists():
        assert server.poll() is None and time.monotonic() < deadline, "mariadbd did not start"
        time.sleep(0.2)
    yield str(sock)
    server.terminate()
    server.wait(timeout=60)


def sql(sock: str, statement: str, timeout: float = 30) -> str:
    return subprocess.run(
        ["mariadb", f"--socket={sock}", "-NBe", statement],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    ).stdout.strip()


def test_commits_wait_while_the_snapshot_is_taken_and_the_position_is_exact(mariadb_socket, monkeypatch):
    sock = mariadb_socket
    sql(
        sock,
        "CREATE DATABASE t; CREATE TABLE t.rows (id INT PRIMARY KEY) ENGINE=InnoDB;"
        " INSERT INTO t.rows VALUES (1)",
    )
    before = sql(sock, "SELECT @@global.gtid_binlog_pos")
    seen = {}

    def snapshot_taken(argv, timeout=120):
        seen.setdefault("commands", []).append(argv)
        if "writer" in seen:  # the second kind's snapshot: still under the block
            seen["rows at the second"] = sql(sock, "SELECT count(*) FROM t.rows")
            return ""
        # What the zfs command would see: a commit started now waits for the block to end.
        writer = threading.Thread(target=sql, args=(sock, "INSERT INTO t.rows VALUES (2)"))
        writer.start()
        time.sleep(2)
        seen["commit waited"] = writer.is_alive()
        seen["rows"] = sql(sock, "SELECT count(*) FROM t.rows")
        seen["argv"] = argv
        seen["writer"] = writer
        return ""

    monkeypatch.setattr(s, "run", snapshot_taken)
    groups = [["dbpool/datastore/mysql@a", "dbpool/datastore/mysql-log@a"], ["dbpool/datastore/mysql@b"]]
    position = s.mariadb_snapshot(groups, client=["mariadb", f"--socket={sock}"])
    seen["writer"].join(timeout=30)
    assert seen["commit waited"], "a commit went through while the snapshot was being taken"
    assert seen["rows"] == seen["rows at the second"] == "1"
    assert [argv[4:] for argv in seen["commands"]] == groups
    assert position == before  # exactly what the snapshot holds
    assert seen["argv"] == ["zfs", "snapshot", "-o", f"dbzfs:gtid={before}", *seen["argv"][4:]]
    # The block ended with the session: the waiting commit went through.
    assert sql(sock, "SELECT count(*) FROM t.rows") == "2"
    assert sql(sock, "SELECT @@global.gtid_binlog_pos") != before


def test_a_failed_snapshot_releases_the_block(mariadb_socket, monkeypatch):
    sock = mariadb_socket
    sql(sock, "CREATE DATABASE t; CREATE TABLE t.rows (id INT PRIMARY KEY) ENGINE=InnoDB")

    def failed(argv, timeout=120):
        raise s.SnapshotError("zfs snapshot failed: out of space")

    monkeypatch.setattr(s, "run", failed)
    with pytest.raises(s.SnapshotError, match="out of space"):
        s.mariadb_snapshot([["dbpool/datastore/mysql@a"]], client=["mariadb", f"--socket={sock}"])
    sql(sock, "INSERT INTO t.rows VALUES (1)", timeout=10)  # would time out under a held block
