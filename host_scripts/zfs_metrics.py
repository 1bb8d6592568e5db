#!/usr/bin/python3
"""ZFS metrics for node_exporter's textfile collector (dbzfs).

Copied to each database host as /usr/local/lib/dbzfs/zfs_metrics.py and run as root by a systemd
timer:

    python3 /usr/local/lib/dbzfs/zfs_metrics.py --output /var/lib/prometheus/node-exporter/dbzfs_zfs.prom

Python 3.11 standard library only (Debian 12's python3). It writes the Prometheus text exposition
format atomically (a temporary file in the output's directory, then os.replace), so node_exporter
reads either the previous file or the new one, never a half-written one.

Sources, read as OpenZFS 2.3 prints them:
- `zpool status -j --json-int`: pool state, the vdev tree with each leaf's READ/WRITE/CKSUM
  counters, the spares with AVAIL/INUSE, the last scan (`scan_stats`: function, state, end_time,
  errors as integers) and the pool's data error count (`error_count`). If it fails (a ZFS older
  than 2.3 has no -j), `zpool status -p` is read instead: the same facts from the text layout.
- `zpool list -Hp -o name,size,allocated,free,fragmentation,capacity,health`: sizes in bytes.
- `zfs list -Hp -t snapshot -o name,creation`: the newest snapshot of each dataset.

When a command fails, what could be gathered is still written, with dbzfs_zfs_metrics_success 0
and the previous file's last-success time, and the script exits 1 so that systemd shows the
failure. The parsing functions are pure (command output in, samples out) for the unit tests.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

METRICS: dict[str, str] = {
    "dbzfs_zpool_online": "1 when the pool's state is ONLINE, else 0.",
    "dbzfs_zpool_state": "The pool's state (ONLINE, DEGRADED, FAULTED, SUSPENDED, ...): 1 for the "
    "current one.",
    "dbzfs_zpool_size_bytes": "The pool's size in bytes (zpool list SIZE).",
    "dbzfs_zpool_allocated_bytes": "Bytes allocated in the pool (zpool list ALLOC).",
    "dbzfs_zpool_free_bytes": "Bytes free in the pool (zpool list FREE).",
    "dbzfs_zpool_capacity_percent": "Percentage of the pool allocated (zpool list CAP).",
    "dbzfs_zpool_fragmentation_percent": "Free space fragmentation of the pool in percent (zpool list FRAG).",
    "dbzfs_zpool_errors": "I/O errors (read, write, checksum) summed over the pool's leaf devices, "
    "spares counted only while in use.",
    "dbzfs_zpool_device_errors": "I/O errors (read, write, checksum) of one leaf device of the pool.",
    "dbzfs_zpool_data_errors": "Files or metadata with permanent (unrecoverable) errors in the pool.",
    "dbzfs_zpool_scrub_end_timestamp_seconds": "Unix time the pool's last scrub finished; 0 when it was "
    "never scrubbed, or its last scan is a scrub in progress or canceled, or a resilver.",
    "dbzfs_zpool_scrub_errors": "Errors the pool's last finished scrub found (0 when none finished).",
    "dbzfs_zpool_scrub_in_progress": "1 while a scrub of the pool runs (or is paused), else 0.",
    "dbzfs_zpool_spares": "Hot spares configured in the pool.",
    "dbzfs_zpool_spares_in_use": "Hot spares of the pool that replace a device (INUSE).",
    "dbzfs_zfs_newest_snapshot_timestamp_seconds": "Creation time (Unix) of the dataset's newest snapshot.",
    "dbzfs_zfs_metrics_last_success_timestamp_seconds": "Unix time of the last run of the dbzfs ZFS "
    "collector in which every command succeeded.",
    "dbzfs_zfs_metrics_success": "1 when every command of the dbzfs ZFS collector's last run succeeded, "
    "else 0.",
}

ERROR_TYPES = ("read", "write", "checksum")

ZPOOL_STATUS_JSON = ["zpool", "status", "-j", "--json-int"]
ZPOOL_STATUS_TEXT = ["zpool", "status", "-p"]
ZPOOL_LIST = ["zpool", "list", "-Hp", "-o", "name,size,allocated,free,fragmentation,capacity,health"]
ZFS_SNAPSHOTS = ["zfs", "list", "-Hp", "-t", "snapshot", "-o", "name,creation"]

# Variables that change how zpool names devices (full paths, guids, resolved links): the device label
# must be the short name zpool prints by default.
ZPOOL_NAME_VARIABLES = ("ZPOOL_VDEV_NAME_PATH", "ZPOOL_VDEV_NAME_GUID", "ZPOOL_VDEV_NAME_FOLLOW_LINKS")


class Sample(NamedTuple):
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


def sample(name: str, value: float, **labels: str) -> Sample:
    return Sample(name, tuple(labels.items()), value)


class CommandFailed(Exception):
    """A command could not be run, failed or hung."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


