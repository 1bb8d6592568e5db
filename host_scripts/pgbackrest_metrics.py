#!/usr/bin/python3
"""pgBackRest's backups for node_exporter's textfile collector (dbzfs).

Copied to the backup host as /usr/local/lib/dbzfs/pgbackrest_metrics.py and run as root after
every backup, failed or not (dbzfs-pgbackrest-backup@.service's ExecStopPost), and every 15
minutes (dbzfs-pgbackrest-metrics.timer), so that backups that stop being taken show as ageing
metrics, not as the last ones written; roles/pgbackrest.py writes both command lines:

    python3 /usr/local/lib/dbzfs/pgbackrest_metrics.py [--stanza NAME ...] [--metrics PATH]

It reads `pgbackrest --output=json info` as postgres (runuser, from /: postgres' home is root's
on the backup host) and writes atomically, per stanza: whether pgBackRest reports it ok (status
code 0), the stop time of its newest backup of any type (no series without a backup) and its
number of backups; and whether `info` could be read, and when this ran. With --stanza (the
stanzas the backup unit backs up), exactly those are written: one the repository does not list
(its directory gone) is not ok, with no backup; one listed but not named (a replication group
gone from the inventory, which nothing backs up any more) is left out.

Exit status: 0 when `info` was read, whatever the stanzas' state (the alerts read that); 1 when it
failed (the metrics say so, without stanza series) or the metrics could not be written.
Python 3.11 standard library only (Debian 12's python3); the parsing is pure and the command goes
through an injectable runner, for the unit tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

METRICS = "/var/lib/prometheus/node-exporter/dbzfs_pgbackrest.prom"  # node_exporter's textfile dir
# As facts/pgbackrest.py reads it: warnings and errors go to stderr, stdout is the JSON only.
INFO = ["runuser", "-u", "postgres", "--", "pgbackrest", "--log-level-console=error", "--output=json", "info"]
INFO_TIMEOUT = 60  # seconds: an ExecStopPost has TimeoutStopSec's, 90 s by default
TIMED_OUT = 124
TAIL_LINES = 5
OK = 0  # pgBackRest's status code of a healthy stanza
MISSING_STANZA_PATH = 1  # the code `info --stanza=NAME` gives a stanza without its directory

HELP = {
    "dbzfs_pgbackrest_stanza_ok": "1 when pgBackRest reports the stanza ok (status code 0), else 0.",
    "dbzfs_pgbackrest_newest_backup_timestamp_seconds": "Stop time (Unix) of the stanza's newest "
    "backup, of any type.",
    "dbzfs_pgbackrest_backups": "Backups of the stanza in the repository.",
    "dbzfs_pgbackrest_info_success": "1 when the last run read pgbackrest info, else 0.",
    "dbzfs_pgbackrest_last_run_timestamp_seconds": "Unix time of the last run of pgbackrest_metrics.",
}


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[..., Result]  # (argv, timeout=seconds) -> Result; never raises


class Stanza(NamedTuple):
    name: str
    code: int  # pgBackRest's status code
    message: str
    backups: int
    newest: int | None = None  # the newest backup's stop time
    newest_label: str | None = None


class InfoError(ValueError):
    """pgbackrest info printed something else than its JSON."""


# --- what info says (pure) -----------------------------------------------------------------------


def parse_info(text: str) -> list[Stanza]:
    """The stanzas of `pgbackrest --output=json info`, in its order."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InfoError(f"not JSON: {exc}") from None
    if not isinstance(document, list):
        raise InfoError("not a JSON list of stanzas")
    stanzas = []
    for item in document:
        try:
            backups = item.get("backup") or []
            newest = max(backups, key=lambda b: b["timestamp"]["stop"], default=None)
            stanzas.append(
                Stanza(
                    name=str(item["name"]),
                    code=int(item["status"]["code"]),
                    message=str(item["status"].get("message", "")),
                    backups=len(backups),
                    newest=int(newest["timestamp"]["stop"]) if newest else None,
                    newest_label=str(newest["label"]) if newest else None,
                )
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise InfoError(f"a stanza not as pgBackRest lists one ({type(exc).__name__}: {exc})") from None
    return stanzas


def selected(stanzas: Sequence[Stanza], names: Sequence[str]) -> tuple[list[Stanza], list[str]]:
    """The stanzas named, in that order (one info does not list: not ok, no backup), and the names
    of the others info lists; without names, every stanza listed and none left out."""
    if not names:
        return list(stanzas), []
    listed = {s.name: s for s in stanzas}
    found = [
        listed.get(name) or Stanza(name, MISSING_STANZA_PATH, "not in the repository", 0) for name in names
    ]
    return found, [s.name for s in stanzas if s.name not in names]


def failure_tail(result: Result) -> str:
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()][-TAIL_LINES:]
    return " | ".join(lines) or f"exit status {result.returncode}"


