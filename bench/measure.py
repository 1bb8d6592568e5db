"""What a benchmark run measured, from the tools' own output: parsers and the arithmetic on top.
Pure: every function takes text (a command's output, a /proc file's content) and returns numbers,
so that each parser is tested on real captured output (tests/unit/fixtures/bench/).

- bytes physically written to the pool's drives: /proc/diskstats before and after
  (`written_delta`); each side of a mirror counts, as the drive wrote it;
- the load: sysbench 1.0's oltp_* (`parse_sysbench`), pgbench 15's TPC-B-like (`parse_pgbench`,
  its p95 from the per-transaction log `pgbench_p95`);
- the engine's own write counters: SHOW GLOBAL STATUS and pg_stat_wal before and after
  (`counter_delta`, with the queries in `COUNTER_QUERIES`);
- CPU time: /proc/stat before and after (`cpu_seconds`);
- a run's figures per transaction (`run_figures`), the median and spread of runs (`spread`), and
  ratios to the baseline variant (`ratios`).

Every parser raises ValueError naming what it did not find: a figure silently missing would make
a report that looks complete and is not.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

SECTOR = 512  # /proc/diskstats counts 512-byte sectors whatever the drive's block size
CLOCK_TICKS = 100  # USER_HZ, the unit of /proc/stat: 100 on every Linux architecture we run

# nvme<subsystem>n<namespace>: a namespace (with multipath, its head); nvme<subsystem>c<controller>
# n<namespace>: one path to it, shown by the kernel's NVMe multipath. Partitions (p1) excluded: a
# whole disk's counters already include its partitions'.
NVME_DRIVE = re.compile(r"^nvme(\d+)(?:c(\d+))?n(\d+)$")

# The engine counters each run reads, and the client commands that print them as
# "name<separator>value" lines (what `parse_counters` reads).
MARIADB_COUNTERS = ("Innodb_dblwr_pages_written", "Innodb_os_log_written", "Innodb_data_written")
POSTGRESQL_COUNTERS = ("wal_bytes", "wal_fpi", "wal_records")
COUNTERS = {"mariadb": MARIADB_COUNTERS, "postgresql": POSTGRESQL_COUNTERS}
COUNTER_QUERIES = {
    "mariadb": [
        "mariadb",
        "-NB",
        "-e",
        "SHOW GLOBAL STATUS WHERE Variable_name IN ("
        + ", ".join(f"'{name}'" for name in MARIADB_COUNTERS)
        + ")",
    ],
    "postgresql": [
        "psql",
        "-X",
        "-A",
        "-t",
        "-x",
        "-c",
        f"SELECT {', '.join(POSTGRESQL_COUNTERS)} FROM pg_stat_wal",
    ],
}


# --- block devices ------------------------------------------------------------------------------


def diskstats_written(text: str) -> dict[str, int]:
    """Device name -> bytes written since boot, from /proc/diskstats (field 10: sectors written)."""
    written = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 14 or not fields[9].isdigit():
            raise ValueError(f"not a /proc/diskstats line: {line!r}")
        written[fields[2]] = int(fields[9]) * SECTOR
    return written


def nvme_drives(names: Iterable[str]) -> list[str]:
    """The NVMe devices among `names` whose counters count each drive's writes once: the path
    devices (nvmeXcYnZ) where multipath shows them (a head and its paths both count the same I/O),
    else the namespaces (nvmeXnY)."""
    heads, paths = set(), set()
    with_paths = set()
    for name in names:
        match = NVME_DRIVE.match(name)
        if not match:
            continue
        subsystem, controller, namespace = match.groups()
        if controller is None:
            heads.add(name)
        else:
            paths.add(name)
            with_paths.add(f"nvme{subsystem}n{namespace}")
    return sorted((heads - with_paths) | paths, key=_natural)


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


@dataclass(frozen=True)
class Written:
    """Bytes written during a run, per member drive."""

    per_drive: dict

    @property
    def total(self) -> int:
        return sum(self.per_drive.values())


def written_delta(before: str, after: str, drives: Iterable[str] | None = None) -> Written:
    """Bytes each drive wrote between two /proc/diskstats snapshots. `drives`: the pool's member
    devices by kernel name (the runner resolves them from /dev/disk/by-id); None: every NVMe
    drive (`nvme_drives`) of the second snapshot."""
    start, end = diskstats_written(before), diskstats_written(after)
    names = nvme_drives(end) if drives is None else list(drives)
    if not names:
        raise ValueError("no drives to count: no NVMe device in /proc/diskstats and none named")
    per_drive = {}
    for name in names:
        if name not in start or name not in end:
            raise ValueError(f"drive {name} is not in both /proc/diskstats snapshots")
        if end[name] < start[name]:
            raise ValueError(f"drive {name}'s write counter went back ({start[name]} -> {end[name]})")
        per_drive[name] = end[name] - start[name]
    return Written(per_drive)


# --- the load generators ------------------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    """What a load generator reported for one run of a fixed number of transactions."""

    transactions: int  # committed
    failed: int  # sysbench: ignored errors; pgbench: failed transactions
    tps: float
    latency_avg_ms: float
    latency_p95_ms: float
    seconds: float  # the run's time


def _find(pattern: str, text: str, what: str, tool: str) -> re.Match:
    match = re.search(pattern, text, re.MULTILINE)
    if not match:
        raise ValueError(f"no {what} in the {tool} output")
    return match


def parse_sysbench(text: str) -> Load:
    """sysbench 1.0's report of an oltp_* run (`--percentile=95`)."""
    tool = "sysbench"
    transactions = _find(r"^\s*transactions:\s+(\d+)\s+\(([\d.]+) per sec\.\)", text, "transactions", tool)
    return Load(
        transactions=int(transactions.group(1)),
        failed=int(_find(r"^\s*ignored errors:\s+(\d+)", text, "ignored errors", tool).group(1)),
        tps=float(transactions.group(2)),
        latency_avg_ms=float(_find(r"^\s*avg:\s+([\d.]+)", text, "average latency", tool).group(1)),
        latency_p95_ms=float(
            _find(r"^\s*95th percentile:\s+([\d.]+)", text, "95th percentile", tool).group(1)
        ),
        seconds=float(_find(r"^\s*total time:\s+([\d.]+)s", text, "total time", tool).group(1)),
    )