# --- Pool status: one record per pool, from the JSON or the text output ----------------------------


class PoolStatus(NamedTuple):
    name: str
    state: str
    # (device, read, write, checksum) for each leaf device outside the spares section
    devices: list[tuple[str, int, int, int]]
    data_errors: int | None
    scrub_end: int
    scrub_errors: int
    scrub_in_progress: bool
    spares: int
    spares_in_use: int


def _int(value: object) -> int:
    """A counter as zpool prints it: an integer (--json-int), digits (-p), or, leniently, a
    nicenum such as 1.2K (without -p)."""
    if isinstance(value, bool):
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTPE])", text)
    if not match:
        raise ValueError(f"not a number: {value!r}")
    return int(float(match.group(1)) * 1024 ** ("KMGTPE".index(match.group(2)) + 1))


def _json_leaves(vdevs: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for key, vdev in vdevs.items():
        children = vdev.get("vdevs")
        if children:
            yield from _json_leaves(children)
        else:
            yield vdev.get("name", key), vdev


def parse_zpool_status_json(text: str) -> list[PoolStatus]:
    """`zpool status -j --json-int` (OpenZFS 2.3: output_version 0.1)."""
    try:
        document = json.loads(text)
        pools = []
        for key, pool in (document.get("pools") or {}).items():
            name = pool.get("name", key)
            top_level: dict[str, Any] = {}
            for root in (pool.get("vdevs") or {}).values():  # one root vdev, named after the pool
                top_level.update(root.get("vdevs") or {})
            devices = []
            # Log, special, dedup and cache devices have counters too; spares only where they sit in
            # the tree (spare-N) while in use: the "spares" section has no counters.
            for section in (top_level, *(pool.get(s) or {} for s in ("dedup", "special", "logs", "l2cache"))):
                for device, vdev in _json_leaves(section):
                    devices.append(
                        (
                            device,
                            _int(vdev.get("read_errors", 0)),
                            _int(vdev.get("write_errors", 0)),
                            _int(vdev.get("checksum_errors", 0)),
                        )
                    )
            spares = pool.get("spares") or {}
            scan = pool.get("scan_stats") or {}
            is_scrub = scan.get("function") == "SCRUB"
            finished = is_scrub and scan.get("state") == "FINISHED"
            error_count = pool.get("error_count")
            pools.append(
                PoolStatus(
                    name=name,
                    state=pool["state"],
                    devices=devices,
                    data_errors=None if error_count is None else _int(error_count),
                    scrub_end=_int(scan.get("end_time", 0)) if finished else 0,
                    scrub_errors=_int(scan.get("errors", 0)) if finished else 0,
                    scrub_in_progress=is_scrub and scan.get("state") == "SCANNING",
                    spares=len(spares),
                    spares_in_use=sum(1 for s in spares.values() if s.get("state") == "INUSE"),
                )
            )
        return pools
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"unexpected zpool status JSON: {exc}") from exc


_SCRUB_FINISHED = re.compile(r"scrub repaired \S+ in .+? with (\d+) errors on (.+)")


def _ctime(text: str) -> int:
    """ctime(3) as zpool prints it (`Sun Jun  8 00:24:03 2025`), in the host's local time."""
    return int(time.mktime(time.strptime(text.strip(), "%a %b %d %H:%M:%S %Y")))


