"""The benchmark's variants as data: what storage each one builds over the same drives and which
server settings it changes, per engine. Pure: no pyinfra, no I/O but reading the repository.

    variants(engine, host_data)        every variant of one engine, `tuned` first
    apply_server_settings(text, s)     a variant's server settings over the tuned config's text

`tuned` is exactly what deploy.py converges for the host: its pool, datasets and rendered config
come from group_data/all.py, model.hostdata and roles.render, never from numbers copied here.
Every other variant is described as a change to it:

- `zfs-defaults`: the same striped mirrors and spares, created with no pool properties, and one
  dataset with only a mountpoint (what `zpool create` and `zfs create` leave: recordsize 128k,
  compression on, which is lz4 in the OpenZFS 2.3 the hosts run, primarycache all); the ZFS
  module's own prefetch; the engine's stock storage settings.
- `md-ext4`: Linux md RAID10 (near-2 copies: mirrors striped, as the pool) over the same drives,
  the same spares as md spares, ext4 with mkfs's and mount's defaults; stock storage settings.
- ablations: `tuned` with one setting put back to its default, so that each gain is attributed.

"Stock storage settings" are not numbers written here: the variant removes the storage-related
lines from the tuned config (`None` in `server_settings`), so the server runs on its compiled
default (MariaDB 10.11 and 11.8: doublewrite ON, O_DIRECT, native AIO, flush neighbours, io_capacity 200;
PostgreSQL 15 and 17: full_page_writes on, WAL files zero-filled and recycled, effective_io_concurrency 1).
Memory sizing (buffer pool, shared_buffers, ARC max, connections) and the redo/WAL capacity stay
as sized in every variant: the capacity sets how often checkpoints come, and with them how many
doublewrite pages and full-page images are written, for reasons that are not the storage's.
Durability (sync_binlog, innodb_flush_log_at_trx_commit, fsync) is the same everywhere too.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from model.hostdata import DEFAULTS, HostConfig
from roles import render

ENGINES = ("mariadb", "postgresql")
STORAGE_KINDS = ("zfs", "md-ext4")
BASELINE = "zfs-defaults"  # what ratios are taken against

# The server settings that say how the engine writes to its storage (flush, I/O, torn-page
# protection), as the tuned config names them. The zfs-defaults and md-ext4 variants leave them
# all to the server's compiled defaults.
STORAGE_SETTINGS = {
    "mariadb": (
        "innodb_doublewrite",
        # how InnoDB opens its files, per server version (10.11: innodb_flush_method; 11.8: its
        # two replacements): roles/render.py MARIADB_FILE_IO
        *dict.fromkeys(
            k
            for io in render.MARIADB_FILE_IO.values()
            for k in io
            if k.startswith("innodb_data") or k == "innodb_flush_method"
        ),
        "innodb_use_native_aio",
        "innodb_use_atomic_writes",
        "innodb_flush_neighbors",
        "innodb_log_write_ahead_size",
        "innodb_io_capacity",
        "innodb_io_capacity_max",
        "innodb_read_io_threads",
        "innodb_write_io_threads",
    ),
    "postgresql": (
        "full_page_writes",
        "wal_init_zero",
        "wal_recycle",
        "wal_compression",
        "effective_io_concurrency",
        "random_page_cost",
    ),
}
# ZFS module parameters the tuned sizing sets for storage reasons (zfs_arc_max is memory sizing
# and stays).
STORAGE_MODULE_PARAMS = ("zfs_prefetch_disable",)
CONFIG_TEMPLATE = {"mariadb": "my.cnf.j2", "postgresql": "postgresql.conf.j2"}


@dataclass(frozen=True)
class Variant:
    """One way to store an engine's data on the benchmark VM's drives."""

    name: str
    engine: str
    storage: str  # "zfs" | "md-ext4"
    description: str  # one line, for the report
    # zfs: mirror_width, spares and the pool properties given to `zpool create` (nothing else is
    # set). md-ext4: mdadm's level, layout and spares, the filesystem and its mount options.
    pool: dict
    # zfs: dataset (relative to the pool) -> properties, parents first. md-ext4: none.
    datasets: dict
    # "data" / "log": where the tables and the redo log / WAL go; the same paths in every
    # variant, so that the rendered config differs only by the settings below.
    directories: dict
    # Over the tuned config: name -> value, or None to remove the line (the server's default).
    server_settings: dict = field(default_factory=dict)
    # Over the sized ZFS module parameters: name -> value, or None for the module's default.
    module_params: dict = field(default_factory=dict)


def host_config(engine: str, host_data: Mapping) -> HostConfig:
    """The benchmark host's config: group_data's defaults under its host data."""
    if engine not in ENGINES:
        raise ValueError(f"engine one of {ENGINES}, not {engine!r}")
    data = copy.deepcopy(DEFAULTS) | dict(host_data) | {"engine": engine}
    return HostConfig.from_data("bench", data)


def tuned_config(cfg: HostConfig) -> str:
    """The server config deploy.py renders for this host (my.cnf or postgresql.conf)."""
    sized = cfg.sizing()
    if cfg.engine == "mariadb":
        return render.render(CONFIG_TEMPLATE["mariadb"], render.mariadb_context(cfg, sized))
    return render.render(CONFIG_TEMPLATE["postgresql"], render.postgresql_context(cfg, sized))


_SETTING_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*?)\s*$")


def config_settings(text: str) -> dict[str, str]:
    """name -> value of a my.cnf [mysqld] or postgresql.conf text (the last line wins, as in the
    servers; PostgreSQL's quotes are kept)."""
    settings = {}
    for line in text.splitlines():
        match = _SETTING_LINE.match(line.split("#", 1)[0])
        if match:
            settings[match.group(1)] = match.group(2)
    return settings


def apply_server_settings(config: str, settings: Mapping[str, object]) -> str:
    """The tuned config's text with a variant's settings: each named line removed, and the ones
    with a value appended (after everything else: the last line wins in both servers, and the
    tuned my.cnf has the one [mysqld] section)."""
    names = set(settings)
    kept = [
        line
        for line in config.splitlines()
        if not ((m := _SETTING_LINE.match(line.split("#", 1)[0])) and m.group(1) in names)
    ]
    added = [f"{name} = {value}" for name, value in settings.items() if value is not None]
    if added:
        kept += ["", f"# --- benchmark variant: {len(added)} setting(s) over the tuned config ---", *added]
    return "\n".join(kept) + "\n"


def tuned_storage_settings(cfg: HostConfig) -> dict[str, str]:
    """The storage-related settings in the tuned config, as rendered (for the report)."""
    rendered = config_settings(tuned_config(cfg))
    return {name: rendered[name] for name in STORAGE_SETTINGS[cfg.engine] if name in rendered}


def _directories(cfg: HostConfig) -> dict:
    return {"data": cfg.mountpoint(cfg.data_dataset), "log": cfg.mountpoint(cfg.log_dataset)}


def _tuned(cfg: HostConfig) -> Variant:
    pool = {
        "mirror_width": cfg.pool.mirror_width,
        "spares": cfg.pool.spares,
        "properties": {
            "ashift": cfg.pool.ashift,
            "autoreplace": cfg.pool.autoreplace,
            "autotrim": cfg.pool.autotrim,
        },
    }
    return Variant(
        name="tuned",
        engine=cfg.engine,
        storage="zfs",
        description=f"what deploy.py converges: data and log datasets (data recordsize "
        f"{cfg.datasets[cfg.data_dataset]['recordsize']}, {cfg.compression}), "
        + ("no doublewrite, ARC for metadata only" if cfg.engine == "mariadb" else "no full_page_writes"),
        pool=pool,
        datasets=copy.deepcopy(cfg.datasets),
        directories=_directories(cfg),
    )


def _stock_settings(engine: str) -> dict:
    return dict.fromkeys(STORAGE_SETTINGS[engine])


def _zfs_defaults(cfg: HostConfig, tuned: Variant) -> Variant:
    parent = cfg.parent_dataset
    return Variant(
        name="zfs-defaults",
        engine=cfg.engine,
        storage="zfs",
        description="the same mirrors, no pool or dataset properties (recordsize 128k, compression on: "
        "lz4 in OpenZFS 2.3), "
        "the engine's stock storage settings",
        pool={"mirror_width": tuned.pool["mirror_width"], "spares": tuned.pool["spares"], "properties": {}},
        datasets={parent: {"mountpoint": cfg.mountpoint(parent)}},
        directories=tuned.directories,
        server_settings=_stock_settings(cfg.engine),
        module_params=dict.fromkeys(STORAGE_MODULE_PARAMS),
    )


def _md_ext4(cfg: HostConfig, tuned: Variant) -> Variant:
    if tuned.pool["mirror_width"] != 2:
        raise ValueError("md-ext4 stands for a pool of two-way mirrors (RAID10 near-2)")
    return Variant(
        name="md-ext4",
        engine=cfg.engine,
        storage="md-ext4",
        description="Linux md RAID10 over the same drives, ext4 with its defaults, "
        "the engine's stock storage settings",
        pool={
            "level": "10",
            "layout": "n2",  # near copies: each block on two adjacent drives, like the mirrors
            "spares": tuned.pool["spares"],
            "filesystem": "ext4",
            "mount": {"mountpoint": cfg.mountpoint(cfg.parent_dataset), "options": "defaults"},
        },
        datasets={},
        directories=tuned.directories,
        server_settings=_stock_settings(cfg.engine),
    )


def _ablation(tuned: Variant, name: str, description: str, **changes) -> Variant:
    return Variant(
        name=name,
        engine=tuned.engine,
        storage="zfs",
        description=description,
        pool=copy.deepcopy(tuned.pool),
        datasets=changes.get("datasets", copy.deepcopy(tuned.datasets)),
        directories=tuned.directories,
        server_settings=changes.get("server_settings", {}),
    )


def _ablations(cfg: HostConfig, tuned: Variant) -> list[Variant]:
    data = cfg.data_dataset
    tuned_recordsize = tuned.datasets[data]["recordsize"]
    recordsize_128k = copy.deepcopy(tuned.datasets)
    recordsize_128k[data]["recordsize"] = "128k"
    out = []
    if cfg.engine == "mariadb":
        out.append(
            _ablation(
                tuned,
                "tuned+doublewrite",
                "tuned with InnoDB's doublewrite buffer back on",
                server_settings={"innodb_doublewrite": "1"},
            )
        )
    else:
        out.append(
            _ablation(
                tuned,
                "tuned+full_page_writes",
                "tuned with full_page_writes back on",
                server_settings={"full_page_writes": "on"},
            )
        )
    out.append(
        _ablation(
            tuned,
            "tuned+recordsize-128k",
            f"tuned with the data dataset's recordsize back to 128k (tuned: {tuned_recordsize})",
            datasets=recordsize_128k,
        )
    )
    if cfg.engine == "mariadb":
        cache_all = copy.deepcopy(tuned.datasets)
        for props in cache_all.values():
            if props.get("primarycache") == "metadata":
                props["primarycache"] = "all"
        out.append(
            _ablation(
                tuned,
                "tuned+primarycache-all",
                "tuned with primarycache=all (data in both the ARC and the buffer pool; ARC max as sized)",
                datasets=cache_all,
            )
        )
    return out


def variants(engine: str, host_data: Mapping) -> list[Variant]:
    """Every variant of `engine` for the benchmark host (its inventory data: hardware, drives,
    pool layout), `tuned` first, then `zfs-defaults`, `md-ext4` and the ablations."""
    cfg = host_config(engine, host_data)
    tuned = _tuned(cfg)
    return [tuned, _zfs_defaults(cfg, tuned), _md_ext4(cfg, tuned), *_ablations(cfg, tuned)]


def variant_config(variant: Variant, host_data: Mapping) -> str:
    """The server config a variant runs with: the tuned one with the variant's settings."""
    return apply_server_settings(
        tuned_config(host_config(variant.engine, host_data)), variant.server_settings
    )
