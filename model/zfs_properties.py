"""Normalise ZFS property values so a declared value compares equal to what ZFS reports.

The facts read properties with `zfs get -H -p` / `zpool get -H -p`, so sizes come back as bytes
("16384"), while data declares them the way people write them ("16k", "16K", "16KiB"). Index
properties come back in ZFS's canonical spelling ("posix" for "posixacl", "zstd" for "zstd-3"
is NOT rewritten by ZFS, so both spellings are mapped to one form here).

`normalise(prop, value)` is the single entry point; two values are the same setting when their
normalised forms are equal.
"""

from __future__ import annotations

import re

# Properties holding a byte count; `-p` reports them as plain integers.
SIZE_PROPERTIES = frozenset(
    {
        "recordsize",
        "volblocksize",
        "volsize",
        "quota",
        "refquota",
        "reservation",
        "refreservation",
        "special_small_blocks",
        "dedup_table_quota",
    }
)

# Size properties where ZFS reports 0 for "none".
NONE_IS_ZERO = frozenset({"quota", "refquota", "reservation", "refreservation"})

# Count limits: `-p` reports "none" as UINT64_MAX.
UINT64_MAX = str(2**64 - 1)
COUNT_LIMIT_PROPERTIES = frozenset({"filesystem_limit", "snapshot_limit"})

ON_OFF_PROPERTIES = frozenset(
    {
        # datasets
        "atime",
        "relatime",
        "devices",
        "exec",
        "setuid",
        "readonly",
        "zoned",
        "vscan",
        "nbmand",
        "overlay",
        "utf8only",
        "jailed",
        "longname",
        # pools
        "autoreplace",
        "autotrim",
        "autoexpand",
        "delegation",
        "listsnapshots",
        "multihost",
    }
)

# Aliases ZFS accepts on `set` but reports under another name.
INDEX_ALIASES = {
    "acltype": {"posixacl": "posix", "noacl": "off"},
    "compression": {"gzip-6": "gzip", "zstd-3": "zstd", "zstd-fast-1": "zstd-fast"},
    # OpenZFS 2.3 made "on" an alias of "sa" and reports xattr=sa as "on" (seen on the lab's
    # zfs-2.3.2). The roles install 2.3; on 2.1/2.2, "on" meant directory xattrs.
    "xattr": {"sa": "on"},
}

# Only settable when the dataset is created (or through `zfs change-key` for the key ones).
# A user property: the compression a dataset's blocks were written with (ZFS never recompresses
# them; `compression` only says what new blocks get). Set when a dataset is created and by
# runbooks/rewrite_compression.py, and copied from the source by a seed (runbooks/seed.py).
BLOCKS_COMPRESSION = "dbzfs:blocks-compression"


def blocks_record(value: str | None) -> str | None:
    """BLOCKS_COMPRESSION as `zfs get` prints it: None when the dataset has no record ("-")."""
    return None if value in (None, "", "-") else value


CREATE_ONLY_PROPERTIES = frozenset(
    {
        "casesensitivity",
        "normalization",
        "utf8only",
        "volblocksize",
        "encryption",
        "keyformat",
        "pbkdf2iters",
    }
)

# Statistics and identifiers: never settable.
READ_ONLY_PROPERTIES = frozenset(
    {
        "type",
        "creation",
        "used",
        "available",
        "referenced",
        "compressratio",
        "refcompressratio",
        "mounted",
        "origin",
        "guid",
        "createtxg",
        "objsetid",
        "written",
        "logicalused",
        "logicalreferenced",
        "usedbysnapshots",
        "usedbydataset",
        "usedbychildren",
        "usedbyrefreservation",
        "encryptionroot",
        "keystatus",
        # pools
        "size",
        "capacity",
        "health",
        "free",
        "allocated",
        "fragmentation",
        "freeing",
        "leaked",
        "expandsize",
        "checkpoint",
        "load_guid",
        "dedupratio",
    }
)

# --- What host data may declare (validation: roles/zfs_checks.py) ----------------------------