def _text_pool(lines: list[str]) -> PoolStatus:
    name = lines[0].split(":", 1)[1].strip()
    state = ""
    scans: list[str] = []
    data_errors: int | None = None
    config: list[str] = []
    in_config = False
    for i, line in enumerate(lines):
        if line.startswith(" state: "):
            state = line.split(":", 1)[1].strip()
        elif line.startswith("  scan: "):
            scans.append(line.split(":", 1)[1].strip())
        elif line == "config:":
            in_config = True
        elif in_config and line.startswith("\t"):
            config.append(line[1:])
        elif in_config and config and not line.strip():
            in_config = False
        elif line.startswith("errors: "):
            message = line[len("errors: ") :]
            if message.startswith("No known data errors"):
                data_errors = 0
            elif match := re.match(r"(\d+) data errors", message):
                data_errors = int(match.group(1))
            elif message.startswith("Permanent errors have been detected"):  # -v: one line a file
                data_errors = sum(1 for rest in lines[i + 2 :] if rest.startswith("        "))
    if not state or not config or not config[0].startswith("NAME"):
        raise ValueError(f"pool {name}: no state or config in zpool status")

    # The config tree: "<depth spaces><name>  <state> <read> <write> <cksum> [note]", with section
    # headers (logs, dedup, special, cache, spares) as lone words at depth 0.
    nodes: list[tuple[str, int, str, tuple[int, int, int] | None]] = []
    section = ""
    spares = spares_in_use = 0
    for row in config[1:]:
        fields = row.split()
        depth = len(row) - len(row.lstrip(" "))
        if len(fields) == 1 and depth == 0:
            section = fields[0]
            continue
        if section == "spares":
            spares += 1
            spares_in_use += fields[1] == "INUSE"
            continue
        counters = (_int(fields[2]), _int(fields[3]), _int(fields[4])) if len(fields) >= 5 else None
        nodes.append((section, depth, fields[0], counters))
    devices = []
    for i, (node_section, depth, device, counters) in enumerate(nodes):
        following = nodes[i + 1] if i + 1 < len(nodes) else None
        is_leaf = following is None or following[0] != node_section or following[1] <= depth
        if is_leaf and counters is not None and not (node_section == "" and depth == 0):
            devices.append((device, *counters))

    scrub_end = scrub_errors = 0
    scrub_in_progress = False
    for scan in scans:
        if match := _SCRUB_FINISHED.match(scan):
            scrub_errors, scrub_end = int(match.group(1)), _ctime(match.group(2))
        elif scan.startswith(("scrub in progress since", "scrub paused since")):
            scrub_in_progress = True
    return PoolStatus(
        name=name,
        state=state,
        devices=devices,
        data_errors=data_errors,
        scrub_end=scrub_end,
        scrub_errors=scrub_errors,
        scrub_in_progress=scrub_in_progress,
        spares=spares,
        spares_in_use=spares_in_use,
    )


