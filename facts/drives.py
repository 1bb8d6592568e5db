"""
Facts about the drives a pool is built from: /dev/disk/by-id names and what each drive holds.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
from collections.abc import Iterable, Iterator

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

BY_ID = "/dev/disk/by-id"

_PART_RE = re.compile(r"-part\d+$")
_NVME_NAMESPACE_RE = re.compile(r"^nvme\d+n\d+$")
_NATURAL_RE = re.compile(r"(\d+)")

# Pool state numbers in a ZFS label (pool_state_t).
ZFS_LABEL_STATES = {
    "0": "active",
    "1": "exported",
    "2": "destroyed",
    "3": "spare",
    "4": "l2cache",
    "5": "uninitialized",
}


def natural_key(text: str) -> list[int | str]:
    return [int(bit) if bit.isdigit() else bit for bit in _NATURAL_RE.split(text)]


class DrivesByPattern(FactBase):
    """
    Returns the /dev/disk/by-id paths whose name matches a glob, sorted naturally (``_2`` before
    ``_10``). Partition links (``-partN``) are left out, and so is any further alias of a drive
    already listed (udev may give one namespace several names matching the same glob).

    .. code:: python

        ["/dev/disk/by-id/nvme-INTEL_SSDPE2KE064T8_PHLN0001", ...]
    """

    default = list

    @override
    def command(self, pattern: str) -> StringCommand:
        self._pattern = pattern.removeprefix(BY_ID + "/")
        # One process for the whole directory (a readlink per link costs a fork each, which is
        # seconds on a host with hundreds of links); -xtype b skips dangling links.
        return StringCommand(
            "find",
            f"{BY_ID}/",
            "-mindepth",
            "1",
            "-maxdepth",
            "1",
            "-type",
            "l",
            "-xtype",
            "b",
            "-printf",
            "'%f %l\\n'",
            "2>/dev/null;",
            "true",
        )

    @override
    def process(self, output: list[str]) -> list[str]:
        pattern = getattr(self, "_pattern", "*")
        names: dict[str, str] = {}
        for line in output:
            name, _, target = line.strip().partition(" ")
            if _PART_RE.search(name) or not fnmatch.fnmatchcase(name, pattern):
                continue
            # udev's links are relative (../../nvme0n1): the device they resolve to
            names[name] = posixpath.normpath(posixpath.join(BY_ID, target))
        seen_targets: set[str] = set()
        paths = []
        for name in sorted(names, key=natural_key):
            if names[name] in seen_targets:
                continue
            seen_targets.add(names[name])
            paths.append(f"{BY_ID}/{name}")
        return paths


class BlockDevices(FactBase):
    """
    Returns the block device each given path resolves to (``readlink -f``), for the paths that are
    a block device or a link to one; the others (a drive that is gone) are left out. One shell
    loop, nothing probed (DriveState says what a drive holds).

    .. code:: python

        {"/dev/disk/by-id/nvme-A": "/dev/nvme3n1"}
    """

    default = dict

    @override
    def command(self, paths: Iterable[str]) -> StringCommand:
        return StringCommand(
            "for p in",
            *[QuoteString(path) for path in paths],
            "; do",
            '[ -b "$p" ] && echo "$p $(readlink -f "$p")";',
            "done; true",
        )

    @override
    def process(self, output: list[str]) -> dict[str, str]:
        devices = {}
        for line in output:
            path, _, device = line.strip().partition(" ")
            if path and device:
                devices[path] = device
        return devices


def _parse_blkid_export(lines: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in lines:
        if "ambivalent result" in line:
            values["AMBIVALENT"] = "yes"
            continue
        key, sep, value = line.partition("=")
        if sep and " " not in key:
            values[key.strip()] = value.strip()
        elif line.strip():
            # "blkid: error: /dev/nvme1n1: Permission denied", "sh: blkid: not found"...
            values["ERROR"] = line.strip()
    return values


def _parse_zdb_label(lines: list[str]) -> dict | None:
    """Pool-level fields of `zdb -l`: they are the keys indented by exactly four spaces."""
    fields: dict[str, str] = {}
    for line in lines:
        match = re.match(r"^    (\w+): (.*)$", line)
        if match and match.group(1) not in fields:
            fields[match.group(1)] = match.group(2).strip().strip("'")
    if "guid" not in fields and "pool_guid" not in fields:
        return None
    return {
        "pool": fields.get("name"),
        "pool_guid": fields.get("pool_guid"),
        "state": ZFS_LABEL_STATES.get(fields.get("state", ""), fields.get("state")),
        "source": "zdb",
    }


def _walk_lsblk(devices: list[dict] | None) -> Iterator[dict]:
    for device in devices or []:
        yield device
        yield from _walk_lsblk(device.get("children"))


def _new_drive(path: str) -> dict:
    return {
        "path": path,
        "exists": False,
        "device": None,
        "kernel_name": None,
        "whole_disk": False,
        "nvme_namespace": False,
        "partition_table": None,
        "partitions": [],
        "signatures": [],
        "zfs_labels": [],
        "mounts": [],
        "holders": [],
        "probe_errors": [],
    }


# A shell function: true when the four places ZFS writes a vdev label (the first 512 KiB and the
# last 512 KiB of the device rounded down to 256 KiB, vdev_label_t's size) hold only zeros, so
# `zdb -l` could find no label there. zdb starts a whole userland ZFS for each device (about a
# second under emulation, for each of 24 drives); on blank drives it is skipped. Anything unclear
# (no size, a device under 1 MiB, a read error) counts as not blank: zdb reads it.
LABEL_AREAS_BLANK = (
    "label_areas_blank() {"
    ' s=$(blockdev --getsize64 "$1" 2>/dev/null || stat -L -c %s "$1" 2>/dev/null) || return 1;'
    ' [ "$s" -ge 1048576 ] 2>/dev/null || return 1;'
    ' cmp -s -n 524288 "$1" /dev/zero'
    ' && cmp -s -i "$(( s / 262144 * 262144 - 524288 )):0" -n 524288 "$1" /dev/zero; };'
)


class DriveState(FactBase):
    """
    Returns, for each given /dev/disk/by-id path, what the drive is and what it holds.

    + exists: the path exists; device / kernel_name: what it resolves to (/dev/nvme0n1)
    + whole_disk: a block device in /sys/block (not a partition)
    + nvme_namespace: kernel name is nvmeXnY
    + partition_table: "gpt" / "dos" / None (``blkid -p``); partitions: their device names
    + signatures: filesystems and other signatures on the drive or its partitions (``blkid -p``),
      ``[{"device", "type", "label", "uuid"}]``
    + zfs_labels: ``[{"device", "pool", "pool_guid", "state", "source"}]`` from ``blkid -p``
      (TYPE=zfs_member) or ``zdb -l`` where zdb exists (blkid misses some spare labels); zdb
      reads a device only when its label areas are not all zeros (see LABEL_AREAS_BLANK)
    + mounts: mountpoints on the drive or anything built on it (``lsblk``), "[SWAP]" for swap
    + holders: devices built on it other than partitions (LVM, md, dm-crypt)
    + probe_errors: blkid errors (e.g. not run as root): the drive's content is unknown

    .. code:: python

        {
            "/dev/disk/by-id/nvme-A": {
                "path": "/dev/disk/by-id/nvme-A", "exists": True,
                "device": "/dev/nvme1n1", "kernel_name": "nvme1n1",
                "whole_disk": True, "nvme_namespace": True,
                "partition_table": None, "partitions": [], "signatures": [],
                "zfs_labels": [], "mounts": [], "holders": [], "probe_errors": [],
            },
        }
    """

    default = dict

    @override
    def command(self, paths: Iterable[str]) -> StringCommand:
        probe = (
            'echo "@blkid $x"; blkid -p -o export "$x" 2>&1;'
            ' if command -v zdb >/dev/null 2>&1 && ! label_areas_blank "$x";'
            ' then echo "@zdb $x"; zdb -l "$x" 2>&1; fi;'
        )
        return StringCommand(
            LABEL_AREAS_BLANK,
            "for p in",
            *[QuoteString(path) for path in paths],
            "; do",
            'echo "@drive $p"; [ -e "$p" ] || continue;',
            'd=$(readlink -f "$p"); n=${d##*/}; echo "@device $d";',
            '[ -d "/sys/block/$n" ] && echo @sysblock;',
            'echo @lsblk; lsblk -J -p -o NAME,TYPE,FSTYPE,PTTYPE,MOUNTPOINTS "$d" || true;',
            'for x in "$d" $(for s in /sys/block/"$n"/"$n"*; do',
            '[ -e "$s/partition" ] && echo "/dev/${s##*/}"; done); do',
            probe,
            "done; done; true",
        )

    @override
    def process(self, output: list[str]) -> dict[str, dict]:
        drives: dict[str, dict] = {}
        drive: dict | None = None
        block: list[str] = []
        kind = None
        target = None

        def flush():
            if drive is None or kind is None:
                return
            if kind == "lsblk":
                _apply_lsblk(drive, block)
            elif kind == "blkid":
                _apply_blkid(drive, target, _parse_blkid_export(block))
            elif kind == "zdb":
                label = _parse_zdb_label(block)
                if label:
                    _merge_zfs_label(drive, {"device": target, **label})

        for line in output:
            if line.startswith("@"):
                marker, _, arg = line.partition(" ")
                if marker in ("@drive", "@device", "@sysblock", "@lsblk", "@blkid", "@zdb"):
                    flush()
                    block, kind, target = [], None, None
                    if marker == "@drive":
                        drive = drives.setdefault(arg, _new_drive(arg))
                    elif drive is None:
                        continue
                    elif marker == "@device":
                        drive["exists"] = True
                        drive["device"] = arg
                        drive["kernel_name"] = arg.rsplit("/", 1)[-1]
                        drive["nvme_namespace"] = bool(_NVME_NAMESPACE_RE.match(drive["kernel_name"]))
                    elif marker == "@sysblock":
                        drive["whole_disk"] = True
                    else:
                        kind, target = marker[1:], arg
                    continue
            block.append(line)
        flush()
        return drives


def _apply_lsblk(drive: dict, lines: list[str]) -> None:
    try:
        data = json.loads("\n".join(lines))
    except ValueError:
        return
    for device in _walk_lsblk(data.get("blockdevices")):
        for mountpoint in device.get("mountpoints") or [device.get("mountpoint")]:
            if mountpoint and mountpoint not in drive["mounts"]:
                drive["mounts"].append(mountpoint)
        if device.get("type") not in ("disk", "part") and device["name"] not in drive["holders"]:
            drive["holders"].append(device["name"])
        if device.get("type") == "part" and device["name"] not in drive["partitions"]:
            drive["partitions"].append(device["name"])


def _merge_zfs_label(drive: dict, label: dict) -> None:
    for existing in drive["zfs_labels"]:
        if existing["device"] == label["device"]:
            for key, value in label.items():
                if existing.get(key) is None:
                    existing[key] = value
            return
    drive["zfs_labels"].append(label)


def _apply_blkid(drive: dict, device: str, values: dict[str, str]) -> None:
    if device != drive["device"] and device not in drive["partitions"]:
        drive["partitions"].append(device)
    if values.get("PTTYPE") and device == drive["device"]:
        drive["partition_table"] = values["PTTYPE"]
    if values.get("ERROR"):
        drive["probe_errors"].append(values["ERROR"])
    if values.get("AMBIVALENT"):
        drive["signatures"].append(
            {"device": device, "type": "several signatures", "label": None, "uuid": None}
        )
    fs_type = values.get("TYPE")
    if not fs_type:
        return
    if fs_type == "zfs_member":
        _merge_zfs_label(
            drive,
            {
                "device": device,
                "pool": values.get("LABEL"),
                "pool_guid": values.get("UUID"),
                "state": None,
                "source": "blkid",
            },
        )
        return
    drive["signatures"].append(
        {
            "device": device,
            "type": fs_type,
            "label": values.get("LABEL"),
            "uuid": values.get("UUID"),
        }
    )
