"""
Create a ZFS pool with a declared vdev layout, and keep its settable properties as declared.

An existing pool is never destroyed, re-created or re-shaped: a layout that differs from the
declared one stops the deploy with the difference spelled out.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Mapping

from pyinfra import host, logger
from pyinfra.api import OperationError, OperationValueError, QuoteString, StringCommand, operation
from pyinfra.facts.files import File

from facts.drives import BY_ID, BlockDevices, DriveState
from facts.zfs import SECTIONS, ZpoolProperties, ZpoolTopology
from model.zfs_properties import READ_ONLY_PROPERTIES, PropertyValue, format_value, same_value

HEALTHY_STATES = ("ONLINE",)
HEALTHY_SPARE_STATES = ("AVAIL",)


@operation()
def pool(
    pool_name: str,
    vdevs: Iterable[Iterable[str]],
    spares: Iterable[str] = (),
    ashift: int = 12,
    properties: Mapping[str, PropertyValue] | None = None,
    wipe: Iterable[str] = (),
    require_nvme: bool = True,
    exact_pairs: bool = True,
) -> Generator[str | StringCommand, None, None]:
    """
    Create a pool of striped vdevs from /dev/disk/by-id paths, or check an existing one.

    + pool_name: name of the pool
    + vdevs: one list of by-id paths per vdev; two or more paths make a mirror (mirror width is
      the list length), a single path a plain disk vdev
    + spares: by-id paths of hot spares
    + ashift: the pool's ashift; an existing pool with another ashift is an error
    + properties: pool properties, e.g. ``{"autoreplace": "on", "autotrim": "on"}``; set at
      creation and corrected with ``zpool set`` afterwards
    + wipe: by-id paths this host may wipe before creating the pool (explicit opt-in)
    + require_nvme: refuse drives that are not whole NVMe namespaces
    + exact_pairs: an existing pool must pair the drives as ``vdevs`` does. False when the drives
      were found by a pattern (sorted names say nothing of which mirror a replacement drive
      joined): the pool must have the declared shape (vdev types and widths, spare count) and
      hold every drive given; a drive it does not hold (a new one waiting for a replace) is
      warned about, not an error

    Before creating a pool every drive is checked: it must exist, be a whole disk (an NVMe
    namespace), not be mounted or used by LVM/md, and hold no partition table, filesystem
    signature or ZFS label unless it is listed in ``wipe``. Any problem raises
    ``OperationError`` before a single command is yielded.

    **Example:**

    .. code:: python

        zpool.pool(
            "dbpool",
            vdevs=[[by_id("A"), by_id("B")], [by_id("C"), by_id("D")]],
            spares=[by_id("E")],
            ashift=12,
            properties={"autoreplace": "on", "autotrim": "on"},
        )
    """

    properties = dict(properties or {})
    vdevs = [list(vdev) for vdev in vdevs]
    spares = list(spares)
    _check_arguments(pool_name, vdevs, spares, properties)

    topology = host.get_fact(ZpoolTopology, pool=pool_name)

    if topology is None:
        yield from _create_pool(pool_name, vdevs, spares, ashift, properties, set(wipe), require_nvme)
        return

    pool_properties = host.get_fact(ZpoolProperties, pool=pool_name) or {}

    if exact_pairs:
        differences, waiting = layout_differences(topology, vdevs, spares), []
    else:
        differences, waiting = shape_differences(topology, vdevs, spares)
    live_ashift = pool_properties.get("ashift", {}).get("value")
    if live_ashift is not None and live_ashift != str(ashift):
        differences.append(f"ashift is {live_ashift}, declared {ashift}")
    if differences:
        raise OperationError(
            f"pool {pool_name} differs from its declared layout; it is left as it is "
            "(never destroyed or re-created). Fix the pool by hand or the host's drive data "
            "(e.g. after a drive replacement):\n  - " + "\n  - ".join(differences),
        )

    for problem in health_problems(topology):
        logger.warning(f"{host.print_prefix}pool {pool_name} is {topology['state']}: {problem}")
    if waiting:
        given = [drive for vdev in vdevs for drive in vdev] + spares
        logger.warning(waiting_warning(pool_name, topology, waiting, given))

    changed = False
    if host.get_fact(File, path=NOWATCH_RULE):
        # A create cut short (the run killed) left the drives unwatched: watched again.
        changed = True
        yield StringCommand(
            "rm -f",
            NOWATCH_RULE,
            "&& udevadm control --reload && udevadm trigger --action=change --settle",
            *[QuoteString(drive) for vdev in vdevs for drive in vdev],
            *[QuoteString(drive) for drive in spares],
        )
    for prop, wanted in properties.items():
        current = pool_properties.get(prop, {}).get("value")
        if same_value(prop, wanted, current):
            continue
        changed = True
        yield StringCommand(
            "zpool set",
            QuoteString(f"{prop}={format_value(wanted)}"),
            QuoteString(pool_name),
        )

    if not changed:
        host.noop(f"pool {pool_name} has the declared layout and properties")


@operation()
def replace(
    pool_name: str,
    old: str,
    new: str,
    wipe: bool = False,
    require_nvme: bool = True,
) -> Generator[str | StringCommand, None, None]:
    """
    Replace drive ``old`` of a pool by the drive ``new`` (``zpool replace``); ZFS resilvers onto
    it, and a hot spare standing in for ``old`` goes back to AVAIL when that is done.

    + pool_name: the pool
    + old: by-id path of the pool's drive to replace (failed, removed, or still working)
    + new: by-id path of the drive that takes its place
    + wipe: the new drive may be wiped first (explicit opt-in, as ``wipe`` of ``pool``)
    + require_nvme: refuse a new drive that is not a whole NVMe namespace

    The new drive is checked as pool creation checks every drive: it must exist, be a whole
    disk, be unused, and hold no partition table, filesystem or ZFS label. No-op when ``new``
    is in the pool already (replaced, or resilvering) and ``old`` is gone from it.
    """
    for path in (old, new):
        if not path.startswith(BY_ID + "/"):
            raise OperationValueError(f"pool {pool_name}: drives must be {BY_ID} paths, got: {path}")
    if old == new:
        raise OperationValueError(f"pool {pool_name}: {old} cannot replace itself")
    topology = host.get_fact(ZpoolTopology, pool=pool_name)
    if topology is None:
        raise OperationError(f"pool {pool_name} is not imported on this host; nothing was changed")
    members = pool_members(topology)
    spares = {spare["disk"] for spare in topology["spares"]}
    if new in members and new not in spares:
        if old in members:
            host.noop(f"{new} is resilvering in place of {old} (zpool status {pool_name})")
        else:
            host.noop(f"{new} has replaced {old} in pool {pool_name}")
        return
    if old not in members:
        raise OperationError(
            f"drive {old} is not in pool {pool_name}; nothing was changed. Its drives: "
            + ", ".join(sorted(members))
        )
    if old in spares:
        raise OperationError(
            f"drive {old} is a hot spare of pool {pool_name}: remove it (zpool remove) and add "
            "the new drive as a spare; nothing was changed"
        )
    if new in spares:
        raise OperationError(
            f"drive {new} is a hot spare of pool {pool_name}; give a new drive; nothing was changed"
        )
    state = (host.get_fact(DriveState, paths=[new]) or {}).get(new)
    action, opt_in = f"put it into pool {pool_name}", "replace with wipe"
    problems = drive_problems(state, new, pool_name, wipe, require_nvme, opt_in, action)
    if problems:
        raise OperationError(
            f"refusing to replace {old} in pool {pool_name}; no drive was changed:\n  - "
            + "\n  - ".join(problems),
        )
    if wipe and holds_data(state):
        yield from wipe_commands(state)
        yield "udevadm settle"
    yield StringCommand("zpool replace", QuoteString(pool_name), QuoteString(old), QuoteString(new))


def pool_members(topology: dict) -> list[str]:
    """Every drive of a live pool (data, log, cache, special, dedup and spare devices, and the
    ones standing in during a replace), as the by-id paths it was given."""
    disks = [spare["disk"] for spare in topology["spares"]]
    for section in ("vdevs", *(s for s in SECTIONS if s != "spares")):
        for vdev in topology.get(section, []):
            for device in vdev["devices"]:
                disks += [device["disk"]] + [d["disk"] for d in device.get("replaced_by", [])]
    return list(dict.fromkeys(disks))


def _check_arguments(
    pool_name: str, vdevs: list[list[str]], spares: list[str], properties: dict[str, PropertyValue]
) -> None:
    if not vdevs or any(not vdev for vdev in vdevs):
        raise OperationValueError(f"pool {pool_name}: every vdev needs at least one drive")
    drives = [drive for vdev in vdevs for drive in vdev] + spares
    not_by_id = [drive for drive in drives if not drive.startswith(BY_ID + "/")]
    if not_by_id:
        raise OperationValueError(
            f"pool {pool_name}: drives must be {BY_ID} paths, got: {', '.join(not_by_id)}"
        )
    duplicates = sorted({drive for drive in drives if drives.count(drive) > 1})
    if duplicates:
        raise OperationValueError(f"pool {pool_name}: drives listed more than once: {', '.join(duplicates)}")
    bad = sorted(set(properties) & (READ_ONLY_PROPERTIES | {"ashift"}))
    if bad:
        raise OperationValueError(f"pool {pool_name}: not settable through properties: {', '.join(bad)}")


def _create_pool(
    pool_name: str,
    vdevs: list[list[str]],
    spares: list[str],
    ashift: int,
    properties: dict[str, PropertyValue],
    wipe: set[str],
    require_nvme: bool,
) -> Generator[str | StringCommand, None, None]:
    drives = [drive for vdev in vdevs for drive in vdev] + spares
    states = host.get_fact(DriveState, paths=drives) or {}

    problems = []
    for drive in drives:
        problems += drive_problems(states.get(drive), drive, pool_name, drive in wipe, require_nvme)
    if problems:
        raise OperationError(
            f"refusing to create pool {pool_name}; no drive was changed:\n  - " + "\n  - ".join(problems),
        )

    for drive in drives:
        if drive in wipe and holds_data(states[drive]):
            yield from wipe_commands(states[drive])
    if any(drive in wipe and holds_data(states[drive]) for drive in drives):
        # by-id -partN links of the wiped partitions must be gone before zpool create.
        yield "udevadm settle"

    bits: list = ["zpool create", "-o", QuoteString(f"ashift={ashift}")]
    for prop, value in properties.items():
        bits += ["-o", QuoteString(f"{prop}={format_value(value)}")]
    bits.append(QuoteString(pool_name))
    for vdev in vdevs:
        if len(vdev) > 1:
            bits.append("mirror")
        bits += [QuoteString(drive) for drive in vdev]
    if spares:
        bits.append("spare")
        bits += [QuoteString(drive) for drive in spares]
    # udev's `watch` (60-block.rules) re-reads a whole disk's partition table when a writer closes
    # it, and zpool create writes each drive's label and then opens its partition: a re-read in
    # between fails the create ("no such device" / "currently unavailable"), seen in 1 of 14 creates
    # on a loaded Debian 13 lab. The drives are not watched for the create's duration.
    kernels = [states[drive]["kernel_name"] for drive in drives]
    yield udev_watch(kernels, on=False)
    restore = udev_watch(kernels, on=True)
    yield StringCommand(StringCommand(*bits), "||", "{", restore, ";", "false", ";", "}")
    yield restore


NOWATCH_RULE = "/run/udev/rules.d/99-dbzfs-zpool-create-nowatch.rules"


def udev_watch(kernel_names: list[str], on: bool) -> StringCommand:
    """udev's inotify watch on the whole disks named (nvme0n1, ...) turned off (a runtime rule,
    gone at reboot, and the disks re-processed) or back on (the rule removed, re-processed)."""
    devices = [QuoteString(f"/dev/{name}") for name in kernel_names]
    if on:
        head: list = ["rm -f", NOWATCH_RULE]
    else:
        lines = [
            f'ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="{name}", OPTIONS+="nowatch"'
            for name in kernel_names
        ]
        head = [
            "mkdir -p /run/udev/rules.d && printf '%s\\n'",
            *[QuoteString(line) for line in lines],
            ">",
            NOWATCH_RULE,
        ]
    return StringCommand(
        *head, "&& udevadm control --reload && udevadm trigger --action=change --settle", *devices
    )


def holds_data(state: dict) -> bool:
    return bool(state["partition_table"] or state["signatures"] or state["zfs_labels"])


def drive_problems(
    state: dict | None,
    path: str,
    pool_name: str,
    may_wipe: bool,
    require_nvme: bool,
    opt_in: str = "add it to wipe_drives for this host",
    action: str = "",
) -> list[str]:
    """Why `path` cannot go into a new pool; data findings are waived by `may_wipe`."""
    if not state or not state["exists"]:
        return [f"drive {path} does not exist on this host"]

    where = f"drive {path} ({state['device']})"
    if not state["whole_disk"]:
        return [f"{where} is a partition, not a whole disk; give ZFS whole drives"]
    if require_nvme and not state["nvme_namespace"]:
        return [f"{where} is not a whole NVMe namespace (nvmeXnY)"]

    problems = []
    if "/" in state["mounts"]:
        problems.append(f"{where} is the boot disk (mounted at {', '.join(state['mounts'])})")
    elif state["mounts"]:
        problems.append(f"{where} is in use: mounted at {', '.join(state['mounts'])}")
    if state["holders"]:
        problems.append(f"{where} is in use by {', '.join(state['holders'])}")
    if problems:
        return problems  # never wiped, whatever the wipe list says
    if state.get("probe_errors"):
        # Unknown content is never taken for a blank drive.
        return [f"{where} could not be probed: {'; '.join(state['probe_errors'])}"]

    findings = []
    if state["partition_table"]:
        findings.append(f"a {state['partition_table']} partition table (blkid)")
    for signature in state["signatures"]:
        on = "" if signature["device"] == state["device"] else f" on {signature['device']}"
        findings.append(f"a {signature['type']} filesystem{on} (blkid)")
    for label in state["zfs_labels"]:
        findings.append(_describe_label(label, state, pool_name))
    if findings and not may_wipe:
        action = action or f"create pool {pool_name}"
        return [
            f"{where} holds {finding}; refusing to {action}. To reuse it, {opt_in}" for finding in findings
        ]
    return []


def _describe_label(label: dict, state: dict, pool_name: str) -> str:
    on = "" if label["device"] == state["device"] else f" on {label['device']}"
    if label.get("pool"):
        what = f"a ZFS label of pool {label['pool']}"
    else:
        what = "a ZFS label with no pool name (a hot spare or cache device)"
    details = ", ".join(
        bit
        for bit in (
            f"guid {label['pool_guid']}" if label.get("pool_guid") else None,
            label.get("state"),
            label.get("source"),
        )
        if bit
    )
    text = f"{what}{on} ({details})" if details else f"{what}{on}"
    if label.get("pool") == pool_name:
        text += f"; pool {pool_name} may be exported: `zpool import {pool_name}` it instead"
    return text


def wipe_commands(state: dict) -> Iterator[StringCommand]:
    disk_name = state["kernel_name"]
    labelled = {label["device"] for label in state["zfs_labels"]}
    # Partitions first, through their by-id links, then the drive's own signatures and table.
    for partition in state["partitions"]:
        number = partition.rsplit("/", 1)[-1][len(disk_name) :].lstrip("p")
        part_path = f"{state['path']}-part{number}"
        if partition in labelled:
            yield StringCommand("zpool labelclear -f", QuoteString(part_path))
        yield StringCommand("wipefs -a", QuoteString(part_path))
    if state["device"] in labelled:
        yield StringCommand("zpool labelclear -f", QuoteString(state["path"]))
    yield StringCommand("wipefs -a", QuoteString(state["path"]))


def layout_differences(topology: dict, vdevs: list[list[str]], spares: list[str]) -> list[str]:
    """What differs between a live pool's vdevs and spares and the declared ones."""
    differences = []
    live = [
        (vdev["name"], vdev["type"], [device["disk"] for device in vdev["devices"]])
        for vdev in topology["vdevs"]
    ]
    unmatched = list(live)

    for declared in vdevs:
        declared_type = "mirror" if len(declared) > 1 else "disk"
        wanted = set(declared)
        exact = next((v for v in unmatched if v[1] == declared_type and set(v[2]) == wanted), None)
        if exact:
            unmatched.remove(exact)
            continue
        overlap = next((v for v in unmatched if set(v[2]) & wanted), None)
        if overlap is None:
            differences.append(f"declared {declared_type} {' '.join(declared)} is missing from the pool")
            continue
        unmatched.remove(overlap)
        name, live_type, disks = overlap
        bits = []
        if live_type != declared_type:
            bits.append(f"is a {live_type} vdev, declared a {declared_type}")
        missing = [disk for disk in declared if disk not in disks]
        extra = [disk for disk in disks if disk not in wanted]
        if missing:
            bits.append(f"lacks {' '.join(missing)}")
        if extra:
            bits.append(f"has extra disk {' '.join(extra)}")
        differences.append(f"{name} ({' '.join(disks)}) {'; '.join(bits)}")

    for name, _live_type, disks in unmatched:
        differences.append(f"pool has {name} ({' '.join(disks)}) which is not declared")

    live_spares = [spare["disk"] for spare in topology["spares"]]
    missing_spares = [spare for spare in spares if spare not in live_spares]
    extra_spares = [spare for spare in live_spares if spare not in spares]
    if missing_spares:
        differences.append(f"declared spare {' '.join(missing_spares)} is missing from the pool")
    if extra_spares:
        differences.append(f"pool has spare {' '.join(extra_spares)} which is not declared")

    for section in SECTIONS:
        if section == "spares" or not topology.get(section):
            continue
        names = " ".join(vdev["name"] for vdev in topology[section])
        differences.append(f"pool has {section} vdevs ({names}) which are not declared")
    return differences


