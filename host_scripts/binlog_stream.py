#!/usr/bin/python3
"""Stream one MariaDB replication group's binlogs to the backup host (roles/binlogs.py): the
point-in-time recovery of MariaDB replays them over a restored snapshot.

`mariadb-binlog --read-from-remote-server --raw --stop-never` asks the group's primary for its
binlogs as a replica would (the account dbzfs_binlog, REPLICATION SLAVE and BINLOG MONITOR only)
and writes each file as it is on the server into the directory. It starts again from the newest
file it holds (that file is fetched again whole: raw mode writes files from their start), or from
the server's oldest when it holds none. A server that purged the file it holds leaves a gap: said
in the log and in the metrics (dbzfs_binlog_gap 1), and streaming goes on from the server's
oldest. While it runs, the metrics file (node_exporter's textfile collector) says when the newest
file was last written. Every PRUNE_EVERY seconds it deletes the files whose last write is older
than the group's oldest copy on this host (`copies`, the snapshots a restore starts from) by more
than PRUNE_MARGIN: a restore replays binlogs from a copy on, never from before the oldest one; the
newest two files are always kept. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

METRICS_EVERY = 30  # seconds
PRUNE_EVERY = 600  # seconds
PRUNE_MARGIN = 3600  # seconds: a file's mtime is its last event's time or later (a refetch)
KEEP_NEWEST = 2


@dataclass(frozen=True)
class Config:
    cluster: str
    host: str
    address: str
    port: int
    directory: str
    defaults_file: str  # [client] user and password, root's, 0600
    server_id: int  # the replica server_id the stream presents (unique per group)
    metrics: str
    copies: str  # the group's copies on this host: <pool>/backup/<cluster>


def load_config(text: str) -> Config:
    raw = json.loads(text)
    return Config(
        cluster=str(raw["cluster"]),
        host=str(raw["host"]),
        address=str(raw["address"]),
        port=int(raw["port"]),
        directory=str(raw["directory"]),
        defaults_file=str(raw["defaults_file"]),
        server_id=int(raw["server_id"]),
        metrics=str(raw["metrics"]),
        copies=str(raw["copies"]),
    )


BINLOG = re.compile(r"^(?P<base>[A-Za-z0-9_.-]+)\.(?P<number>\d{6,})$")


def local_files(directory: str) -> list[str]:
    """The binlog files held, oldest first (by their number)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(int(m.group("number")), n) for n in names if (m := BINLOG.match(n))]
    return [n for _, n in sorted(found)]


def server_files_command(config: Config) -> list[str]:
    return [
        "mariadb",
        f"--defaults-extra-file={config.defaults_file}",
        f"--host={config.address}",
        f"--port={config.port}",
        "--batch",
        "--skip-column-names",
        "--execute=SHOW BINARY LOGS",
    ]


def parse_server_files(output: str) -> list[str]:
    return [line.split("\t")[0] for line in output.splitlines() if line.strip()]


def start_file(held: Sequence[str], on_server: Sequence[str]) -> tuple[str, bool]:
    """(the file to stream from, whether the held files and the server's leave a gap)."""
    if not on_server:
        raise RuntimeError("the server lists no binary log (log_bin off?)")
    if not held:
        return on_server[0], False
    if held[-1] in on_server:
        return held[-1], False
    return on_server[0], True


def stream_command(config: Config, first: str) -> list[str]:
    return [
        "mariadb-binlog",
        f"--defaults-extra-file={config.defaults_file}",
        "--read-from-remote-server",
        f"--host={config.address}",
        f"--port={config.port}",
        "--raw",
        "--stop-never",
        f"--stop-never-slave-server-id={config.server_id}",
        f"--result-file={config.directory.rstrip('/')}/",
        first,
    ]


def oldest_copy_command(config: Config) -> list[str]:
    return ["zfs", "list", "-Hp", "-t", "snapshot", "-o", "creation", "-s", "creation", "-r", config.copies]


def oldest_copy(output: str) -> int | None:
    """The creation time of the oldest copy (zfs list, oldest first), None without any."""
    for line in output.splitlines():
        if line.strip().isdigit():
            return int(line.strip())
    return None