def parse_zpool_status_text(text: str) -> list[PoolStatus]:
    """`zpool status -p` (the fallback when -j is missing or fails)."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("  pool: "):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    try:
        return [_text_pool(block) for block in blocks]
    except (ValueError, IndexError) as exc:
        raise ValueError(f"unexpected zpool status output: {exc}") from exc


def pool_status_samples(pools: Iterable[PoolStatus]) -> list[Sample]:
    samples = []
    for pool in pools:
        p = pool.name
        samples.append(sample("dbzfs_zpool_online", int(pool.state == "ONLINE"), pool=p))
        samples.append(sample("dbzfs_zpool_state", 1, pool=p, state=pool.state))
        per_device: dict[str, list[int]] = {}
        for device, *counters in pool.devices:
            totals = per_device.setdefault(device, [0, 0, 0])
            for i, count in enumerate(counters):
                totals[i] += count
        for i, kind in enumerate(ERROR_TYPES):
            total = sum(counters[i] for counters in per_device.values())
            samples.append(sample("dbzfs_zpool_errors", total, pool=p, type=kind))
        for device, counters in per_device.items():
            for i, kind in enumerate(ERROR_TYPES):
                samples.append(
                    sample("dbzfs_zpool_device_errors", counters[i], pool=p, device=device, type=kind)
                )
        if pool.data_errors is not None:
            samples.append(sample("dbzfs_zpool_data_errors", pool.data_errors, pool=p))
        samples.append(sample("dbzfs_zpool_scrub_end_timestamp_seconds", pool.scrub_end, pool=p))
        samples.append(sample("dbzfs_zpool_scrub_errors", pool.scrub_errors, pool=p))
        samples.append(sample("dbzfs_zpool_scrub_in_progress", int(pool.scrub_in_progress), pool=p))
        samples.append(sample("dbzfs_zpool_spares", pool.spares, pool=p))
        samples.append(sample("dbzfs_zpool_spares_in_use", pool.spares_in_use, pool=p))
    return samples


def zpool_status_json_samples(text: str) -> list[Sample]:
    return pool_status_samples(parse_zpool_status_json(text))


def zpool_status_text_samples(text: str) -> list[Sample]:
    return pool_status_samples(parse_zpool_status_text(text))


# --- zpool list, zfs list ---------------------------------------------------------------------------

_LIST_COLUMNS = (
    ("dbzfs_zpool_size_bytes", 1),
    ("dbzfs_zpool_allocated_bytes", 2),
    ("dbzfs_zpool_free_bytes", 3),
    ("dbzfs_zpool_fragmentation_percent", 4),
    ("dbzfs_zpool_capacity_percent", 5),
)


def zpool_list_samples(text: str) -> list[Sample]:
    """`zpool list -Hp -o name,size,allocated,free,fragmentation,capacity,health`. A value zpool
    cannot tell ("-": fragmentation without spacemap_histogram, any size of an unavailable pool)
    gives no sample."""
    samples = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 7:
            raise ValueError(f"unexpected zpool list line: {line!r}")
        for name, column in _LIST_COLUMNS:
            if fields[column] != "-":
                samples.append(sample(name, _int(fields[column]), pool=fields[0]))
    return samples


def zfs_snapshot_samples(text: str) -> list[Sample]:
    """`zfs list -Hp -t snapshot -o name,creation`: each dataset's newest snapshot."""
    newest: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, _, creation = line.partition("\t")
        dataset, at, _ = name.partition("@")
        if not at or not creation.isdigit():
            raise ValueError(f"unexpected zfs list line: {line!r}")
        newest[dataset] = max(newest.get(dataset, 0), int(creation))
    return [
        sample("dbzfs_zfs_newest_snapshot_timestamp_seconds", created, dataset=dataset)
        for dataset, created in sorted(newest.items())
    ]


# --- Exposition format -------------------------------------------------------------------------------


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_value(value: float) -> str:
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def render(samples: Iterable[Sample]) -> str:
    """The samples as Prometheus text exposition format: each family once, with # HELP and # TYPE,
    in METRICS' order. A sample of an unknown metric or a repeated series is a bug: ValueError."""
    families: dict[str, list[Sample]] = {name: [] for name in METRICS}
    seen = set()
    for s in samples:
        if s.name not in families:
            raise ValueError(f"unknown metric {s.name}")
        if (s.name, s.labels) in seen:
            raise ValueError(f"repeated series {s.name}{dict(s.labels)}")
        seen.add((s.name, s.labels))
        families[s.name].append(s)
    lines = []
    for name, members in families.items():
        if not members:
            continue
        lines.append(f"# HELP {name} {METRICS[name]}")
        lines.append(f"# TYPE {name} gauge")
        for s in members:
            labels = ",".join(f'{key}="{escape_label_value(value)}"' for key, value in s.labels)
            lines.append(
                f"{name}{{{labels}}} {_format_value(s.value)}"
                if labels
                else f"{name} {_format_value(s.value)}"
            )
    return "".join(line + "\n" for line in lines)


