"""
Facts about ZFS pools, datasets and module parameters that pyinfra.facts.zfs does not cover.

Every fact here succeeds (returns its default) when the pool / dataset does not exist, so a first
run on a bare host can plan its changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

# Top-level vdev groups `zpool status` prints at the pool's own depth.
SECTIONS = ("logs", "cache", "spares", "special", "dedup")

# Interior vdevs that stand for one slot of their parent during a spare takeover or a replace.
_SLOT_RE = re.compile(r"^(spare|replacing)-\d+$")
_TOP_VDEV_RE = re.compile(r"^(mirror|raidz[123]?|draid[123]?(?::\S+)?|indirect)-\d+$")
_WHOLE_DISK_PART_RE = re.compile(r"-part1$")


def _props_table(output: list[str], with_name: bool) -> dict:
    """Rows of `zpool/zfs get -H -p -o [name,]property,value,source` -> nested dict."""
    data: dict = {}
    for line in output:
        fields = line.split("\t")
        if with_name:
            if len(fields) != 4:
                continue
            name, prop, value, source = fields
            data.setdefault(name, {})[prop] = {"value": value, "source": source}
        else:
            if len(fields) != 3:
                continue
            prop, value, source = fields
            data[prop] = {"value": value, "source": source}
    return data


def _if_pool_exists(pool: str, command: str) -> StringCommand:
    """`command POOL` only when the pool is imported: no output (None) instead of an error."""
    return StringCommand(
        "if zpool list -H -o name",
        QuoteString(pool),
        f">/dev/null 2>&1; then {command}",
        QuoteString(pool),
        "; fi",
    )


def disk_of(path: str) -> str:
    """The drive a vdev path stands for.

    Given a whole disk, ZFS on Linux partitions it (part1 data, part9 reserved) and records
    `<by-id>-part1`; `zpool status -P` prints that partition path.
    """
    return _WHOLE_DISK_PART_RE.sub("", path)


def _leaf(name: str, state: str, extra: str) -> dict:
    # A device ZFS cannot open is printed by guid, with its last known path after "was".
    match = re.search(r"\bwas (\S+)", extra)
    path = match.group(1) if match else name
    return {"path": path, "disk": disk_of(path), "state": state, "note": extra}


class ZpoolTopology(FactBase):
    """
    Returns the vdev layout of a pool from ``zpool status -P``, or ``None`` when the pool is
    not imported.

    .. code:: python

        {
            "name": "dbpool",
            "state": "ONLINE",
            "vdevs": [
                {
                    "name": "mirror-0",
                    "type": "mirror",
                    "state": "ONLINE",
                    "devices": [
                        {
                            "path": "/dev/disk/by-id/nvme-A-part1",
                            "disk": "/dev/disk/by-id/nvme-A",
                            "state": "ONLINE",
                            "note": "",
                            # only while a spare or a new disk stands in for it:
                            "replaced_by": [{"path": ..., "disk": ..., "state": ...}],
                        },
                    ],
                },
            ],
            "spares": [{"path": ..., "disk": ..., "state": "AVAIL", "note": ""}],
            "logs": [], "cache": [], "special": [], "dedup": [],
        }
    """

    @override
    def requires_command(self, pool: str) -> str:
        return "zpool"

    @override
    def command(self, pool: str) -> StringCommand:
        # Not -L: it resolves the by-id links the pool was created with to /dev/nvmeXnY.
        return _if_pool_exists(pool, "zpool status -P")

    @override
    def process(self, output: list[str]) -> dict[str, Any] | None:
        pool: dict = {
            "name": None,
            "state": None,
            "vdevs": [],
            **{section: [] for section in SECTIONS},
        }
        in_config = False
        section = "vdevs"
        top: dict | None = None  # current top-level vdev
        slot: dict | None = None  # current spare-N / replacing-N device
        slot_depth = 0

        for line in output:
            if line.startswith("  pool: "):
                pool["name"] = line.split(":", 1)[1].strip()
                continue
            if line.startswith(" state: "):
                pool["state"] = line.split(":", 1)[1].strip()
                continue
            if line.startswith("config:"):
                in_config = True
                continue
            if line.startswith("errors:"):
                in_config = False
                continue
            if not in_config or not line.startswith("\t") or not line.strip():
                continue

            body = line[1:]
            depth = (len(body) - len(body.lstrip(" "))) // 2
            fields = body.split()
            name = fields[0]
            state = fields[1] if len(fields) > 1 else ""
            # READ WRITE CKSUM follow the state, except on spares; anything after is a note.
            rest = fields[5:] if section != "spares" else fields[2:]
            extra = " ".join(rest)

            if name == "NAME":
                continue
            if depth == 0:
                section = name if name in SECTIONS else "vdevs"
                top = None
                continue

            if depth == 1:
                slot = None
                if section == "spares":
                    pool["spares"].append(_leaf(name, state, extra))
                    continue
                match = _TOP_VDEV_RE.match(name)
                if match:
                    vdev_type = match.group(1).split(":")[0]
                    vdev_type = "raidz1" if vdev_type == "raidz" else vdev_type
                    top = {"name": name, "type": vdev_type, "state": state, "devices": []}
                else:
                    # A single-disk top-level vdev.
                    top = {"name": name, "type": "disk", "state": state, "devices": []}
                    top["devices"].append(_leaf(name, state, extra))
                pool[section].append(top)
                continue

            if top is None:
                continue

            if _SLOT_RE.match(name):
                slot = {"slot": name, "state": state}
                slot_depth = depth
                continue

            if slot is not None and depth > slot_depth:
                device = _leaf(name, state, extra)
                if "device" not in slot:
                    # The first child of spare-N / replacing-N is the original disk.
                    device["replaced_by"] = []
                    device["slot"] = slot["slot"]
                    slot["device"] = device
                    top["devices"].append(device)
                else:
                    slot["device"]["replaced_by"].append(device)
                continue

            slot = None
            top["devices"].append(_leaf(name, state, extra))

        if pool["name"] is None:
            return None
        return pool


class ZpoolProperties(FactBase):
    """
    Returns a pool's properties with their sources from ``zpool get -H -p``, or ``None`` when
    the pool is not imported. Sizes and percentages are plain numbers (``capacity`` is ``"37"``).

    .. code:: python

        {
            "ashift": {"value": "12", "source": "local"},
            "autotrim": {"value": "on", "source": "local"},
            "capacity": {"value": "37", "source": "-"},
            "health": {"value": "ONLINE", "source": "-"},
        }
    """

    @override
    def requires_command(self, pool: str) -> str:
        return "zpool"

    @override
    def command(self, pool: str) -> StringCommand:
        return _if_pool_exists(pool, "zpool get -H -p -o property,value,source all")

    @override
    def process(self, output: list[str]) -> dict[str, dict[str, str]] | None:
        return _props_table(output, with_name=False) or None


class ZfsDatasetProperties(FactBase):
    """
    Returns the properties and their sources of the named datasets (and their descendants with
    ``recursive=True``) from ``zfs get -H -p``. Datasets that do not exist are left out.

    .. code:: python

        {
            "dbpool/datastore": {
                "recordsize": {"value": "131072", "source": "local"},
                "compression": {"value": "lz4", "source": "local"},
                "atime": {"value": "on", "source": "default"},
            },
            "dbpool/datastore/mysql": {
                "compression": {"value": "lz4", "source": "inherited from dbpool/datastore"},
            },
        }
    """

    default = dict

    @override
    def requires_command(self, datasets: str | Iterable[str], recursive: bool = False) -> str:
        return "zfs"

    @override
    def command(self, datasets: str | Iterable[str], recursive: bool = False) -> StringCommand:
        if isinstance(datasets, str):
            datasets = [datasets]
        bits: list = ["zfs get -H -p -o name,property,value,source"]
        if recursive:
            bits.append("-r")
        bits.append("all")
        bits += [QuoteString(dataset) for dataset in datasets]
        # zfs get prints the datasets it found and exits 1 naming those it did not.
        bits.append("|| true")
        return StringCommand(*bits)

    @override
    def process(self, output: list[str]) -> dict[str, dict[str, dict[str, str]]]:
        return _props_table(output, with_name=True)


MODPROBE_CONF = "/etc/modprobe.d/zfs.conf"
_PARAMETER_NAME_RE = re.compile(r"^[a-z0-9_]+$")


def parse_modprobe_options(lines: Iterable[str], module: str = "zfs") -> dict[str, str]:
    """`options zfs k=v k2=v2` lines -> {k: v}; later lines win, as for modprobe."""
    params: dict[str, str] = {}
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2 or fields[0] != "options" or fields[1] != module:
            continue
        for option in fields[2:]:
            key, _, value = option.partition("=")
            params[key] = value
    return params


class ZfsModuleParameters(FactBase):
    """
    Returns the live values of ZFS module parameters (``/sys/module/zfs/parameters``) and the
    ones persisted in ``/etc/modprobe.d/zfs.conf``. A live value is ``None`` when the module is
    not loaded or has no such parameter; ``conf`` is ``None`` when the file does not exist.

    .. code:: python

        {
            "live": {"zfs_arc_max": "0", "zfs_prefetch_disable": "0"},
            "persisted": {"zfs_arc_max": "8589934592"},
            "conf": "options zfs zfs_arc_max=8589934592\\n",
        }
    """

    @override
    def command(self, names: Sequence[str], path: str = MODPROBE_CONF) -> StringCommand:
        for name in names:
            if not _PARAMETER_NAME_RE.match(name):
                raise ValueError(f"not a ZFS module parameter name: {name!r}")
        self._names = list(names)
        bits: list = ["for p in", *names, "; do"]
        bits += [
            "f=/sys/module/zfs/parameters/$p;",
            'if [ -r "$f" ]; then printf \'@param %s %s\\n\' "$p" "$(cat "$f")";',
            "fi; done;",
            "if [ -f",
            QuoteString(path),
            "]; then echo @conf; cat",
            QuoteString(path),
            "; fi",
        ]
        return StringCommand(*bits)

    @override
    def process(self, output: list[str]) -> dict[str, Any]:
        live: dict[str, str | None] = {name: None for name in getattr(self, "_names", [])}
        conf_lines: list[str] | None = None
        for line in output:
            if conf_lines is not None:
                conf_lines.append(line)
            elif line.startswith("@param "):
                _, name, *value = line.split(" ", 2)
                live[name] = value[0].strip() if value else ""
            elif line == "@conf":
                conf_lines = []
        return {
            "live": live,
            "persisted": parse_modprobe_options(conf_lines or []),
            "conf": None if conf_lines is None else "".join(f"{line}\n" for line in conf_lines),
        }

    @staticmethod
    @override
    def default() -> dict[str, Any]:
        return {"live": {}, "persisted": {}, "conf": None}


class ModuleRepositoryPackages(FactBase):
    """
    Returns the packages of an apt repository's index for this host's architecture as
    ``{"packages": {name: [versions]}}``, read with apt's own downloader (``apt-helper``, so through
    the host's apt proxy and sources' transport) without touching apt's lists or sources; or
    ``{"error": "..."}`` when neither ``Packages.gz`` nor ``Packages`` could be fetched. The
    signature is apt's business at install time; this only answers "is there a module for this
    kernel" before anything changes.
    """

    _script = (
        "arch=$(dpkg --print-architecture); d=$(mktemp -d); trap 'rm -rf \"$d\"' EXIT; "
        'for ext in .gz ""; do '
        'if /usr/lib/apt/apt-helper download-file "$base/binary-$arch/Packages$ext" "$d/Packages$ext" '
        '>"$d/log" 2>&1; then '
        'if [ "$ext" = .gz ]; then gzip -dc "$d/Packages.gz"; else cat "$d/Packages"; fi '
        "| awk '/^Package: /{p=$2} /^Version: /{print \"pkg\", p, $2}'; exit 0; fi; done; "
        'echo "error $(grep -v "^Get:" "$d/log" | tail -n 2 | tr "\\n" " ")"'
    )

    @override
    def command(self, url: str, suite: str, component: str = "main") -> StringCommand:
        base = f"{url.rstrip('/')}/dists/{suite}/{component}"
        return StringCommand("base=" + "'" + base.replace("'", "'\\''") + "';", self._script)

    @override
    def process(self, output: Iterable[str]) -> dict[str, Any]:
        packages: dict[str, list[str]] = {}
        for line in output:
            kind, _, rest = line.partition(" ")
            if kind == "error":
                return {"error": rest.strip() or "could not fetch the package index"}
            if kind == "pkg":
                name, _, version = rest.partition(" ")
                packages.setdefault(name, []).append(version.strip())
        return {"packages": packages}


class ZfsSnapshots(FactBase):
    """
    Returns the dataset's own snapshots (not its children's), oldest first, from
    ``zfs list -Hp -t snapshot -o name,creation -d 1``; an empty list when the dataset does not
    exist.

    .. code:: python

        [{"name": "dbpool/datastore/mysql@autosnap_2026-12-04_22:00:03_hourly", "creation": 1796421603}]
    """

    default = list

    @override
    def requires_command(self, dataset: str) -> str:
        return "zfs"

    @override
    def command(self, dataset: str) -> StringCommand:
        return StringCommand(
            "zfs list -Hp -t snapshot -o name,creation -s creation -d 1",
            QuoteString(dataset),
            "2>/dev/null || true",
        )

    @override
    def process(self, output: list[str]) -> list[dict[str, object]]:
        found = []
        for line in output:
            name, _, creation = line.partition("\t")
            if "@" in name and creation.strip().isdigit():
                found.append({"name": name, "creation": int(creation)})
        return found


class ZfsAllowed(FactBase):
    """
    Returns the permissions ``zfs allow`` gives each user on a dataset itself ("Local+Descendent",
    not those inherited from a parent), permissions sorted; None when the dataset does not exist.

    .. code:: python

        {"dbzfs-backup": ["send"]}
    """

    @override
    def requires_command(self, dataset: str) -> str:
        return "zfs"

    @override
    def command(self, dataset: str) -> StringCommand:
        return StringCommand(
            "if zfs list -H -o name",
            QuoteString(dataset),
            ">/dev/null 2>&1; then zfs allow",
            QuoteString(dataset),
            "; else echo MISSING; fi",
        )

    @override
    def process(self, output: list[str]) -> dict[str, list[str]] | None:
        return parse_allowed(output)


def parse_allowed(output: list[str]) -> dict[str, list[str]] | None:
    """user -> permissions from the "Local+Descendent permissions:" part of `zfs allow DATASET`'s
    first "---- Permissions on" block (the dataset's own; later blocks are its parents')."""
    if any(line.strip() == "MISSING" for line in output):
        return None
    found: dict[str, set[str]] = {}
    section, blocks = None, 0
    for line in output:
        text = line.strip()
        if text.startswith("---- Permissions on"):
            blocks += 1
            section = None
        elif text.endswith("permissions:"):
            section = text[: -len("permissions:")].strip()
        elif blocks == 1 and section == "Local+Descendent":
            words = text.split(None, 2)
            if len(words) == 3 and words[0] == "user":
                found.setdefault(words[1], set()).update(p for p in words[2].split(",") if p)
    return {user: sorted(perms) for user, perms in found.items()}


class ZfsSnapshotPositions(FactBase):
    """
    Returns the snapshots under the named datasets (recursive), oldest first, with their
    creation time and their ``dbzfs:gtid`` user property (None when not set): the backup host's
    copies a MariaDB restore starts from. Datasets that do not exist are left out.

    .. code:: python

        [
            {
                "name": "backuppool/backup/mariadb/db2/data@autosnap_2026-12-05_06:00:03_hourly",
                "creation": 1796450403,
                "gtid": "0-1-42",
            },
        ]
    """

    default = list

    @override
    def requires_command(self, datasets: Sequence[str]) -> str:
        return "zfs"

    @override
    def command(self, datasets: Sequence[str]) -> StringCommand:
        return StringCommand(
            "zfs list -Hp -t snapshot -o name,creation,dbzfs:gtid -s creation -r",
            *[QuoteString(d) for d in datasets],
            "2>/dev/null || true",
        )

    @override
    def process(self, output: list[str]) -> list[dict[str, object]]:
        found = []
        for line in output:
            fields = line.split("\t")
            if len(fields) != 3 or "@" not in fields[0] or not fields[1].strip().isdigit():
                continue
            gtid = fields[2].strip()
            found.append(
                {"name": fields[0], "creation": int(fields[1]), "gtid": None if gtid in ("", "-") else gtid}
            )
        return found
