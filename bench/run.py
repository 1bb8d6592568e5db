"""
./dbzfs bench [--engine mariadb|postgresql] [--quick] [--out DIR]: what the ZFS tuning buys,
measured on one lab VM (lab.yaml bench_vms) over the same 24 drives, every variant of
bench/variants.py built in turn, and a report folder written by bench/report.py.

Per engine:

1. The data set, loaded once on `tuned` storage (sysbench's tables for MariaDB, pgbench's for
   PostgreSQL, from a fixed seed) and saved on the VM's root disk with the server stopped (one
   saved by an interrupted run with the same sizes is reused).
2. Rounds: in each, every variant in turn (A B C A B C ...) and every workload on it, each run
   from the same start: storage re-created on discarded drives and the saved data restored (a
   ZFS variant's next workload: its datasets rolled back to their snapshot of that), caches
   emptied, the server started; then the readings, the load (a fixed number of transactions),
   every dirty page flushed and the pool synced, the readings again.
3. Compression: the engine's model of bench/datagen.py loaded into `tuned` storage with each
   algorithm; compressratio, logical and physical bytes, and the load's time.

The VM is booted if it is not running, and powered off at the end if this run booted it.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from bench import converge_cost, datagen, guest, measure, report, variants
from lab import control, definition, vm as vmmod
from model import releases

GIB = 1024**3
MIB = 1024**2
VM_NAME = "bench1"
SEED = 20261130
# ZFS 2.x's own defaults for the module parameters a variant puts back (a live parameter cannot
# be reset to "the default" by name, only to a value).
ZFS_MODULE_DEFAULTS = {"zfs_prefetch_disable": 0, "zfs_arc_max": 0}
WORKLOADS = {"mariadb": ("oltp_write_only", "oltp_read_write"), "postgresql": ("tpcb-like",)}
# Let's Encrypt's tables for MariaDB, Heap's events for PostgreSQL
COMPRESSION_MODELS = {"mariadb": "ca", "postgresql": "events"}
REPORTS = Path(__file__).resolve().parent / "reports"

Log = Callable[[str], None]


@dataclass(frozen=True)
class Sizes:
    """How much data and work: `QUICK` proves the benchmark runs, `FULL` is what is reported."""

    runs: int  # rounds: runs per variant and workload
    sysbench_tables: int
    sysbench_rows: int  # per table
    sysbench_events: int  # transactions per run
    pgbench_scale: int
    pgbench_transactions: int  # per run, all clients together
    clients: int
    compression_rows: int  # certificates (ca) or events


QUICK = Sizes(
    runs=1,
    sysbench_tables=2,
    sysbench_rows=2000,
    sysbench_events=200,
    pgbench_scale=1,
    pgbench_transactions=200,
    clients=4,
    compression_rows=2000,
)
FULL = Sizes(
    runs=3,
    sysbench_tables=4,
    sysbench_rows=750_000,  # about 700 MiB of InnoDB pages: nearly 3x the buffer pool
    sysbench_events=2000,
    pgbench_scale=30,  # about 450 MiB: 3.5x shared_buffers
    pgbench_transactions=4000,
    clients=4,
    compression_rows=50_000,
)
# The buffer pool and shared_buffers the benchmark host runs with, as db_settings (what an
# inventory would declare for deploy.py): smaller than the 2 GiB host's sizing (768 MiB, 512 MiB),
# so that a data set several times larger loads and restores in minutes under emulation. Every
# variant runs with them; the ARC's maximum stays as sized.
DB_SETTINGS = {"innodb_buffer_pool_size": "256M", "shared_buffers": "128MB"}
ENGINE_SETTINGS = {"mariadb": ("innodb_buffer_pool_size",), "postgresql": ("shared_buffers",)}


class BenchError(RuntimeError):
    """A step failed on the VM: its name, and the command's own output."""


# --- the VM ---------------------------------------------------------------------------------------