def pgbench_latencies_ms(log: str) -> list[float]:
    """Latencies (ms) of the committed transactions in a pgbench per-transaction log (`-l`):
    `client_id transaction_no time script_no time_epoch time_us [...]`, time in microseconds,
    "failed" or "skipped" for the others."""
    latencies = []
    for line in log.splitlines():
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 6:
            raise ValueError(f"not a pgbench log line: {line!r}")
        if fields[2] in ("failed", "skipped"):
            continue
        latencies.append(int(fields[2]) / 1000)
    return latencies


def percentile(values: Iterable[float], pct: float) -> float:
    """The nearest-rank percentile: the smallest value with at least pct% of the values at or
    below it (what pgbench's own --aggregate-interval does not give)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values to take a percentile of")
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def pgbench_p95(logs: Iterable[str]) -> float:
    """p95 latency (ms) over one run's log files (one per pgbench thread)."""
    return percentile((ms for log in logs for ms in pgbench_latencies_ms(log)), 95)


def parse_pgbench(text: str, logs: Iterable[str]) -> Load:
    """pgbench 15's report of a `-t` run, with its per-transaction logs for the p95. pgbench
    prints no run time for a fixed number of transactions: it is transactions / tps (which leaves
    out the initial connection time, as the tps does)."""
    tool = "pgbench"
    processed = _find(
        r"^number of transactions actually processed: (\d+)(?:/(\d+))?", text, "transactions processed", tool
    )
    failed = re.search(r"^number of failed transactions: (\d+)", text, re.MULTILINE)
    transactions = int(processed.group(1))
    tps = float(_find(r"^tps = ([\d.]+)", text, "tps", tool).group(1))
    log_lines = list(logs)
    latencies = [ms for log in log_lines for ms in pgbench_latencies_ms(log)]
    if len(latencies) != transactions:
        raise ValueError(f"the pgbench log holds {len(latencies)} transactions, its report {transactions}")
    return Load(
        transactions=transactions,
        failed=int(failed.group(1)) if failed else 0,
        tps=tps,
        latency_avg_ms=float(
            _find(r"^latency average = ([\d.]+) ms", text, "latency average", tool).group(1)
        ),
        latency_p95_ms=percentile(latencies, 95),
        seconds=transactions / tps,
    )


# --- engine counters ----------------------------------------------------------------------------


def parse_counters(text: str) -> dict[str, int]:
    """name -> value from "name<TAB>value" (mariadb -NB) or "name|value" (psql -A -t -x) lines."""
    counters = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = re.split(r"[\t|]", line.strip(), maxsplit=1)
        if len(parts) != 2 or not parts[1].strip().isdigit():
            raise ValueError(f"not a counter line: {line!r}")
        counters[parts[0].strip()] = int(parts[1])
    return counters


