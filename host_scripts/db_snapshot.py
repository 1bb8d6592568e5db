#!/usr/bin/python3
"""Consistent ZFS snapshots of a database host's data and log datasets (dbzfs), for sanoid to prune.

Copied to each database host as /usr/local/lib/dbzfs/db_snapshot.py and run as root by
dbzfs-snapshot.service, which sanoid.service pulls in before itself (sanoid.timer: every 15
minutes); the role also runs it once at the converge that sets it up:

    python3 /usr/local/lib/dbzfs/db_snapshot.py --engine mariadb --when replica \\
        --dataset dbpool/datastore/mysql --dataset dbpool/datastore/mysql-log \\
        --keep hourly=36 --keep daily=30 --keep monthly=3

`--when replica` (or `primary`) takes them only while the server is one (MariaDB: replication is
set up; PostgreSQL: in recovery), asked at each run: a switchover moves the snapshots with the
role, with no converge in between. `always` (the default) takes them whatever the role.

Why not sanoid's own snapshots: sanoid snapshots one dataset at a time, or a whole tree with
`recursive = zfs`. The engine's data and log datasets must be taken in one atomic `zfs snapshot`
(what a crash would leave, which the server recovers from), and the tree under them also holds the
compression rewrite's and the seed's temporary datasets, whose incremental receives a snapshot of
its own would break. So this script takes the snapshots, named as sanoid names its own
(`autosnap_YYYY-MM-DD_HH:MM:SS_<type>`, UTC), and sanoid (autosnap = no) prunes them by its
retention counts and monitors their age.

A run takes one snapshot per retention type that is due, each in one `zfs snapshot` of every
dataset (atomic across them; one command cannot take two of the same dataset):
a type is due when the data dataset has no snapshot of it taken since its current period began
(the quarter hour, the hour, the day, the week from Monday, the month, the year; UTC), as sanoid
decides. Each snapshot carries the engine's position as a user property set in the same command:

- MariaDB: `dbzfs:gtid`, @@global.gtid_binlog_pos read with commits blocked (BACKUP STAGE
  BLOCK_COMMIT, held by the client session while `zfs snapshot` runs), so the snapshot holds
  exactly the transactions up to that position ("empty" before the first one);
- PostgreSQL: `dbzfs:lsn`, the WAL position read just before the snapshot (a standby's last
  replayed record, a primary's current write position): every record up to it is in the snapshot,
  and recovery from the snapshot replays what its WAL dataset holds beyond it.

Exit status: 0 when the due snapshots were taken (or none was due), 1 when the server did not
answer or a command failed (nothing is left half-taken: the one `zfs snapshot` is atomic).
Python 3.11 standard library only (Debian 12's python3); the pure functions are unit-tested.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

TYPES = ("frequently", "hourly", "daily", "weekly", "monthly", "yearly")  # sanoid's names
FREQUENT_MINUTES = 15  # sanoid's frequent_period default, and sanoid.timer's interval
PREFIX = "autosnap_"
GTID_PROPERTY = "dbzfs:gtid"
LSN_PROPERTY = "dbzfs:lsn"
EMPTY_GTID = "empty"  # the position of a server that wrote nothing: a property is never ""
LOCK_WAIT_SECONDS = 60  # BACKUP STAGE's wait for a long DDL, not the default year
WHEN = ("replica", "primary", "always")
PG_IN_RECOVERY = "SELECT pg_is_in_recovery()"
PG_POSITION = (
    "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END"
)


METRICS = {
    "dbzfs_snapshots_taken_here": "1 when this host takes its engine's snapshots in the role its "
    "server has now (dbzfs-snapshot --when), else 0.",
    "dbzfs_snapshots_success": "1 when the last run of dbzfs-snapshot succeeded, else 0.",
}


class SnapshotError(RuntimeError):
    pass


# --- what is due (pure) --------------------------------------------------------------------------


def period_start(kind: str, now: datetime) -> datetime:
    """When the period of `kind` that holds `now` (UTC) began."""
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if kind == "frequently":
        return now.replace(minute=now.minute - now.minute % FREQUENT_MINUTES, second=0, microsecond=0)
    if kind == "hourly":
        return now.replace(minute=0, second=0, microsecond=0)
    if kind == "daily":
        return day
    if kind == "weekly":
        return day - timedelta(days=day.weekday())
    if kind == "monthly":
        return day.replace(day=1)
    if kind == "yearly":
        return day.replace(month=1, day=1)
    raise ValueError(f"unknown snapshot type {kind!r}: one of {', '.join(TYPES)}")


def snapshot_type(name: str) -> str | None:
    """The retention type of an autosnap name (the part after @), None for any other snapshot."""
    if not name.startswith(PREFIX):
        return None
    kind = name.rsplit("_", 1)[-1]
    return kind if kind in TYPES else None


def newest_by_type(zfs_list: str, dataset: str) -> dict[str, int]:
    """type -> creation time (Unix) of the dataset's newest autosnap of that type, from
    `zfs list -Hp -t snapshot -o name,creation -d 1 DATASET`."""
    newest: dict[str, int] = {}
    for line in zfs_list.splitlines():
        fields = line.split("\t")
        if len(fields) != 2 or not fields[1].isdigit():
            continue
        name, creation = fields[0], int(fields[1])
        ds, _, snap = name.partition("@")
        kind = snapshot_type(snap)
        if ds == dataset and kind and creation > newest.get(kind, -1):
            newest[kind] = creation
    return newest


def due(keep: Mapping[str, int], newest: Mapping[str, int], now: datetime) -> list[str]:
    """The types to take now, in TYPES order: kept (count > 0) and none taken in this period."""
    return [
        kind
        for kind in TYPES
        if keep.get(kind, 0) > 0
        and (kind not in newest or newest[kind] < period_start(kind, now).timestamp())
    ]


def snapshot_names(datasets: Sequence[str], kinds: Iterable[str], now: datetime) -> list[list[str]]:
    """Per kind, its snapshot of every dataset: one `zfs snapshot` each (a command takes one
    snapshot per dataset at most)."""
    stamp = now.strftime("%Y-%m-%d_%H:%M:%S")
    return [[f"{ds}@{PREFIX}{stamp}_{kind}" for ds in datasets] for kind in kinds]


def snapshot_command(names: Sequence[str], prop: str, value: str) -> list[str]:
    return ["zfs", "snapshot", "-o", f"{prop}={value}", *names]


def gtid_checked(text: str) -> str:
    """The GTID position as read (`domain-server-seq,...`), EMPTY_GTID for none; anything else
    refused: it would be stored as the snapshot's position."""
    gtid = text.strip()
    if not gtid:
        return EMPTY_GTID
    for part in gtid.split(","):
        pieces = part.split("-")
        if len(pieces) != 3 or not all(p.isdigit() for p in pieces):
            raise SnapshotError(f"unexpected GTID position from the server: {gtid!r}")
    return gtid