class Guest:
    """The benchmark VM: scripts run with `bash -s` over the lab's ssh, each step logged."""

    def __init__(self, vm: definition.VM, log: Log):
        self.vm, self.log = vm, log
        self.steps: list[tuple[str, float]] = []  # (what, seconds) of every step run

    def run(self, what: str, script: str, timeout: float = 3600, quiet: bool = False) -> str:
        if not quiet:
            self.log(f"    {what}")
        t0 = time.monotonic()
        try:
            result = subprocess.run(
                vmmod.ssh_argv(self.vm, ["bash", "-s"]),
                input=script,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            raise BenchError(f"{self.vm.name}: {what}: no answer after {timeout:.0f} s") from e
        self.steps.append((what, time.monotonic() - t0))
        if result.returncode != 0:
            raise BenchError(
                f"{self.vm.name}: {what} failed (exit {result.returncode}, after "
                f"{time.monotonic() - t0:.0f} s):\n{(result.stderr or result.stdout)[-3000:]}"
            )
        return result.stdout

    def upload(self, data: bytes, path: str) -> None:
        result = subprocess.run(
            vmmod.ssh_argv(self.vm, [f"cat > {shlex.quote(path)}"]), input=data, capture_output=True
        )
        if result.returncode != 0:
            raise BenchError(f"{self.vm.name}: upload to {path} failed: {result.stderr.decode()[-2000:]}")


def host_data(vm: definition.VM, engine: str | None = None) -> dict:
    """The benchmark host's inventory data: its memory and CPUs sized as deploy.py sizes them,
    with DB_SETTINGS for `engine`."""
    return {
        "role": "primary",
        "server_id": 1,
        "debian_release": vm.debian_release,
        "hardware": {"ram_bytes": vm.memory * MIB, "cpus": vm.vcpus},
        "drive_pattern": f"{definition.BY_ID_PREFIX}{vm.name}-nvme??",
        "drive_count": vm.drive_count,
        "db_settings": {k: DB_SETTINGS[k] for k in ENGINE_SETTINGS.get(engine, ())},
    }


def drive_paths(vm: definition.VM) -> list[str]:
    return [f"/dev/disk/by-id/{definition.BY_ID_PREFIX}{serial}" for serial in vm.serials]


def module_params(variant: variants.Variant, data: dict) -> dict:
    """The ZFS module parameters the variant runs with: the sized ones, with its changes (None:
    the module's default)."""
    sized = dict(variants.host_config(variant.engine, data).sizing().zfs)
    for name, value in variant.module_params.items():
        sized[name] = ZFS_MODULE_DEFAULTS[name] if value is None else value
    return sized


# --- one engine -----------------------------------------------------------------------------------


class EngineBench:
    def __init__(self, g: Guest, engine: str, sizes: Sizes, log: Log):
        self.g, self.engine, self.sizes, self.log = g, engine, sizes, log
        self.data = host_data(g.vm, engine)
        self.variants = variants.variants(engine, self.data)
        self.pool = variants.host_config(engine, self.data).pool.name
        self.drives = drive_paths(g.vm)
        self.kernel_names: list[str] = []

    def build(self, variant: variants.Variant) -> None:
        """Storage as the variant has it, on discarded drives, with its config and directories."""
        self.g.run("storage torn down, drives discarded", guest.teardown(self.drives), quiet=True)
        if variant.storage == "zfs":
            script = guest.zfs_storage(variant, self.pool, self.drives, module_params(variant, self.data))
        else:
            script = guest.md_storage(variant, self.drives)
        self.g.run(f"{variant.name}: storage", script, quiet=True)
        config = variants.variant_config(variant, self.data)
        self.g.run(f"{variant.name}: server config", guest.server_config(variant, config), quiet=True)

    def golden_key(self) -> str:
        """What the data set is loaded with: a saved one with the same key is the same data."""
        s = self.sizes
        if self.engine == "mariadb":
            return (
                f"mariadb sysbench tables={s.sysbench_tables} rows={s.sysbench_rows} seed={SEED} binlog=reset"
            )
        return f"postgresql pgbench scale={s.pgbench_scale}"

    def golden(self) -> None:
        tuned = self.variants[0]
        s = self.sizes
        t0 = time.monotonic()
        key = self.golden_key()
        if self.g.run("saved data set", guest.saved_key(self.engine), quiet=True).strip() == key:
            # An interrupted run left it complete (its key is written last).
            self.log(f"==> {self.engine}: the data set saved by an earlier run ({key}) reused")
            return
        self.log(f"==> {self.engine}: loading the data set on {tuned.name} storage")
        self.build(tuned)
        self.g.run("empty server", guest.new_database(self.engine, tuned.directories))
        self.g.run("server started", guest.start(self.engine))
        if self.engine == "mariadb":
            self.g.run("database sbtest", guest.script(guest.sql("mariadb", "CREATE DATABASE sbtest")))
            self.g.run(
                f"sysbench prepare: {s.sysbench_tables} tables of {s.sysbench_rows:,} rows",
                guest.sysbench_prepare(s.sysbench_tables, s.sysbench_rows, SEED),
                timeout=6 * 3600,
            )
            # The prepare's binary log (1.1 GiB of row events at FULL) is history no run reads:
            # without it each restore copies the tables, not the log of their loading.
            self.g.run("binary log reset", guest.script(guest.sql("mariadb", "RESET MASTER")))
        else:
            self.g.run(
                f"pgbench -i, scale {s.pgbench_scale}", guest.pgbench_init(s.pgbench_scale), timeout=6 * 3600
            )
        self.g.run("server stopped", guest.stop(self.engine))
        self.g.run("data set saved to the root disk", guest.save_golden(self.engine, tuned.directories, key))
        self.log(f"    loaded and saved in {time.monotonic() - t0:.0f} s")

    def one_run(self, workload: str, variant: variants.Variant, fresh: bool = True) -> dict:
        """One measured run. `fresh`: storage built and the data set copied in (and, on ZFS,
        snapshotted); else the variant's ZFS datasets rolled back to that snapshot."""
        s = self.sizes
        t0 = time.monotonic()
        first_step = len(self.g.steps)
        if fresh:
            self.build(variant)
            self.g.run("data restored", guest.restore_golden(self.engine, variant.directories), quiet=True)
            if variant.storage == "zfs":
                self.g.run("snapshot @start", guest.snapshot_start(self.pool), quiet=True)
        else:
            self.g.run("rolled back to @start", guest.rollback_start(self.pool), quiet=True)
        self.g.run("caches emptied", guest.cold_caches(variant, self.pool), quiet=True)
        self.g.run("server started", guest.start(self.engine), quiet=True)
        t_load = time.monotonic()
        before = guest.split_readings(self.g.run("readings", guest.readings(self.engine), quiet=True))
        if self.engine == "mariadb":
            load_script = guest.sysbench_run(
                workload, s.sysbench_tables, s.sysbench_rows, s.sysbench_events, s.clients, SEED
            )
            out = self.g.run("load", load_script, timeout=6 * 3600, quiet=True)
            load = measure.parse_sysbench(out)
        else:
            load_script = guest.pgbench_run(s.pgbench_transactions, s.clients, SEED)
            out = self.g.run("load", load_script, timeout=6 * 3600, quiet=True)
            text, logs = guest.split_pgbench(out)
            load = measure.parse_pgbench(text, logs)
        t_flush = time.monotonic()
        self.g.run("flushed", guest.flushed(self.engine, variant.storage, self.pool), quiet=True)
        t_flushed = time.monotonic()
        after = guest.split_readings(self.g.run("readings", guest.readings(self.engine), quiet=True))
        self.g.run("server stopped", guest.stop(self.engine), quiet=True)
        figures = measure.run_figures(
            load,
            measure.written_delta(before[0], after[0], self.kernel_names),
            measure.counter_delta(before[2], after[2], measure.COUNTERS[self.engine]),
            measure.cpu_seconds(before[1], after[1]),
        )
        self.log(
            f"    {workload:16} {variant.name:24} {load.transactions} txn, "
            f"{figures['bytes_per_transaction'] / 1024:.1f} KiB written per txn, {load.tps:.1f} tps "
            f"({time.monotonic() - t0:.0f} s: {t_load - t0:.0f} s to build, load {t_flush - t_load:.0f} s, "
            f"flush {t_flushed - t_flush:.0f} s)"
        )
        steps = self.g.steps[first_step:]
        self.log("      steps: " + ", ".join(f"{what} {sec:.0f} s" for what, sec in steps))
        return figures

    def rounds(self) -> dict:
        """Every variant once per round (A B C A B C ...), each workload on it in turn. A ZFS
        variant's second workload starts from its first one's @start snapshot, which holds the
        data set exactly as restored: the pool built and the data copied in once per variant and
        round (under emulation about three minutes of a run's five). md-ext4 has no snapshot:
        it is rebuilt for each workload."""
        workloads = {w: {v.name: [] for v in self.variants} for w in WORKLOADS[self.engine]}
        for r in range(1, self.sizes.runs + 1):
            self.log(f"==> {self.engine}: round {r} of {self.sizes.runs}")
            for variant in self.variants:
                for i, workload in enumerate(WORKLOADS[self.engine]):
                    fresh = i == 0 or variant.storage != "zfs"
                    workloads[workload][variant.name].append(self.one_run(workload, variant, fresh))
        return workloads

    def compression(self) -> list[dict]:
        model = COMPRESSION_MODELS[self.engine]
        rows = self.sizes.compression_rows
        self.log(f"==> {self.engine}: compression, {rows:,} rows of the {model!r} model")
        sql = "".join(datagen.sql(model, self.engine, rows, seed=SEED)).encode()
        path = f"/var/tmp/dbzfs-bench-{model}-{self.engine}.sql"
        self.g.upload(sql, path)
        out = []
        tuned = self.variants[0]
        for algorithm in report.COMPRESSIONS:
            datasets = {name: {**props, "compression": algorithm} for name, props in tuned.datasets.items()}
            variant = replace(tuned, name=f"tuned, compression={algorithm}", datasets=datasets)
            self.build(variant)
            self.g.run("empty server", guest.new_database(self.engine, variant.directories), quiet=True)
            self.g.run("server started", guest.start(self.engine), quiet=True)
            before = self.data_dataset_figures(tuned)
            loaded = self.g.run("load", guest.sql_load(self.engine, path, self.pool), quiet=True)
            seconds = float(loaded.split()[-1])
            self.g.run("server stopped", guest.stop(self.engine), quiet=True)
            row = {
                "engine": self.engine,
                "model": model,
                "compression": algorithm,
                **measure.compression_delta(before, self.data_dataset_figures(tuned)),
                "load_seconds": seconds,
            }
            self.log(
                f"    {algorithm:10} {row['compressratio']:.2f}x, {row['logical_bytes'] / MIB:.1f} MiB -> "
                f"{row['physical_bytes'] / MIB:.1f} MiB, loaded in {seconds:.1f} s"
            )
            out.append(row)
        return out

    def data_dataset_figures(self, tuned: variants.Variant) -> dict:
        data = next(n for n, p in tuned.datasets.items() if p.get("mountpoint") == tuned.directories["data"])
        dataset = f"{self.pool}/{data}"
        zfs_get = self.g.run("zfs get", guest.compression_readings(dataset, self.pool), quiet=True)
        return measure.compression_figures(zfs_get, dataset)

    def run(self) -> tuple[dict, list[dict]]:
        self.kernel_names = self.g.run("drives", guest.drive_names(self.drives), quiet=True).split()
        self.golden()
        measured = {
            "variants": {v.name: v.description for v in self.variants},
            "workloads": self.rounds(),
        }
        rows = self.compression()
        self.g.run("storage torn down", guest.teardown(self.drives), quiet=True)
        removed = guest.script(f"rm -rf {guest.GOLDEN_DIR}/{self.engine}")
        self.g.run("saved data set removed", removed, quiet=True)
        return measured, rows


# --- the command ----------------------------------------------------------------------------------


def machine(vm: definition.VM) -> dict:
    release = releases.get(vm.debian_release)
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "host": platform.node(),
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "ram_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
        "vm": f"{vm.name}: qemu TCG, {vm.vcpus} vCPU, {vm.memory} MiB, {vm.drive_count} NVMe drives of "
        f"{vm.drive_size // MIB} MiB",
        "release": f"{release.label}: MariaDB {release.mariadb}, PostgreSQL {release.postgresql}",
    }