def counter_delta(before: str, after: str, names: Iterable[str]) -> dict[str, int]:
    """How much each named counter grew between two readings."""
    start, end = parse_counters(before), parse_counters(after)
    delta = {}
    for name in names:
        if name not in start or name not in end:
            raise ValueError(f"counter {name} is not in both readings")
        if end[name] < start[name]:
            raise ValueError(
                f"counter {name} went back ({start[name]} -> {end[name]}): was the server restarted?"
            )
        delta[name] = end[name] - start[name]
    return delta


# --- CPU ----------------------------------------------------------------------------------------

# /proc/stat's cpu line: user nice system idle iowait irq softirq steal guest guest_nice. Busy time
# is user + nice + system + irq + softirq: idle and iowait are not work, steal is time the
# hypervisor gave to others, guest time is already in user and nice.
BUSY_FIELDS = (0, 1, 2, 5, 6)


def cpu_busy_ticks(text: str) -> int:
    """The machine's busy CPU time since boot, in clock ticks, from /proc/stat's total line."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:]]
            if len(values) < 7:
                raise ValueError(f"short cpu line in /proc/stat: {line!r}")
            return sum(values[i] for i in BUSY_FIELDS)
    raise ValueError("no cpu line in /proc/stat")


def cpu_seconds(before: str, after: str, clock_ticks: int = CLOCK_TICKS) -> float:
    """Busy CPU seconds (all CPUs together) between two /proc/stat readings."""
    ticks = cpu_busy_ticks(after) - cpu_busy_ticks(before)
    if ticks < 0:
        raise ValueError("/proc/stat's busy time went back: readings from two boots?")
    return ticks / clock_ticks


# --- a run's figures, and runs together ---------------------------------------------------------


def run_figures(load: Load, written: Written, counters: Mapping[str, int], cpu: float) -> dict:
    """One run's figures as the results JSON keeps them: totals, and per committed transaction."""
    if load.transactions <= 0:
        raise ValueError("a run with no committed transaction has no figures per transaction")
    per_txn = load.transactions
    return {
        "load": asdict(load),
        "bytes_written": written.total,
        "bytes_written_per_drive": dict(written.per_drive),
        "bytes_per_transaction": written.total / per_txn,
        "counters": dict(counters),
        "counters_per_transaction": {name: value / per_txn for name, value in counters.items()},
        "cpu_seconds": cpu,
        "cpu_ms_per_transaction": cpu * 1000 / per_txn,
    }


@dataclass(frozen=True)
class Spread:
    """The median of a figure over runs, and its lowest and highest value."""

    median: float
    low: float
    high: float


def spread(values: Iterable[float]) -> Spread:
    values = list(values)
    if not values:
        raise ValueError("no runs to take a median of")
    return Spread(statistics.median(values), min(values), max(values))


def ratios(medians: Mapping[str, float], baseline: str) -> dict[str, float]:
    """Each variant's median over the baseline variant's (1.0 for the baseline itself)."""
    if baseline not in medians:
        raise ValueError(f"no {baseline} figure to take ratios to")
    base = medians[baseline]
    if not base or not math.isfinite(base):
        raise ValueError(f"the {baseline} figure is {base}: no ratio can be taken to it")
    return {name: value / base for name, value in medians.items()}


# --- compression --------------------------------------------------------------------------------


def compression_figures(zfs_get: str, dataset: str) -> dict:
    """compressratio, logical and physical bytes of a dataset, from `zfs get -H -p` output
    (name, property, value[, source] per line) holding compressratio, logicalused and used."""
    props = {}
    for line in zfs_get.splitlines():
        fields = line.split("\t")
        if len(fields) >= 3 and fields[0] == dataset:
            props[fields[1]] = fields[2]
    missing = [p for p in ("compressratio", "logicalused", "used") if p not in props]
    if missing:
        raise ValueError(f"no {', '.join(missing)} for {dataset} in the zfs get output")
    return {
        "compressratio": float(props["compressratio"].rstrip("x")),
        "logical_bytes": int(props["logicalused"]),
        "physical_bytes": int(props["used"]),
    }


def compression_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict:
    """What a load added to a dataset (`compression_figures` before and after it): its logical and
    physical bytes, and their ratio, so that what the empty server had written (system tables,
    preallocated files) does not dilute the loaded data's ratio."""
    logical = after["logical_bytes"] - before["logical_bytes"]
    physical = after["physical_bytes"] - before["physical_bytes"]
    if logical <= 0 or physical <= 0:
        raise ValueError(f"the load added no data: {logical} logical, {physical} physical bytes")
    return {"compressratio": logical / physical, "logical_bytes": logical, "physical_bytes": physical}