def write_atomically(path: str, text: str) -> None:
    """Replace path with text: readers see the old file or the new one, never part of one. The
    temporary file is a dot file not ending in .prom, which node_exporter ignores."""
    directory, base = os.path.split(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            os.fchmod(handle.fileno(), 0o644)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def remove_stale_temporaries(path: str, older_than: float = 3600) -> None:
    """Temporary files left by a run that was killed mid-write (write_atomically removes its own)."""
    directory, base = os.path.split(os.path.abspath(path))
    cutoff = time.time() - older_than
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name.startswith(f".{base}.") and name.endswith(".tmp"):
            try:
                if os.lstat(os.path.join(directory, name)).st_mtime < cutoff:
                    os.unlink(os.path.join(directory, name))
            except OSError:
                pass


def previous_last_success(path: str) -> float | None:
    """The last-success time in the file this run replaces, carried over by a failed run."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return None
    match = re.search(r"^dbzfs_zfs_metrics_last_success_timestamp_seconds (\S+)$", text, re.MULTILINE)
    if not match:
        return None
    try:
        value = float(match.group(1))
    except ValueError:
        return None
    return int(value) if value.is_integer() else value


# --- Running the commands ----------------------------------------------------------------------------


def run(argv: list[str], timeout: float) -> str:
    """A command's standard output; CommandFailed when it cannot start, fails or hangs."""
    env = {k: v for k, v in os.environ.items() if k not in ZPOOL_NAME_VARIABLES}
    env["LC_ALL"] = "C"
    command = " ".join(argv)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=env,
        )
    except OSError as exc:
        raise CommandFailed(f"{command}: {exc.strerror or exc}") from exc
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        try:
            process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass  # stuck in the kernel (a suspended pool): leave it rather than hang with it
        raise CommandFailed(f"{command}: no answer within {timeout:g} s", timed_out=True) from None
    if process.returncode != 0:
        detail = " ".join(err.split())[:500] or "no message"
        raise CommandFailed(f"{command} exited with status {process.returncode}: {detail}")
    return out


def collect(timeout: float) -> tuple[list[Sample], list[str]]:
    """Every sample the commands give, and a message for each command that failed."""
    samples: list[Sample] = []
    failures: list[str] = []

    try:
        samples += zpool_status_json_samples(run(ZPOOL_STATUS_JSON, timeout))
    except (CommandFailed, ValueError) as json_failure:
        # -j is new in 2.3: read the text instead, unless zpool hangs (the text would hang too)
        if isinstance(json_failure, CommandFailed) and json_failure.timed_out:
            failures.append(str(json_failure))
        else:
            try:
                samples += zpool_status_text_samples(run(ZPOOL_STATUS_TEXT, timeout))
                print(f"zfs_metrics: {json_failure}; read zpool status -p instead", file=sys.stderr)
            except (CommandFailed, ValueError) as exc:
                failures += [str(json_failure), str(exc)]

    for argv, parse in ((ZPOOL_LIST, zpool_list_samples), (ZFS_SNAPSHOTS, zfs_snapshot_samples)):
        try:
            samples += parse(run(argv, timeout))
        except (CommandFailed, ValueError) as exc:
            failures.append(str(exc))
    return samples, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ZFS metrics for node_exporter's textfile collector.")
    parser.add_argument("--output", required=True, help="the .prom file to write (replaced atomically)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds each command may take (60)")
    args = parser.parse_args(argv)

    samples, failures = collect(args.timeout)
    for failure in failures:
        print(f"zfs_metrics: {failure}", file=sys.stderr)
    if failures:
        last_success = previous_last_success(args.output)
    else:
        last_success = int(time.time())
    if last_success is not None:
        samples.append(sample("dbzfs_zfs_metrics_last_success_timestamp_seconds", last_success))
    samples.append(sample("dbzfs_zfs_metrics_success", 0 if failures else 1))
    remove_stale_temporaries(args.output)
    try:
        write_atomically(args.output, render(samples))
    except OSError as exc:
        print(f"zfs_metrics: cannot write {args.output}: {exc}", file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
