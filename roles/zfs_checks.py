"""The storage role's rules (roles/zfs.py): the drives, the pool and the engine's datasets, checked
before any host is touched. validation runs them (validation/checks.py); the install's rules are
roles/zfs_packages.py's, the module parameters' roles/zfs_module_params.py's. Pure: no pyinfra.
"""

from __future__ import annotations

import fnmatch
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from model import keys, zfs_properties as zp
from model.checking import ENGINES, Context, is_int, kind_of
from model.hostdata import BY_ID, HostConfig, parse_size

DATASET_ROLES = ("parent", "data", "log")
ZED_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+")


# --- nested types ------------------------------------------------------------------------------


def type_drives(ctx: Context, name: str, key: str, value: Sequence[object]) -> bool:
    return ctx.type_items(name, key, value, keys.STRING, '"/dev/disk/by-id/nvme-..."')


def type_properties(ctx: Context, name: str, where: str, props: object) -> bool:
    """dataset -> {property: value}: property names are strings, values strings or integers (ZFS
    takes text; on/off are words, not booleans)."""
    if not isinstance(props, Mapping):
        ctx.add(
            name,
            where,
            props,
            f"must be a mapping of property -> value, not {kind_of(props)}",
            'e.g. {"recordsize": "16k"}',
        )
        return False
    good = True
    for prop, value in props.items():
        if not isinstance(prop, str):
            ctx.add(
                name, f"{where}[{prop!r}]", value, "a property name must be a string", 'e.g. "recordsize"'
            )
            good = False
        elif not (isinstance(value, str) or is_int(value)):
            ctx.add(
                name,
                f"{where}[{prop!r}]",
                value,
                f"must be a string or an integer, not {kind_of(value)}",
                'write it as zfs set takes it, e.g. "16k", "off", "/datastore/mysql"',
            )
            good = False
    return good


def type_zfs_datasets(ctx: Context, name: str, key: str, value: Mapping[Any, Any]) -> bool:
    if not ctx.type_engine_keys(name, key, value):
        return False
    good = True
    for engine, datasets in value.items():
        good = type_zfs_dataset_properties(ctx, name, f"{key}[{engine!r}]", datasets) and good
    return good


def type_zfs_dataset_roles(ctx: Context, name: str, key: str, value: Mapping[Any, Any]) -> bool:
    if not ctx.type_engine_keys(name, key, value):
        return False
    good = True
    for engine, roles in value.items():
        where = f"{key}[{engine!r}]"
        for role in sorted(set(roles) - set(DATASET_ROLES), key=str):
            ctx.add(
                name,
                f"{where}[{role!r}]",
                roles[role],
                "not a dataset role",
                f"use only {', '.join(DATASET_ROLES)}",
            )
            good = False
        for role in DATASET_ROLES:
            if role not in roles:
                ctx.add(
                    name,
                    f"{where}[{role!r}]",
                    None,
                    "missing",
                    f"name the {role} dataset of {engine}, one of zfs_datasets[{engine!r}]",
                )
                good = False
            elif not isinstance(roles[role], str):
                ctx.add(
                    name,
                    f"{where}[{role!r}]",
                    roles[role],
                    f"must be a dataset name (a string), not {kind_of(roles[role])}",
                    "keep the default from group_data/all.py",
                )
                good = False
    return good


def type_zfs_dataset_properties(ctx: Context, name: str, key: str, value: Mapping[Any, Any]) -> bool:
    good = True
    for ds, props in value.items():
        where = f"{key}[{ds!r}]"
        if not isinstance(ds, str):
            ctx.add(
                name,
                where,
                props,
                "a dataset name must be a string",
                'e.g. "datastore/mysql" or "datastore/postgresql"',
            )
            good = False
        else:
            good = type_properties(ctx, name, where, props) and good
    return good


# The nested checks of the keys this role owns: key -> check(ctx, host, key, value) -> good.
TYPES = {
    "drives": type_drives,
    "wipe_drives": type_drives,
    "zfs_datasets": type_zfs_datasets,
    "zfs_dataset_roles": type_zfs_dataset_roles,
    "zfs_dataset_properties": type_zfs_dataset_properties,
}


# --- per host ----------------------------------------------------------------------------------