def shape_differences(
    topology: dict, vdevs: list[list[str]], spares: list[str]
) -> tuple[list[str], list[str]]:
    """(what differs in shape between a live pool and the declared one, the declared drives the
    pool does not hold), for drives whose pairing is not declared."""

    def shapes(pairs: Iterable[tuple[str, int]]) -> str:
        counts: dict[tuple[str, int], int] = {}
        for shape in pairs:
            counts[shape] = counts.get(shape, 0) + 1
        return ", ".join(f"{n} x {width}-way {kind}" for (kind, width), n in sorted(counts.items()))

    live = shapes((vdev["type"], len(vdev["devices"])) for vdev in topology["vdevs"])
    declared = shapes(("mirror" if len(vdev) > 1 else "disk", len(vdev)) for vdev in vdevs)
    differences = []
    if live != declared:
        differences.append(f"the pool's vdevs are {live}, declared {declared}")
    if len(topology["spares"]) != len(spares):
        differences.append(f"the pool has {len(topology['spares'])} spare(s), declared {len(spares)}")
    for section in SECTIONS:
        if section != "spares" and topology.get(section):
            names = " ".join(vdev["name"] for vdev in topology[section])
            differences.append(f"pool has {section} vdevs ({names}) which are not declared")
    members = set(pool_members(topology))
    waiting = [drive for vdev in vdevs for drive in vdev] + spares
    return differences, [drive for drive in waiting if drive not in members]