def progress(text: str) -> None:
    print(text, flush=True)  # a pipe or a file as well as a terminal: progress as it happens


def new_results(vm: definition.VM, command: str, sizes: Sizes | None) -> dict:
    return {
        "machine": machine(vm),
        "command": command,
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sizes": sizes.__dict__ if sizes else None,
        "engines": {},
        "compression": [],
    }


def converge_only(out: Path, command: str, log: Log = progress) -> Path:
    t0 = time.monotonic()
    lab = definition.load()
    results = new_results(lab.vm(lab.names[0]), command, None)
    results["machine"]["vm"] = ", ".join(
        f"{vm.name}: {vm.vcpus} vCPU, {vm.memory} MiB, {vm.drive_count} drives" for vm in lab.vms.values()
    )
    results["converge"] = converge_cost.measure(log)
    path = report.write_report(results, out)
    log(f"==> report: {path} ({time.monotonic() - t0:.0f} s)")
    return path


def bench(engines: list[str], sizes: Sizes, out: Path, command: str, log: Log = progress) -> Path:
    lab = definition.load()
    vm = lab.vm(VM_NAME)
    booted = not vmmod.pid(vm)
    t0 = time.monotonic()
    control.up(lab, [VM_NAME], log=log)
    try:
        g = Guest(vm, log)
        log("==> packages: both engines, sysbench, mdadm")
        g.run("apt-get install", guest.packages(), timeout=3600)
        results = new_results(vm, command, sizes)
        for engine in engines:
            measured, rows = EngineBench(g, engine, sizes, log).run()
            results["engines"][engine] = measured
            results["compression"] += rows
        results["seconds"] = round(time.monotonic() - t0)
    finally:
        if booted:
            control.down(lab, [VM_NAME], log=log)
    path = report.write_report(results, out)
    log(f"==> report: {path} ({time.monotonic() - t0:.0f} s)")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dbzfs bench", description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("--engine", choices=variants.ENGINES, action="append", help="default: both")
    parser.add_argument("--quick", action="store_true", help="one short run of each variant: proves it works")
    parser.add_argument(
        "--converge",
        action="store_true",
        help="instead: the converge cost (the lab's VMs wiped; --dry, first, no-op, no-op --dry)",
    )
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="the report folder (default: bench/reports/<date>[-quick])"
    )
    parser.epilog = "exit status: 0 done, 1 failed, 2 refused or misused (nothing was run)"
    args = parser.parse_args(argv)
    if args.converge and (args.quick or args.engine):
        parser.error("--converge measures the converge cost: it takes no --quick or --engine")
    try:  # lab.yaml and its bench VM, refused before anything runs
        lab = definition.load()
        if not args.converge:
            lab.vm(VM_NAME)
    except definition.LabDefinitionError as e:
        print(f"==> bench refused (nothing was run): {e}", file=sys.stderr)
        return 2
    if args.converge:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        return _reported(converge_only, args.out or REPORTS / f"{stamp}-converge", "./dbzfs bench --converge")
    engines = args.engine or list(variants.ENGINES)
    sizes = QUICK if args.quick else FULL
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = args.out or (REPORTS / f"{stamp}{'-quick' if args.quick else ''}")
    command = "./dbzfs bench" + "".join(f" --engine {e}" for e in args.engine or [])
    command += " --quick" if args.quick else ""
    return _reported(bench, engines, sizes, out, command)


def _reported(run: Callable[..., Path], *args: object) -> int:
    """The run, its failure as one line naming what failed (a step on the VM, the lab, a figure
    the tools did not print, an incomplete report), never a traceback."""
    try:
        run(*args)
    except (RuntimeError, ValueError) as e:  # BenchError, LabError, LabDefinitionError, parsers
        print(f"==> bench FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