def drives(ctx: Context, c: HostConfig) -> None:
    if not ctx.ok(c, "drives", "drive_pattern", "drive_count"):
        return
    if c.drives and c.drive_pattern:
        ctx.add(c.name, "drives", c.drives, "both drives and drive_pattern are set", "keep one of them")
    if not c.drives and not c.drive_pattern:
        ctx.add(
            c.name,
            "drives",
            c.drives,
            "no drives declared",
            "list /dev/disk/by-id paths in drives, or set drive_pattern and drive_count",
        )
        return
    if c.drives:
        for d in c.drives:
            if not str(d).startswith(BY_ID) or "/" in str(d)[len(BY_ID) :]:
                ctx.add(
                    c.name,
                    "drives",
                    d,
                    "not a /dev/disk/by-id path",
                    "name every drive by its stable id (ls -l /dev/disk/by-id)",
                )
            elif re.search(r"-part\d+$", str(d)):
                ctx.add(c.name, "drives", d, "is a partition", "give ZFS the whole drive, without -partN")
        dupes = sorted({d for d in c.drives if c.drives.count(d) > 1})
        for d in dupes:
            ctx.add(c.name, "drives", d, "listed more than once", "list each drive once")
    else:
        if "/" in c.drive_pattern or not c.drive_pattern.strip() or re.search(r"\s", c.drive_pattern):
            ctx.add(
                c.name,
                "drive_pattern",
                c.drive_pattern,
                "must be a glob of names under /dev/disk/by-id, without a path or spaces",
                'e.g. "nvme-INTEL_SSDPE2KE064T8_*"',
            )
        if not (is_int(c.drive_count) and c.drive_count >= 2):
            ctx.add(
                c.name,
                "drive_count",
                c.drive_count,
                "drive_pattern needs the number of drives it must match",
                "set drive_count, e.g. 24",
            )
    if not ctx.ok(c, "wipe_drives"):
        return
    for d in c.wipe_drives:
        in_list = (
            d in c.drives
            if c.drives
            else (str(d).startswith(BY_ID) and fnmatch.fnmatch(str(d)[len(BY_ID) :], c.drive_pattern))
        )
        if not in_list:
            ctx.add(
                c.name,
                "wipe_drives",
                d,
                "is not one of this host's pool drives",
                "only drives of this host's pool can be opted in to wiping",
            )


def pool(ctx: Context, c: HostConfig) -> None:
    p = c.pool
    if ctx.ok(c, "zpool_name"):
        pool_name(ctx, c, p.name)
    if ctx.ok(c, "zpool_ashift") and not 9 <= p.ashift <= 16:
        ctx.add(
            c.name,
            "zpool_ashift",
            p.ashift,
            "out of range 9..16",
            "12 for 4 KiB sectors, 13 for 8 KiB flash pages",
        )
    ctx.choice(c, "zpool_autoreplace", p.autoreplace)
    ctx.choice(c, "zpool_autotrim", p.autotrim)
    t = c.capacity_threshold
    if ctx.ok(c, "zfs_capacity_threshold") and not 10 <= t <= 90:
        ctx.add(
            c.name,
            "zfs_capacity_threshold",
            t,
            "out of range 10..90 (percent)",
            "80 keeps ZFS's allocator and the flash fast [Heap]",
        )
    if ctx.ok(c, "zed_email") and c.zed_email and not ZED_EMAIL.fullmatch(c.zed_email):
        ctx.add(
            c.name,
            "zed_email",
            c.zed_email,
            "not one mail address (zed.rc is a shell file: no spaces, quotes, $ or backslashes)",
            'e.g. "dba-pager@example.com", or "" for no mail',
        )
    if not ctx.ok(c, "zpool_mirror_width", "zpool_spares"):
        return
    if not 2 <= p.mirror_width <= 4:
        ctx.add(
            c.name, "zpool_mirror_width", p.mirror_width, "must be 2, 3 or 4", "use 2 for two-way mirrors"
        )
        return
    if p.spares < 0:
        ctx.add(c.name, "zpool_spares", p.spares, "must be a count >= 0", "e.g. 0 or 2")
        return
    count = c.expected_drive_count
    if count and ctx.ok(c, "drives", "drive_count"):
        in_mirrors = count - p.spares
        if in_mirrors < p.mirror_width:
            ctx.add(
                c.name,
                "zpool_spares",
                p.spares,
                f"leaves {in_mirrors} of {count} drives for {p.mirror_width}-way mirrors",
                "use fewer spares or more drives",
            )
        elif in_mirrors % p.mirror_width:
            key = "drives" if c.drives else "drive_count"
            ctx.add(
                c.name,
                key,
                count,
                f"{count} drives minus {p.spares} spare(s) leaves {in_mirrors}, not a "
                f"multiple of the mirror width {p.mirror_width}",
                "change the drive count, zpool_spares or zpool_mirror_width",
            )