def lsn_checked(text: str) -> str:
    lsn = text.strip()
    high, sep, low = lsn.partition("/")
    hexdigits = set("0123456789ABCDEFabcdef")
    if not sep or not high or not low or not set(high + low) <= hexdigits:
        raise SnapshotError(f"unexpected WAL position from the server: {lsn!r}")
    return lsn


# --- taking them ---------------------------------------------------------------------------------


def run(argv: list[str], timeout: float = 120) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise SnapshotError(f"{' '.join(argv[:3])}... failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def mariadb_snapshot(groups: Sequence[Sequence[str]], client: Sequence[str] = ("mariadb",)) -> str:
    """One client session: commits blocked, the GTID position read, each group's snapshot taken
    from this process while the session holds the block (they all hold that position), the block
    released. Returns the position."""
    session = subprocess.Popen(
        [*client, "-NB", "--unbuffered"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert session.stdin and session.stdout
    try:
        session.stdin.write(
            f"SET SESSION lock_wait_timeout = {LOCK_WAIT_SECONDS};\n"
            "BACKUP STAGE START;\nBACKUP STAGE BLOCK_COMMIT;\nSELECT @@global.gtid_binlog_pos;\n"
        )
        session.stdin.flush()
        line = session.stdout.readline()
        if not line:  # the session ended before the SELECT answered
            session.wait(timeout=10)
            raise SnapshotError(f"the BACKUP STAGE session failed: {session.stderr.read().strip()}")
        gtid = gtid_checked(line)
        for names in groups:
            run(snapshot_command(names, GTID_PROPERTY, gtid))
        session.stdin.write("BACKUP STAGE END;\n")
        session.stdin.close()
        if session.wait(timeout=60) != 0:
            raise SnapshotError(f"BACKUP STAGE END failed: {session.stderr.read().strip()}")
        return gtid
    finally:
        if session.poll() is None:
            session.kill()  # the block ends with the session
            session.wait()


def live_role(engine: str) -> str:
    """ "replica" or "primary", as the server says now."""
    if engine == "mariadb":
        return (
            "replica" if run(["mariadb", "-NB", "-e", "SHOW SLAVE STATUS"], timeout=30).strip() else "primary"
        )
    out = run(["runuser", "-u", "postgres", "--", "psql", "-XAtq", "-c", PG_IN_RECOVERY], timeout=30).strip()
    if out not in ("t", "f"):
        raise SnapshotError(f"unexpected answer to {PG_IN_RECOVERY}: {out!r}")
    return "replica" if out == "t" else "primary"


def postgresql_snapshot(groups: Sequence[Sequence[str]]) -> str:
    """Each group's snapshot with the WAL position read just before it. Returns the first's."""
    psql = ["runuser", "-u", "postgres", "--", "psql", "-XAtq", "-c", PG_POSITION]
    first = None
    for names in groups:
        lsn = lsn_checked(run(psql, timeout=30))
        run(snapshot_command(names, LSN_PROPERTY, lsn))
        first = first or lsn
    return first or ""


def metrics_text(taken_here: bool, success: bool) -> str:
    values = {"dbzfs_snapshots_taken_here": int(taken_here), "dbzfs_snapshots_success": int(success)}
    return "".join(
        f"# HELP {name} {METRICS[name]}\n# TYPE {name} gauge\n{name} {value}\n"
        for name, value in values.items()
    )


def write_metrics(path: str | None, taken_here: bool, success: bool) -> None:
    """For node_exporter's textfile collector, atomically (a dot file, then renamed): the alerts
    on snapshot age read it to know which hosts take them now."""
    if not path:
        return
    directory, base = os.path.split(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(metrics_text(taken_here, success))
            os.fchmod(handle.fileno(), 0o644)
            # durable before the rename: the converge reads this file to know the job has run
            # (operations/snapshots.first_run), and a power loss must not leave it empty
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)  # the rename itself, durable
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def parse_keep(values: Iterable[str]) -> dict[str, int]:
    keep = {}
    for value in values:
        kind, sep, count = value.partition("=")
        if not sep or kind not in TYPES or not count.isdigit():
            raise SystemExit(f"--keep {value!r}: TYPE=COUNT with TYPE one of {', '.join(TYPES)}")
        keep[kind] = int(count)
    return keep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Consistent snapshots of a database's datasets.")
    parser.add_argument("--engine", required=True, choices=("mariadb", "postgresql"))
    parser.add_argument(
        "--dataset", action="append", required=True, help="data dataset first, then the log's"
    )
    parser.add_argument("--keep", action="append", default=[], help="TYPE=COUNT, sanoid's retention")
    parser.add_argument("--when", choices=WHEN, default="always", help="the role the server must have now")
    parser.add_argument("--metrics", help="a .prom file for node_exporter's textfile collector")
    args = parser.parse_args(argv)
    keep = parse_keep(args.keep)
    try:
        taken_here, message = take_due(args.engine, args.when, args.dataset, keep)
    except (SnapshotError, subprocess.TimeoutExpired, OSError) as exc:
        print(f"db_snapshot: no snapshot taken: {exc}", file=sys.stderr)
        # Which role the server has is unknown: counted as taking them, so that their age is
        # still watched while this fails.
        write_metrics(args.metrics, taken_here=True, success=False)
        return 1
    print(f"db_snapshot: {message}")
    write_metrics(args.metrics, taken_here=taken_here, success=True)
    return 0


def take_due(engine: str, when: str, datasets: Sequence[str], keep: Mapping[str, int]) -> tuple[bool, str]:
    """(whether this host takes them in its server's role now, what was done)."""
    data = datasets[0]
    now = datetime.now(UTC).replace(microsecond=0)
    if when != "always":
        role = live_role(engine)
        if role != when:
            return False, f"none taken here: the server is a {role} (--when {when})"
    listing = run(["zfs", "list", "-Hp", "-t", "snapshot", "-o", "name,creation", "-d", "1", data])
    kinds = due(keep, newest_by_type(listing, data), now)
    if not kinds:
        return True, f"nothing due on {data}"
    groups = snapshot_names(datasets, kinds, now)
    started = time.monotonic()
    position = (mariadb_snapshot if engine == "mariadb" else postgresql_snapshot)(groups)
    what = "GTID" if engine == "mariadb" else "LSN"
    taken = ", ".join(" ".join(names) for names in groups)
    return True, f"took {taken} at {what} {position} in {time.monotonic() - started:.1f} s"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