# The dataset properties zfs_datasets and zfs_dataset_properties may set.
DATASET_PROPERTIES = frozenset(
    {
        "mountpoint",
        "atime",
        "relatime",
        "xattr",
        "dnodesize",
        "acltype",
        "recordsize",
        "primarycache",
        "secondarycache",
        "logbias",
        "redundant_metadata",
        "compression",
        "sync",
        "checksum",
        "copies",
        "quota",
        "refquota",
        "reservation",
        "refreservation",
        "snapdir",
        "special_small_blocks",
        "canmount",
        "exec",
        "setuid",
        "devices",
    }
)
ON_OFF = ("on", "off")
# The values of those that take a fixed set (the size ones, mountpoint and compression are
# checked on their own).
CHOICES = {
    **{prop: ON_OFF for prop in sorted(ON_OFF_PROPERTIES & DATASET_PROPERTIES)},
    "xattr": ("on", "off", "sa", "dir"),
    "dnodesize": ("legacy", "auto", "1k", "2k", "4k", "8k", "16k"),
    "acltype": ("off", "noacl", "posixacl", "posix", "nfsv4"),
    "primarycache": ("all", "metadata", "none"),
    "secondarycache": ("all", "metadata", "none"),
    "logbias": ("latency", "throughput"),
    "redundant_metadata": ("all", "most", "some", "none"),
    "sync": ("standard", "always", "disabled"),
    "canmount": ("on", "off", "noauto"),
    "checksum": (
        "on",
        "off",
        "fletcher2",
        "fletcher4",
        "sha256",
        "noparity",
        "sha512",
        "skein",
        "edonr",
        "blake3",
    ),
    "snapdir": ("hidden", "visible"),
    "copies": ("1", "2", "3"),
}
COMPRESSION_RE = re.compile(
    r"^(on|off|lz4|lzjb|gzip(-[1-9])?|zle|zstd(-([1-9]|1[0-9]))?"
    r"|zstd-fast(-([1-9]|[1-9][0-9]|[1-9]00|1000))?)$"
)
# A size as `zfs set` takes it, zfs_nicestrtonum (libzfs): digits, an optional fraction, then B or
# one of KMGTPEZ followed by nothing, B or iB (any case). No space between number and unit.
ZFS_SIZE_RE = re.compile(r"^(\d+(\.\d*)?|\.\d+)(B|[KMGTPEZ](i?B)?)?$", re.IGNORECASE)
# A dataset's name relative to the pool: components of letters, digits, _ . : - (zfs(8)).
DATASET_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]+(/[A-Za-z0-9_.:-]+)*$")
# Mountpoints go into systemd units, my.cnf and postgresql.conf unquoted: absolute, no spaces,
# no empty, "." or ".." components, no trailing slash.
MOUNTPOINT_RE = re.compile(r"^(/[A-Za-z0-9_.@+:-]+)+$")
# zpool-create(8): a letter first, then letters, digits, _ - : . (we leave out the space, which
# the scrub timer's unit name cannot hold). The names mirror, raidz, draid, spare and log are
# reserved, as are names beginning with mirror, raidz, draid and spare; names beginning with the
# other vdev keywords (log, cache, special, dedup) or with c[0-9] (a Solaris disk name) read as
# vdevs on a zpool command line and are refused too.
POOL_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]*$")
POOL_RESERVED_PREFIXES = ("mirror", "raidz", "draid", "spare", "log", "cache", "special", "dedup")

# A property's value as the data declares it ("16k", 16384, True) or as ZFS reports it (text).
PropertyValue = str | int | bool

_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgtpe]?)(?:i?b)?$", re.IGNORECASE)
_SIZE_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50, "e": 60}


def parse_size(value: object) -> int | None:
    """Bytes for a ZFS size ("16k", "16K", "16KiB", "1.5M", 16384), None if not a size.

    ZFS suffixes are always binary (k = 1024), as in zfs_nicestrtonum.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    match = _SIZE_RE.match(str(value).strip())
    if not match:
        return None
    number, suffix = match.groups()
    return int(float(number) * (1 << _SIZE_SHIFT[suffix.lower()]))


def settable_size(value: object) -> bool:
    """A byte count as `zfs set` takes it (and parse_size reads it): an integer >= 0, or text
    ZFS_SIZE_RE matches."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value >= 0
    return isinstance(value, str) and bool(ZFS_SIZE_RE.match(value)) and parse_size(value) is not None


def _on_off(value: PropertyValue) -> str:
    if value is True:
        return "on"
    if value is False:
        return "off"
    text = str(value).strip().lower()
    return {"yes": "on", "true": "on", "1": "on", "no": "off", "false": "off", "0": "off"}.get(text, text)


def _mountpoint(value: PropertyValue) -> str:
    text = str(value).strip()
    if not text.startswith("/"):
        return text.lower()  # none, legacy
    text = re.sub(r"/+", "/", text)
    return text.rstrip("/") or "/"


def normalise(prop: str, value: PropertyValue) -> str:
    """Canonical string for `value` of property `prop` (ZFS or data spelling)."""
    if prop == "mountpoint":
        return _mountpoint(value)
    if ":" in prop:  # user property: free text, compared as is
        return str(value)

    if prop in SIZE_PROPERTIES:
        text = str(value).strip().lower()
        if prop in NONE_IS_ZERO and text == "none":
            return "0"
        size = parse_size(value)
        return str(size) if size is not None else text

    if prop in COUNT_LIMIT_PROPERTIES:
        text = str(value).strip().lower()
        return UINT64_MAX if text == "none" else text

    if prop in ON_OFF_PROPERTIES:
        return _on_off(value)

    text = _on_off(value) if isinstance(value, bool) else str(value).strip().lower()
    return INDEX_ALIASES.get(prop, {}).get(text, text)


def same_value(prop: str, wanted: PropertyValue, current: PropertyValue | None) -> bool:
    return current is not None and normalise(prop, wanted) == normalise(prop, current)


def format_value(value: PropertyValue) -> str:
    """A data value as it goes on a `zfs set` / `zpool set` command line."""
    if value is True:
        return "on"
    if value is False:
        return "off"
    return str(value)