def prunable(directory: str, held: Sequence[str], oldest: int | None) -> list[str]:
    """The held files (oldest first) that no restore needs: last written more than PRUNE_MARGIN
    before the oldest copy; never one of the newest KEEP_NEWEST, nothing without a copy."""
    if oldest is None:
        return []
    old = []
    for name in held[:-KEEP_NEWEST] if len(held) > KEEP_NEWEST else []:
        if os.stat(os.path.join(directory, name)).st_mtime >= oldest - PRUNE_MARGIN:
            break  # in order: the files after it are newer
        old.append(name)
    return old


def prune(config: Config, runner: Callable[..., subprocess.CompletedProcess]) -> list[str]:
    listed = runner(oldest_copy_command(config), capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        print(f"binlog_stream: cannot list {config.copies}: {listed.stderr.strip()}", file=sys.stderr)
        return []
    old = prunable(config.directory, local_files(config.directory), oldest_copy(listed.stdout))
    for name in old:
        os.unlink(os.path.join(config.directory, name))
    if old:
        print(f"binlog_stream: pruned {len(old)} file(s) older than the oldest copy: {old[0]} .. {old[-1]}")
    return old


def metrics_text(config: Config, held: Sequence[str], gap: bool, streaming: bool) -> str:
    labels = f'cluster="{config.cluster}",source="{config.host}"'
    newest = 0.0
    if held:
        newest = os.stat(os.path.join(config.directory, held[-1])).st_mtime
    return (
        "# HELP dbzfs_binlog_streaming Whether the binlog stream of the group runs (roles/binlogs.py).\n"
        "# TYPE dbzfs_binlog_streaming gauge\n"
        f"dbzfs_binlog_streaming{{{labels}}} {int(streaming)}\n"
        "# HELP dbzfs_binlog_newest_write_timestamp_seconds When the newest binlog file held was written.\n"
        "# TYPE dbzfs_binlog_newest_write_timestamp_seconds gauge\n"
        f"dbzfs_binlog_newest_write_timestamp_seconds{{{labels}}} {newest:.0f}\n"
        "# HELP dbzfs_binlog_gap Whether the server purged binlogs this host never got.\n"
        "# TYPE dbzfs_binlog_gap gauge\n"
        f"dbzfs_binlog_gap{{{labels}}} {int(gap)}\n"
        "# HELP dbzfs_binlog_files The binlog files held for the group's source.\n"
        "# TYPE dbzfs_binlog_files gauge\n"
        f"dbzfs_binlog_files{{{labels}}} {len(held)}\n"
    )


def write_metrics(path: str, text: str) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".dbzfs_binlog.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def run(
    config: Config,
    runner: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    popen: Callable[..., subprocess.Popen] = subprocess.Popen,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    Path(config.directory).mkdir(parents=True, exist_ok=True)
    listed = runner(server_files_command(config), capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        print(
            f"binlog_stream: {config.host}: SHOW BINARY LOGS failed: {listed.stderr.strip()}", file=sys.stderr
        )
        write_metrics(config.metrics, metrics_text(config, local_files(config.directory), False, False))
        return 1
    held = local_files(config.directory)
    first, gap = start_file(held, parse_server_files(listed.stdout))
    if gap:
        print(
            f"binlog_stream: {config.host} no longer has {held[-1]}: a gap after it; streaming from {first}",
            file=sys.stderr,
        )
    print(f"binlog_stream: {config.cluster}: streaming {config.host}'s binlogs from {first}", flush=True)
    proc = popen(stream_command(config, first))
    pruned_at = None
    while proc.poll() is None:
        if pruned_at is None or clock() - pruned_at >= PRUNE_EVERY:
            prune(config, runner)
            pruned_at = clock()
        write_metrics(config.metrics, metrics_text(config, local_files(config.directory), gap, True))
        sleep(METRICS_EVERY)
    write_metrics(config.metrics, metrics_text(config, local_files(config.directory), gap, False))
    print(f"binlog_stream: mariadb-binlog ended with {proc.returncode}", file=sys.stderr)
    return proc.returncode or 1  # --stop-never: any end is a failure; systemd restarts it


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    return run(load_config(Path(args.config).read_text()))


if __name__ == "__main__":
    sys.exit(main())