def pool_name(ctx: Context, c: HostConfig, name: str) -> None:
    fix = 'e.g. "dbpool" or "db01"'
    if not zp.POOL_NAME_RE.match(name):
        ctx.add(
            c.name,
            "zpool_name",
            name,
            "not a valid pool name: it must start with a "
            "letter and hold only letters, digits, _ . : - (no spaces)",
            fix,
        )
    elif name.lower().startswith(zp.POOL_RESERVED_PREFIXES) or re.match(r"^c[0-9]", name):
        ctx.add(
            c.name,
            "zpool_name",
            name,
            "zpool refuses names beginning with mirror, raidz, draid or spare, and names "
            "beginning with log, cache, special, dedup or c[0-9] read as vdevs",
            f"pick another name, {fix}",
        )
    elif len(name) > 200:
        ctx.add(
            c.name,
            "zpool_name",
            name,
            "too long (ZFS allows 239 characters, dataset names under it 255 in all)",
            fix,
        )


def datasets(ctx: Context, c: HostConfig) -> None:
    if c.engine not in ENGINES or not ctx.ok(
        c, "engine", "zfs_datasets", "zfs_dataset_roles", "zfs_dataset_properties"
    ):
        return
    data = ctx.data[c.name]
    declared = data.get("zfs_datasets", {}).get(c.engine)
    if not declared:
        ctx.add(
            c.name,
            f"zfs_datasets[{c.engine!r}]",
            declared,
            f"no datasets declared for {c.engine}",
            "keep the default from group_data/all.py",
        )
        return
    roles = data.get("zfs_dataset_roles", {}).get(c.engine)
    if roles is None:
        ctx.add(
            c.name,
            f"zfs_dataset_roles[{c.engine!r}]",
            None,
            f"does not say which dataset is the parent, the data and the log for {c.engine}",
            "keep the default from group_data/all.py",
        )
        return
    named_ok = True
    for role in DATASET_ROLES:
        if roles[role] not in declared:
            ctx.add(
                c.name,
                f"zfs_dataset_roles[{c.engine!r}][{role!r}]",
                roles[role],
                f"no such dataset in zfs_datasets[{c.engine!r}]",
                f"use one of {list(declared)}",
            )
            named_ok = False
    if not named_ok:
        return
    ctx.named.add(c.name)
    parent = roles["parent"]
    for role in ("data", "log"):
        if roles[role] == parent or not roles[role].startswith(parent + "/"):
            ctx.add(
                c.name,
                f"zfs_dataset_roles[{c.engine!r}][{role!r}]",
                roles[role],
                f"the {role} dataset must be a child of the parent {parent}",
                f"name a dataset {parent}/...",
            )
    if roles["data"] == roles["log"]:
        ctx.add(
            c.name,
            f"zfs_dataset_roles[{c.engine!r}]['log']",
            roles["log"],
            "the same dataset as the data",
            "give the log its own dataset",
        )
    overrides = data.get("zfs_dataset_properties", {})
    for ds in overrides:
        if ds not in declared:
            ctx.add(
                c.name,
                "zfs_dataset_properties",
                ds,
                f"no such dataset for {c.engine}",
                f"use one of {list(declared)}",
            )
    if ctx.ok(c, "zfs_compression") and not zp.COMPRESSION_RE.match(c.compression):
        ctx.add(
            c.name,
            "zfs_compression",
            c.compression,
            "unknown compression",
            "lz4, zstd, zstd-1..19, zstd-fast-N, gzip-1..9, zle or off",
        )
    mounts = defaultdict(list)
    for ds, props in c.datasets.items():
        key = f"zfs_datasets[{c.engine!r}][{ds!r}]"
        if not zp.DATASET_NAME_RE.match(ds):
            ctx.add(
                c.name,
                key,
                ds,
                "not a valid dataset name",
                "letters, digits, _ . : - in /-separated parts, relative to the pool",
            )
        elif ds != parent and not ds.startswith(parent + "/"):
            ctx.add(c.name, key, ds, f"is not under the parent dataset {parent}", f"name it {parent}/...")
        elif ctx.ok(c, "zpool_name") and len(c.dataset_name(ds)) > 255:
            ctx.add(c.name, key, c.dataset_name(ds), "longer than ZFS's 255 characters", "use shorter names")
        for prop, value in props.items():
            if ds == parent and prop == "compression" and "compression" not in overrides.get(ds, {}):
                continue  # zfs_compression, checked above
            dataset_property(ctx, c, key, prop, value)
        mp = props.get("mountpoint")
        if not (isinstance(mp, str) and zp.MOUNTPOINT_RE.match(mp) and not set(mp.split("/")) & {".", ".."}):
            ctx.add(
                c.name,
                f"{key}['mountpoint']",
                mp,
                "needs an absolute mountpoint without spaces, '.' or '..' parts or a trailing slash",
                "e.g. /datastore/mysql",
            )
        else:
            mounts[mp].append(ds)
    for mp, names in mounts.items():
        for ds in names[1:]:
            ctx.add(
                c.name,
                f"zfs_datasets[{c.engine!r}][{ds!r}]['mountpoint']",
                mp,
                f"also the mountpoint of {names[0]}",
                "give every dataset its own",
            )