def report_line(stanza: Stanza) -> str:
    text = f"{stanza.name}: {stanza.message or 'no message'} (status {stanza.code}), "
    if stanza.newest is None:
        return text + "no backup"
    stop = datetime.fromtimestamp(stanza.newest, UTC)
    return (
        text
        + f"{stanza.backups} backups, the newest {stanza.newest_label} (ended {stop:%Y-%m-%d %H:%M:%S} UTC)"
    )


# --- the metrics ---------------------------------------------------------------------------------


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def metrics_text(stanzas: Sequence[Stanza] | None, now: datetime) -> str:
    """The metrics of a run; `stanzas` None: info could not be read."""
    samples: dict[str, list[tuple[str, int]]] = {name: [] for name in HELP}
    for s in stanzas or ():
        labels = f'{{stanza="{escape_label_value(s.name)}"}}'
        samples["dbzfs_pgbackrest_stanza_ok"].append((labels, int(s.code == OK)))
        if s.newest is not None:
            samples["dbzfs_pgbackrest_newest_backup_timestamp_seconds"].append((labels, s.newest))
        samples["dbzfs_pgbackrest_backups"].append((labels, s.backups))
    samples["dbzfs_pgbackrest_info_success"].append(("", int(stanzas is not None)))
    samples["dbzfs_pgbackrest_last_run_timestamp_seconds"].append(("", int(now.timestamp())))
    return "".join(
        f"# HELP {name} {HELP[name]}\n# TYPE {name} gauge\n"
        + "".join(f"{name}{labels} {value}\n" for labels, value in samples[name])
        for name in HELP
        if samples[name]
    )


def write_metrics(path: str, text: str) -> None:
    """For node_exporter's textfile collector, atomically (a dot file, then renamed)."""
    directory, base = os.path.split(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            os.fchmod(handle.fileno(), 0o644)
            # durable before the rename: the converge reads this file to know the backup job has
            # run (operations/snapshots.first_run), and a power loss must not leave it empty
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


# --- the command line ----------------------------------------------------------------------------


def run(argv: Sequence[str], timeout: float = INFO_TIMEOUT) -> Result:
    try:
        done = subprocess.run(
            list(argv), cwd="/", capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return Result(TIMED_OUT, "", f"{argv[0]} timed out after {timeout:.0f} s")
    except OSError as exc:
        return Result(127, "", f"{argv[0]}: {exc}")
    return Result(done.returncode, done.stdout, done.stderr)


def main(argv: list[str] | None = None, runner: Runner = run, now: datetime | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="pgBackRest's backups for node_exporter's textfile collector."
    )
    parser.add_argument(
        "--stanza",
        action="append",
        default=[],
        metavar="NAME",
        help="a stanza backed up here (repeatable): exactly these are written",
    )
    parser.add_argument("--metrics", default=METRICS, help="the .prom file to write (replaced atomically)")
    args = parser.parse_args(argv)
    now = now or datetime.now(UTC).replace(microsecond=0)
    stanzas: list[Stanza] | None = None
    done = runner(INFO, timeout=INFO_TIMEOUT)
    if done.returncode != 0:
        print(f"pgbackrest_metrics: {shlex.join(INFO)} failed: {failure_tail(done)}", file=sys.stderr)
    else:
        try:
            stanzas, left_out = selected(parse_info(done.stdout), args.stanza)
        except InfoError as exc:
            print(f"pgbackrest_metrics: {shlex.join(INFO)}: {exc}", file=sys.stderr)
        else:
            for stanza in stanzas:
                print(f"pgbackrest_metrics: {report_line(stanza)}")
            for name in left_out:
                print(f"pgbackrest_metrics: {name}: not backed up here (no --stanza {name}), left out")
    try:
        write_metrics(args.metrics, metrics_text(stanzas, now))
    except OSError as exc:
        print(f"pgbackrest_metrics: cannot write {args.metrics}: {exc}", file=sys.stderr)
        return 1
    return 0 if stanzas is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
