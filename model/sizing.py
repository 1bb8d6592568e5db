"""Turns hardware facts into database and ZFS settings. Pure: no I/O, no pyinfra.

Every number here is sized so that, for the engine's memory model on ZFS,

    ARC max + database memory + per-connection memory + OS headroom <= RAM

(`MemoryBudget.check` asserts it). Sources are named in brackets; the facts behind them are in
shared/reference/zfs-db-tuning.md.

Values are plain ints (bytes, counts) or strings; roles.render formats them per engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from model import keys

KIB = 1024
MIB = 1024**2
GIB = 1024**3

ENGINES = keys.choices("engine")  # "mariadb", "postgresql"
WORKLOADS = keys.choices("workload")  # "oltp", "analytics"


@dataclass(frozen=True)
class Hardware:
    ram_bytes: int
    cpus: int
    drives: int


@dataclass(frozen=True)
class MemoryBudget:
    ram: int
    os_headroom: int
    arc_max: int
    database: int  # buffer pool / shared_buffers and the engine's fixed buffers
    connections: int  # worst case of per-connection memory at max_connections
    maintenance: int = 0

    @property
    def total(self) -> int:
        return self.os_headroom + self.arc_max + self.database + self.connections + self.maintenance

    def check(self) -> None:
        if self.total > self.ram:
            raise ValueError(f"memory budget {self.total} exceeds RAM {self.ram}: {self}")


@dataclass(frozen=True)
class Sizing:
    engine: str
    zfs: dict  # ZFS module parameters
    database: dict  # engine settings (name -> int bytes / int / str)
    budget: MemoryBudget
    notes: list = field(default_factory=list)


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def _round_down(value: int, unit: int) -> int:
    return max(unit, value // unit * unit)


def os_headroom(ram: int) -> int:
    # Kernel, sshd, agents, page tables, ZFS's own non-ARC allocations: 1/16 of RAM,
    # 512 MiB..32 GiB.
    return _clamp(ram // 16, 512 * MIB, 32 * GIB)


def arc_min_default(ram: int) -> int:
    # OpenZFS's own arc_c_min: max(RAM/32, 64 MiB). zfs_arc_max below this is IGNORED by the
    # module, so every sized ARC max must stay above it.
    return max(ram // 32, 64 * MIB)


def size(
    hw: Hardware,
    engine: str,
    workload: str = "oltp",
    data_recordsize: int = 16 * KIB,
    max_connections: int | None = None,
) -> Sizing:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}")
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}")
    if hw.ram_bytes < 2 * GIB or hw.cpus < 1:
        raise ValueError(f"hardware too small to size: {hw}")
    if engine == "mariadb":
        return _size_mariadb(hw, workload, data_recordsize, max_connections)
    return _size_postgresql(hw, workload, max_connections)


# --- MariaDB -------------------------------------------------------------------------------------

# Per-connection worst case: sort 2M + join 256K + read 128K + read_rnd 256K + thread stack 292K
# + net buffers; ~3 MiB [MariaDB defaults].
MARIADB_PER_CONNECTION = 3 * MIB
MARIADB_LOG_WRITE_AHEAD_MAX = 4 * KIB


def _size_mariadb(hw: Hardware, workload: str, data_recordsize: int, max_connections: int | None) -> Sizing:
    ram = hw.ram_bytes
    headroom = os_headroom(ram)
    # primarycache=metadata on the InnoDB datasets: the ARC holds metadata only and the buffer
    # pool caches pages [OpenZFS Workload Tuning; Let's Encrypt]. RAM/16 for the ARC, never below
    # the module's own minimum (else zfs_arc_max would be ignored).
    arc_max = max(ram // 16, 2 * arc_min_default(ram))
    if max_connections is None:
        max_connections = (
            _clamp(hw.cpus * 16, 151, 4096) if workload == "oltp" else _clamp(hw.cpus * 4, 50, 1000)
        )
        # Connections' worst case may take at most 1/8 of RAM, whatever the CPU count.
        max_connections = max(50, min(max_connections, ram // 8 // MARIADB_PER_CONNECTION))
    connections = max_connections * MARIADB_PER_CONNECTION
    # The buffer pool takes 3/4 of what is left, like innodb_dedicated_server's 0.75 x RAM
    # [MySQL docs], rounded to the 128 MiB buffer-pool chunk (1 GiB on large hosts).
    spare = ram - headroom - arc_max - connections
    chunk = GIB if ram >= 64 * GIB else 128 * MIB
    buffer_pool = _round_down(spare * 3 // 4, chunk)
    # Redo capacity: (logical CPUs / 2) GiB, max 16 GiB [innodb_dedicated_server], and never
    # more than a quarter of the buffer pool on small hosts.
    log_file = _clamp(hw.cpus // 2, 1, 16) * GIB
    log_file = max(256 * MIB, min(log_file, _round_down(buffer_pool // 4, 256 * MIB)))
    # Let's Encrypt ran 1000 / 2500 on 24 NVMe drives: scale by drive count, 100-IOPS steps.
    io_capacity = _clamp(round(hw.drives * 1000 / 24, -2), 200, 20000)
    db = {
        "innodb_buffer_pool_size": buffer_pool,
        "innodb_log_file_size": log_file,
        "innodb_log_buffer_size": min(64 * MIB, max(16 * MIB, buffer_pool // 64)),
        # Redo writes padded to the record size avoid read-modify-write [Let's Encrypt: 16384
        # = recordsize]. MariaDB 10.11 (Debian 12) accepts at most 4096 and silently adjusts a
        # larger value (seen by mariadbd in tests/unit/test_templates.py), so cap it there.
        "innodb_log_write_ahead_size": min(data_recordsize, MARIADB_LOG_WRITE_AHEAD_MAX),
        "innodb_io_capacity": int(io_capacity),
        "innodb_io_capacity_max": int(io_capacity * 5 // 2),
        "innodb_read_io_threads": _clamp(hw.cpus // 4, 4, 64),
        "innodb_write_io_threads": _clamp(hw.cpus // 4, 4, 64),
        "max_connections": max_connections,
        "table_open_cache": _clamp(max_connections * 2, 2000, 16384),
    }
    zfs = {
        "zfs_arc_max": arc_max,
        # InnoDB does its own read-ahead; ZFS prefetch on top only wastes I/O [Let's Encrypt].
        "zfs_prefetch_disable": 1,
    }
    budget = MemoryBudget(
        ram=ram,
        os_headroom=headroom,
        arc_max=arc_max,
        database=buffer_pool + db["innodb_log_buffer_size"],
        connections=connections,
    )
    budget.check()
    return Sizing("mariadb", zfs, db, budget)


# --- PostgreSQL ----------------------------------------------------------------------------------


def _size_postgresql(hw: Hardware, workload: str, max_connections: int | None) -> Sizing:
    ram = hw.ram_bytes
    cpus = hw.cpus
    headroom = os_headroom(ram)
    shared_buffers = _round_down(ram // 4, MIB)  # [pgtune]
    if max_connections is None:
        max_connections = 300 if workload == "oltp" else 40  # [pgtune: OLTP / DW]

    if cpus >= 4:  # [pgtune]
        workers = cpus
        per_gather = min(math.ceil(cpus / 2), 4)
        maintenance_workers = min(math.ceil(cpus / 2), 4)
    else:  # PostgreSQL's defaults
        workers, per_gather, maintenance_workers = 8, 2, 2

    # [pgtune] work_mem = (RAM - shared_buffers) / ((max_connections + workers) * 3) / per_gather,
    # halved for analytics' bigger queries run in parallel; floor 64 kB (PostgreSQL's minimum).
    work_mem = (ram - shared_buffers) // ((max_connections + workers) * 3) // per_gather
    if workload == "analytics":
        work_mem //= 2
    work_mem = max(64 * KIB, _round_down(work_mem, KIB))
    maintenance_work_mem = min(ram // 16, 8 * GIB)  # [pgtune, reference cap 8 GiB]
    autovacuum_workers = 3
    # All autovacuum workers together use at most one maintenance_work_mem (by default each may
    # use a whole one), so the budget is one manual maintenance job plus autovacuum.
    autovacuum_work_mem = _round_down(maintenance_work_mem // autovacuum_workers, MIB)
    # The ARC is PostgreSQL's OS cache here (primarycache=all), so it is sized with shared_buffers:
    # it gets what the worst case of connections, maintenance and the OS leave over. Worst case of
    # connections = every backend and worker using work_mem once per parallel worker.
    connections = (max_connections + workers) * work_mem * per_gather
    maintenance = maintenance_work_mem + autovacuum_work_mem * autovacuum_workers
    wal_buffers = _round_down(_clamp(shared_buffers * 3 // 100, 64 * KIB, 16 * MIB), 8 * KIB)  # [pgtune]
    arc_max = ram - headroom - shared_buffers - wal_buffers - connections - maintenance
    arc_max = (arc_max // (64 * MIB)) * 64 * MIB
    if arc_max < 2 * arc_min_default(ram):
        raise ValueError(f"RAM {ram} leaves too little for the ARC ({arc_max})")
    min_wal, max_wal = (2 * GIB, 8 * GIB) if workload == "oltp" else (4 * GIB, 16 * GIB)
    db = {
        "max_connections": max_connections,
        "shared_buffers": shared_buffers,
        # What PostgreSQL may assume is cached: its own buffers plus the ARC.
        "effective_cache_size": shared_buffers + arc_max,
        "work_mem": work_mem,
        "maintenance_work_mem": maintenance_work_mem,
        "autovacuum_max_workers": autovacuum_workers,
        "autovacuum_work_mem": autovacuum_work_mem,
        "wal_buffers": wal_buffers,
        "min_wal_size": min_wal,
        "max_wal_size": max_wal,
        "checkpoint_completion_target": "0.9",
        "random_page_cost": "1.1",  # NVMe [pgtune]
        "effective_io_concurrency": 1000,  # NVMe [reference]
        "max_worker_processes": workers,
        "max_parallel_workers_per_gather": per_gather,
        "max_parallel_workers": workers,
        "max_parallel_maintenance_workers": maintenance_workers,
    }
    zfs = {"zfs_arc_max": arc_max}
    budget = MemoryBudget(
        ram=ram,
        os_headroom=headroom,
        arc_max=arc_max,
        database=shared_buffers + wal_buffers,
        connections=connections,
        maintenance=maintenance,
    )
    budget.check()
    return Sizing("postgresql", zfs, db, budget)
