"""Every problem with a host's db_settings (validation), and what its overrides add up to in
memory. Pure: no pyinfra, no servers (engines/db_settings.py reads what each server accepts).

    check(cfg)                             every problem with a host's db_settings: names, values,
                                           settings the toolkit owns, and with the declared hardware
                                           the memory they add up to
    memory_problems(cfg, ram_bytes, cpus)  the overrides and the ARC against RAM: offline with the
                                           declared hardware, at deploy time with the live facts
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engines.db_settings import (
    ENGINES,
    MARIADB_PER_CONNECTION_BUFFERS,
    PG_UNIT_BYTES,
    _problem,
    _size,
    known,
    label,
    mariadb_int,
    pg_parse,
    server_text,
    setting_issues,
    setting_problems,
)
from model import releases, sizing
from model.hostdata import HostConfig
from model.sizing import GIB, KIB, MIB

if TYPE_CHECKING:
    from model.problems import Problem


def override_bytes(engine: str, name: str, value: object, version: str) -> int | None:
    """A valid override of a memory or count setting as a number (bytes for sizes, as the server
    reads it); None when it is not one the check accepts."""
    setting = known(engine, version).get(name)
    if setting is None or setting_issues(engine, name, value, version):
        return None
    text = server_text(engine, value)
    if engine == "mariadb":
        return mariadb_int(text)
    number = pg_parse(setting, text)
    return None if number is None else int(number) * PG_UNIT_BYTES.get(setting.unit or "", 1)


def effective_arc_max(value: object, ram: int) -> int | None:
    """The ARC maximum the zfs module uses for a zfs_arc_max parameter; None when value is no
    integer. OpenZFS 2.3 (zfs(4), arc.c) ignores 0 and anything not above the ARC minimum or not
    below RAM, and then takes max(RAM - 1 GiB, 5/8 RAM)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit():
        return None
    arc = int(value)
    if arc == 0 or arc < 64 * MIB or arc <= sizing.arc_min_default(ram) or arc >= ram:
        return max(ram - GIB, ram * 5 // 8)
    return arc


@dataclass(frozen=True)
class MemoryUse:
    """What the engine, the ARC and the OS take with a host's overrides applied to its sized values,
    counted as model.sizing budgets them."""

    engine: str
    version: str  # the server's
    ram: int
    os_headroom: int
    arc_max: int
    arc_note: str  # why the ARC differs from zfs_arc_max, or ""
    parts: tuple[tuple[str, int], ...]  # the engine's memory: (what, bytes)
    overrides: Mapping[str, object]  # setting -> value of each override that changed a figure
    sized: Mapping[str, str]  # setting -> its sized value, shown, for each override

    @property
    def total(self) -> int:
        return self.os_headroom + self.arc_max + sum(n for _, n in self.parts)

    def figures(self) -> str:
        """The sum, each figure named: "innodb_buffer_pool_size 3 GiB + ... + ARC 256 MiB + OS
        headroom 512 MiB = 4.22 GiB"."""
        parts = [
            f"{_size(n)} for {what}" if " x " in what else f"{what} {_size(n)}" for what, n in self.parts
        ]
        parts += [f"ARC {_size(self.arc_max)}{self.arc_note}", f"OS headroom {_size(self.os_headroom)}"]
        return f"{' + '.join(parts)} = {_size(self.total)}"


def memory_use(cfg: HostConfig, ram_bytes: int, cpus: int) -> MemoryUse | None:
    """The host's memory with its overrides on a host with ram_bytes and cpus; None when it cannot
    be sized (other checks say why)."""
    if cfg.engine not in ENGINES or cfg.debian_release not in releases.RELEASES:
        return None
    if not isinstance(cfg.db_settings, Mapping):
        return None
    version = cfg.server_version
    try:  # the data dataset's recordsize, the workload, the hardware: checked elsewhere
        sized = cfg.sizing(ram_bytes=ram_bytes, cpus=cpus)
    except (ValueError, TypeError, KeyError, IndexError):
        return None
    overrides: dict[str, object] = {}
    was: dict[str, str] = {}

    def value(name: str, default: int | None = None, count: bool = False) -> int:
        """The sized value (or the server's default), or its valid override."""
        base = sized.database[name] if default is None else default
        if name in cfg.db_settings:
            number = override_bytes(cfg.engine, name, cfg.db_settings[name], version)
            if number is not None and number != base:
                overrides[name] = cfg.db_settings[name]
                was[name] = str(base) if count else _size(base)
                return number
        return base

    arc, arc_note = sized.budget.arc_max, ""
    if "zfs_arc_max" in cfg.module_params:
        given = cfg.module_params["zfs_arc_max"]
        effective = effective_arc_max(given, ram_bytes)
        if effective is not None and effective != arc:
            overrides["zfs_arc_max"] = given
            was["zfs_arc_max"] = _size(arc)
            if effective != int(given):
                arc_note = f" (the zfs module ignores zfs_arc_max {given} and takes its default)"
            arc = effective
    if cfg.engine == "mariadb":
        per_connection = sizing.MARIADB_PER_CONNECTION
        for name in MARIADB_PER_CONNECTION_BUFFERS:
            default = known("mariadb", version)[name].default
            per_connection += value(name, default) - default
        connections = value("max_connections", count=True)
        parts = (
            ("innodb_buffer_pool_size", value("innodb_buffer_pool_size")),
            ("innodb_log_buffer_size", value("innodb_log_buffer_size")),
            (
                f"max_connections {connections} x {_size(per_connection)} per connection",
                connections * max(per_connection, 0),
            ),
        )
    else:
        shared_buffers = value("shared_buffers")
        wal_buffers = value("wal_buffers")
        if wal_buffers < 0:  # -1: shared_buffers / 32, 64 kB to one 16 MB WAL segment (xlog.c)
            wal_buffers = min(max(shared_buffers // 32, 64 * KIB), 16 * MIB)
        connections = value("max_connections", count=True)
        workers = value("max_worker_processes", count=True)
        work_mem = value("work_mem")
        per_gather = max(value("max_parallel_workers_per_gather", count=True), 1)
        maintenance = value("maintenance_work_mem")
        autovacuum_workers = value("autovacuum_max_workers", count=True)
        autovacuum = value("autovacuum_work_mem")
        if autovacuum < 0:  # -1: maintenance_work_mem
            autovacuum = maintenance
        parts = (
            ("shared_buffers", shared_buffers),
            ("wal_buffers", wal_buffers),
            (
                f"(max_connections {connections} + max_worker_processes {workers}) x work_mem "
                f"{_size(work_mem)} x max_parallel_workers_per_gather {per_gather}",
                (connections + workers) * work_mem * per_gather,
            ),
            ("maintenance_work_mem", maintenance),
            (
                f"autovacuum_max_workers {autovacuum_workers} x autovacuum_work_mem {_size(autovacuum)}",
                autovacuum_workers * autovacuum,
            ),
        )
    return MemoryUse(
        cfg.engine, version, ram_bytes, sized.budget.os_headroom, arc, arc_note, parts, overrides, was
    )


def memory_problems(cfg: HostConfig, ram_bytes: int, cpus: int) -> list[Problem]:
    """A problem when the host's overrides (db_settings, zfs_module_params' zfs_arc_max), applied to
    the values sized for ram_bytes and cpus, add up to more than the RAM with the ARC and the OS
    headroom model.sizing keeps. Offline: the declared hardware (check() does that); at deploy time:
    the live facts (facts.hardware.HostHardware's ram_bytes and cpus)."""
    use = memory_use(cfg, ram_bytes, cpus)
    if use is None or use.total <= use.ram or not use.overrides:
        return []
    keys = {
        n: "zfs_module_params['zfs_arc_max']" if n == "zfs_arc_max" else f"db_settings[{n!r}]"
        for n in use.overrides
    }
    if len(keys) == 1:
        key, value = next(iter(keys.values())), next(iter(use.overrides.values()))
    else:
        key = "db_settings" + (" and zfs_module_params" if "zfs_arc_max" in keys else "")
        value = dict(use.overrides)
    sized = ", ".join(f"{name} {shown}" for name, shown in use.sized.items())
    return [
        _problem(
            cfg.name,
            key,
            value,
            f"{label(use.engine, use.version)} memory with the overrides is more than the RAM "
            f"({_size(use.ram)}): "
            f"{use.figures()}",
            f"take {_size(use.total - use.ram)} or more off the overrides (or off the ARC with "
            f"zfs_module_params' zfs_arc_max), or remove them (sized: {sized})",
        )
    ]


def _hardware(cfg: HostConfig) -> tuple[int, int] | None:
    hw = cfg.hardware
    if not isinstance(hw, Mapping):
        return None
    ram, cpus = hw.get("ram_bytes"), hw.get("cpus")
    if any(isinstance(v, bool) or not isinstance(v, int) for v in (ram, cpus)) or ram < 2 * GIB or cpus < 1:
        return None
    return ram, cpus


def check(cfg: HostConfig) -> list[Problem]:
    """Every problem with a host's db_settings: names, values, settings the toolkit owns, and with
    the declared hardware the memory they add up to."""
    if cfg.engine not in ENGINES or cfg.debian_release not in releases.RELEASES:
        return []
    if not isinstance(cfg.db_settings, Mapping):
        return []
    problems = []
    for name, value in cfg.db_settings.items():
        problems += setting_problems(cfg.engine, name, value, cfg.server_version, cfg.name)
    hardware = _hardware(cfg)
    if hardware:
        problems += memory_problems(cfg, *hardware)
    return problems