def dataset_property(ctx: Context, c: HostConfig, key: str, prop: str, value: object) -> None:
    where = f"{key}[{prop!r}]"
    if prop not in zp.DATASET_PROPERTIES:
        ctx.add(
            c.name,
            where,
            value,
            "unknown or unsupported ZFS property",
            f"use one of {sorted(zp.DATASET_PROPERTIES)}",
        )
    elif prop in zp.SIZE_PROPERTIES and not (
        zp.settable_size(value) or (prop in zp.NONE_IS_ZERO and value == "none")
    ):
        ctx.add(
            c.name,
            where,
            value,
            "not a size zfs takes",
            'digits and a unit, without a space: "16k", "16K", "1M", "100G"'
            + (' or "none"' if prop in zp.NONE_IS_ZERO else ""),
        )
    elif prop == "recordsize":
        size = parse_size(value)
        if not (512 <= size <= 16 * 1024**2 and size & (size - 1) == 0):
            ctx.add(
                c.name,
                where,
                value,
                "recordsize must be a power of two in 512..16M",
                "16k for InnoDB data, 32k-128k for PostgreSQL",
            )
    elif prop == "special_small_blocks":
        size = parse_size(value)
        if size and not (512 <= size <= 16 * 1024**2 and size & (size - 1) == 0):
            ctx.add(
                c.name,
                where,
                value,
                "special_small_blocks must be 0 or a power of two in 512..16M",
                "0 without a special vdev",
            )
    elif prop == "mountpoint":
        pass  # checked with the dataset
    elif prop == "compression" and not zp.COMPRESSION_RE.match(str(value)):
        ctx.add(c.name, where, value, "unknown compression", "lz4 or zstd[-N]")
    elif prop in zp.CHOICES and str(value) not in zp.CHOICES[prop]:
        ctx.add(c.name, where, value, f"invalid value for {prop}", f"use one of {list(zp.CHOICES[prop])}")


# --- across hosts ------------------------------------------------------------------------------


def fleet(ctx: Context) -> None:
    """A drive belongs to one host."""
    owners = defaultdict(list)
    for name, c in ctx.cfg.items():
        for d in set(c.drives):
            owners[d].append(name)
    for drive, names in sorted(owners.items()):
        if len(names) > 1:
            for name in sorted(names)[1:]:
                ctx.add(
                    name,
                    "drives",
                    drive,
                    f"also listed for {sorted(names)[0]}: a drive belongs to one host",
                    "check the by-id names copied between hosts",
                )