def unnamed_members(topology: dict, named: Iterable[str]) -> tuple[list[str], list[str], dict[str, str]]:
    """(the pool's drives that are there but not in `named`, the ones that are gone, the block
    device of each drive that is there, `named` included). A drive the inventory does not name is
    not a missing drive: a replacement of another model, or one ZED's autoreplace took in under
    another of its /dev/disk/by-id names, is in the pool and working."""
    named = list(named)
    others = [disk for disk in pool_members(topology) if disk not in set(named)]
    devices = host.get_fact(BlockDevices, paths=[*others, *named]) if others else {}
    return [d for d in others if d in devices], [d for d in others if d not in devices], devices


INVENTORY_NAMES_THEM = (
    "change the host's inventory so that it names the pool's drives: widen drive_pattern to match "
    "{drives} too, or list the pool's drives in `drives` (zpool status -P {pool}) instead of "
    "drive_pattern and drive_count"
)


def replace_runbook(name: str) -> str:
    return f"pyinfra INVENTORY runbooks/replace_drive.py --data host={name} --data old=OLD --data new=NEW"


def waiting_warning(pool_name: str, topology: dict, waiting: list[str], given: list[str]) -> str:
    unnamed, gone, devices = unnamed_members(topology, given)
    # The same drive under two names: the pool's (ZED took it in by one of its links) and the one
    # drive_pattern matches.
    aliases = {d: w for d in unnamed for w in waiting if devices.get(w) == devices[d]}
    others = [d for d in unnamed if d not in aliases]
    still_waiting = [w for w in waiting if w not in aliases.values()]
    parts = [
        f"{w}, which the host's drive_pattern matches, is in pool {pool_name} as {d} (the same "
        f"drive, {devices[d]})"
        for d, w in aliases.items()
    ]
    if others:
        parts.append(
            f"pool {pool_name} holds drive(s) the inventory does not name: "
            + ", ".join(f"{d} ({devices[d]})" for d in others)
        )
    if still_waiting:
        parts.append(
            f"pool {pool_name} does not hold {', '.join(still_waiting)}, which the host's "
            f"drive_pattern matches; the pool's drives not found: {', '.join(gone) or 'none'}"
        )
    advice = []
    if aliases and not others:
        advice.append(
            "nothing needs replacing; to name the drives as the pool does, list them in `drives` "
            f"(zpool status -P {pool_name})"
        )
    if others:
        advice.append(INVENTORY_NAMES_THEM.format(drives=", ".join(others), pool=pool_name))
    if still_waiting and (gone or not others):
        advice.append(f"to put the new drive in: {replace_runbook(host.name)}")
    return f"{host.print_prefix}" + "; ".join(parts) + ". The pool is left as it is; " + "; ".join(advice)


def health_problems(topology: dict) -> list[str]:
    """Devices that are not healthy: degraded, but not a layout difference."""
    problems = []
    for section in ("vdevs", "logs", "cache", "special", "dedup"):
        for vdev in topology.get(section, []):
            for device in vdev["devices"]:
                if device["state"] not in HEALTHY_STATES:
                    note = f" ({device['note']})" if device["note"] else ""
                    problems.append(f"{device['disk']} is {device['state']}{note}")
                for stand_in in device.get("replaced_by", []):
                    problems.append(
                        f"{device['disk']} is being replaced by {stand_in['disk']} "
                        f"({device['slot']}, {stand_in['state']})"
                    )
    for spare in topology["spares"]:
        if spare["state"] == "INUSE":
            problems.append(f"spare {spare['disk']} is in use")
        elif spare["state"] not in HEALTHY_SPARE_STATES:
            problems.append(f"spare {spare['disk']} is {spare['state']}")
    if not problems and topology["state"] not in HEALTHY_STATES:
        problems.append(f"pool state {topology['state']}")
    return problems
