"""
Manage ZFS datasets and module parameters, comparing values the way ZFS means them.

pyinfra's own ``zfs.dataset`` compares property strings raw, so "16k" against the reported
"16K" re-runs ``zfs set`` on every deploy; this one normalises both sides first.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping

from pyinfra import host, logger
from pyinfra.api import OperationValueError, QuoteString, StringCommand, operation

from facts.zfs import MODPROBE_CONF, ZfsAllowed, ZfsDatasetProperties, ZfsModuleParameters
from model.zfs_properties import (
    CREATE_ONLY_PROPERTIES,
    READ_ONLY_PROPERTIES,
    PropertyValue,
    format_value,
    same_value,
)


@operation()
def dataset(
    dataset_name: str,
    properties: Mapping[str, PropertyValue] | None = None,
    present: bool = True,
    create_parents: bool = False,
    on_create: Mapping[str, PropertyValue] | None = None,
    **extra_props: PropertyValue,
) -> Generator[StringCommand, None, None]:
    """
    Create or destroy a ZFS filesystem, or bring its properties to the declared values.

    + dataset_name: name of the dataset, e.g. ``dbpool/datastore/mysql``
    + properties: ZFS properties, e.g. ``{"recordsize": "16k", "compression": "zstd"}``
    + present: whether the dataset should exist (``False`` destroys it, not its children)
    + create_parents: create missing parent datasets (``zfs create -p``)
    + on_create: properties set by ``zfs create`` only and never compared afterwards (a user
      property recording a fact about the blocks written, e.g. ``dbzfs:blocks-compression``)
    + **extra_props: additional properties; merged with ``properties``

    A property is changed only when its effective value differs from the declared one after
    normalisation ("16k" == "16K" == 16384, "posixacl" == "posix", "zstd-3" == "zstd"). An
    inherited or default value that already equals the declaration is left inherited: pinning it
    locally would change nothing on disk, and for ``mountpoint`` would remount the dataset
    under a running database. Create-only properties (``casesensitivity``, ``volblocksize``,
    ``encryption``...) that differ are reported, never set.

    **Example:**

    .. code:: python

        zfs.dataset(
            "dbpool/datastore/mysql",
            properties={"recordsize": "16k", "logbias": "throughput"},
        )
    """

    properties = {**(properties or {}), **extra_props}
    read_only = sorted(set(properties) & READ_ONLY_PROPERTIES)
    if read_only:
        raise OperationValueError(
            f"{dataset_name}: read-only properties cannot be declared: {', '.join(read_only)}"
        )

    current = host.get_fact(ZfsDatasetProperties, datasets=[dataset_name]).get(dataset_name)

    if not present:
        if current is None:
            host.noop(f"dataset {dataset_name} is already absent")
        else:
            yield StringCommand("zfs destroy", QuoteString(dataset_name))
        return

    if current is None:
        bits: list = ["zfs create"]
        if create_parents:
            bits.append("-p")
        for prop, value in {**properties, **(on_create or {})}.items():
            bits += ["-o", QuoteString(f"{prop}={format_value(value)}")]
        bits.append(QuoteString(dataset_name))
        yield StringCommand(*bits)
        return

    changes = []
    for prop, wanted in properties.items():
        live = current.get(prop, {}).get("value")
        if same_value(prop, wanted, live):
            continue
        if prop in CREATE_ONLY_PROPERTIES:
            message = (
                f"dataset {dataset_name}: {prop} is {live}, declared {format_value(wanted)}; "
                f"{prop} is fixed when a dataset is created and is left as it is"
            )
            logger.warning(f"{host.print_prefix}{message}")
            host.noop(message)
            continue
        changes.append(f"{prop}={format_value(wanted)}")

    if changes:
        yield StringCommand(
            "zfs set",
            *[QuoteString(change) for change in changes],
            QuoteString(dataset_name),
        )
    else:
        host.noop(f"dataset {dataset_name} has the declared properties")


def _param_value(value: int | str) -> str:
    if value is True:
        return "1"
    if value is False:
        return "0"
    return str(value)


def modprobe_conf_lines(params: Mapping[str, int | str]) -> list[str]:
    options = " ".join(f"{name}={_param_value(params[name])}" for name in sorted(params))
    return [
        "# Managed by the ZFS role: edits are overwritten on the next deploy.",
        f"options zfs {options}",
    ]


@operation()
def module_parameters(
    params: Mapping[str, int | str], path: str = MODPROBE_CONF, write_file: bool = True
) -> Generator[StringCommand, None, None]:
    """
    Persist ZFS module parameters in modprobe.d and apply them to the loaded module.

    + params: ``{"zfs_arc_max": 8589934592, "zfs_prefetch_disable": 1}``
    + path: the modprobe.d file this operation owns (written whole)
    + write_file: ``False`` when another operation (e.g. ``files.template``) writes ``path``:
      then only the live values are applied

    The file is only read when the module loads; the live value is written to
    ``/sys/module/zfs/parameters/<name>`` so no reboot is needed. When the module is not loaded
    yet only the file is written.
    """

    if not params:
        host.noop("no ZFS module parameters declared")
        return

    names = sorted(params)
    fact = host.get_fact(ZfsModuleParameters, names=names, path=path)
    wanted_lines = modprobe_conf_lines(params)

    changed = False
    conf_lines = [line.rstrip() for line in (fact["conf"] or "").splitlines()]
    if write_file and (fact["conf"] is None or conf_lines != wanted_lines):
        changed = True
        yield StringCommand(
            "printf '%s\\n'",
            *[QuoteString(line) for line in wanted_lines],
            ">",
            QuoteString(path),
        )

    for name in names:
        wanted = _param_value(params[name])
        live = fact["live"].get(name)
        if live is None:
            host.noop(f"zfs module not loaded: {name}={wanted} applies when it loads")
            continue
        if live.strip() == wanted:
            continue
        changed = True
        yield StringCommand(
            "echo", QuoteString(wanted), ">", QuoteString(f"/sys/module/zfs/parameters/{name}")
        )

    if not changed:
        host.noop("ZFS module parameters are persisted and live")


@operation()
def allowed(dataset_name: str, user: str, permissions: list[str]) -> Generator[StringCommand, None, None]:
    """
    Exactly these delegated permissions for a user on a dataset and its descendants (``zfs
    allow -u USER PERMS DATASET``); an empty list takes the user's away (``zfs unallow``).

    + dataset_name: full name (created by an earlier operation of the same run, if not before)
    + user: the account
    + permissions: e.g. ["send"]
    """
    live = host.get_fact(ZfsAllowed, dataset=dataset_name) or {}
    have, want = live.get(user, []), sorted(set(permissions))
    if have == want:
        host.noop(f"{user} may {', '.join(want) or 'nothing'} on {dataset_name}")
        return
    if have:
        yield StringCommand("zfs unallow -l -d -u", QuoteString(user), QuoteString(dataset_name))
    if want:
        yield StringCommand(
            "zfs allow -l -d -u", QuoteString(user), ",".join(want), QuoteString(dataset_name)
        )


# Lists, on stderr, what keeps the mount at $mp busy: processes whose working directory, root or
# open files are under it, and mounts beneath it (a snapshot automounted under .zfs/snapshot).
HOLDERS_SCRIPT = r"""under() { awk -v mp="$mp" '$NF == mp || index($NF, mp "/") == 1 {f = 1} END {exit !f}'; }
for p in /proc/[0-9]*; do
  if ls -l "$p/cwd" "$p/root" "$p/fd/" 2>/dev/null | under; then
    echo "  pid ${p#/proc/} ($(cat "$p/comm" 2>/dev/null)): $(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" >&2
  fi
done
awk -v mp="$mp" 'index($2, mp "/") == 1 {print "  mounted under it: " $2 " (" $1 ")"}' /proc/mounts >&2
"""

UNMOUNT_TRIES = 10


def unmount_command(dataset: str, tries: int = UNMOUNT_TRIES) -> StringCommand:
    """
    `zfs unmount`, tried once a second for `tries` seconds if the dataset is mounted. A mount is
    busy for an instant whenever anything resolves a path in it (node_exporter's statfs, a check's
    `cd`), and one such instant failed a rewrite's swap in CI. Busy to the end, the command fails
    naming what holds the mount, so the operator knows what to stop.
    """
    script = (
        'ds=$1; [ "$(zfs get -H -o value mounted "$ds")" = yes ] || exit 0\n'
        'mp=$(zfs get -H -o value mountpoint "$ds")\n'
        f'for i in $(seq {int(tries)}); do zfs unmount "$ds" 2>/dev/null && exit 0; sleep 1; done\n'
        f'echo "$ds is still busy at $mp after {int(tries)} s; what holds it:" >&2\n'
        + HOLDERS_SCRIPT
        + 'zfs unmount "$ds"'
    )
    return StringCommand("bash -c", QuoteString(script), "unmount", QuoteString(dataset))
