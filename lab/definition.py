"""Load and check lab/lab.yaml, the one lab definition; paths of the lab's state.

`load()` returns a `Lab` with the image recipe and one `VM` per guest (defaults merged in).
Runtime state lives in <repo>/.lab (per checkout); the image and the apt cache live in
/var/cache/dbzfs-lab (per machine, shared by checkouts; override with DBZFS_LAB_CACHE).
"""

import dataclasses
import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import yaml

from model import releases

REPO = Path(__file__).resolve().parent.parent
DEFINITION = Path(__file__).resolve().parent / "lab.yaml"
STATE = REPO / ".lab"
CACHE = Path(os.environ.get("DBZFS_LAB_CACHE", "/var/cache/dbzfs-lab"))
SSH_KEY = STATE / "id_ed25519"
SSH_CONFIG = STATE / "ssh_config"
# The lab's ZFS module repository (zfsrepo, published by lab/module_repo.py from the zfs image's
# packages), served by the lab's apt-cacher-ng under a name only it resolves.
ZFS_REPO = CACHE / "zfs-repo"
ZFS_REPO_URL = "http://dbzfs-zfs-modules.lab/"

BY_ID_PREFIX = "nvme-QEMU_NVMe_Ctrl_"  # how the guest's udev names a qemu NVMe drive by serial
ENGINES = ("mariadb", "postgresql")
ROLES = ("primary", "replica")  # a database VM's
BACKUP_ROLE = "backup"  # every VM of backup_vms: no engine, it pulls the database VMs' snapshots
BENCH_ROLE = "bench"  # every VM of bench_vms: both engines in turn, installed by the benchmark


_UNSET = object()


class LabDefinitionError(ValueError):
    """A mistake in lab.yaml: the file (and line), the VM, the key, the value, what is wrong and
    the fix, in one line."""

    def __init__(
        self,
        message: str,
        *,
        vm: str | None = None,
        key: str | None = None,
        value: object = _UNSET,
        fix: str | None = None,
        file: str | None = None,
        line: int | None = None,
    ):
        self.message, self.vm, self.key, self.value = message, vm, key, value
        self.fix, self.file, self.line = fix, file, line
        super().__init__(message)

    def __str__(self) -> str:
        text = self.message
        if self.key is not None:
            text = f"{self.key}{'' if self.value is _UNSET else f' = {self.value!r}'}: {text}"
        if self.vm is not None:
            text = f"{self.vm}: {text}"
        if self.file is not None:
            text = f"{self.file}{f' line {self.line}' if self.line else ''}: {text}"
        return f"{text}. Fix: {self.fix}" if self.fix else text


def parse_size(text: object) -> int:
    """'512M' / '8G' / bytes -> bytes."""
    m = (
        re.fullmatch(r"(\d+)([KMGT]?)", str(text))
        if isinstance(text, (str, int)) and not isinstance(text, bool)
        else None
    )
    if not m:
        raise LabDefinitionError(
            "not a size", value=text, fix="digits and K, M, G or T, without a space: e.g. 512M, 8G"
        )
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " ")


@dataclass(frozen=True)
class VM:
    name: str
    engine: str | None  # None: a backup VM (role "backup")
    role: str
    primary: str | None
    server_id: int | None
    ssh_port: int
    private_address: str  # no prefix
    private_prefix: int
    memory: int  # MiB
    vcpus: int
    drive_count: int
    drive_size: int  # bytes
    drive_serial: str  # format with {vm} and {index}
    image: str = "zfs"  # "zfs": the lab image; "bare": the same release without ZFS or kernel headers
    zfs_install: str | None = None  # None: in the image; "prebuilt" / "dkms": the deploy installs it
    groups: tuple[str, ...] = ()  # inventory groups beyond the engine's, e.g. ("monitoring",)
    debian_release: str = releases.DEFAULT  # the image's (image.suite): its host data's debian_release

    @property
    def serials(self) -> list[str]:
        return [self.drive_serial.format(vm=self.name, index=i) for i in range(self.drive_count)]

    @property
    def drive_ids(self) -> list[str]:
        """The drives' names under /dev/disk/by-id in the guest, in index order."""
        return [BY_ID_PREFIX + s for s in self.serials]

    @property
    def drive_pattern(self) -> str:
        """A glob under /dev/disk/by-id matching this VM's drives and nothing else: the {index}
        part becomes '?'s, so namespace links (..._1) and partitions (-partN) stay out."""
        first = self.drive_serial.format(vm=self.name, index=0)
        head, _, rest = self.drive_serial.partition("{index")
        head, tail = head.format(vm=self.name), rest.partition("}")[2].format(vm=self.name)
        return BY_ID_PREFIX + head + "?" * (len(first) - len(head) - len(tail)) + tail

    @property
    def state_dir(self) -> Path:
        return STATE / self.name

    @property
    def console_log(self) -> Path:
        return self.state_dir / "console.log"

    @property
    def host_data(self) -> dict:
        """The data this VM's inventory entry carries (see group_data/all.py). A backup VM's has no
        engine, primary or server_id: it runs no database."""
        if self.role == BACKUP_ROLE:
            return {
                "role": self.role,
                "replication_address": self.private_address,
                "hardware": {"ram_bytes": self.memory * 1024 * 1024, "cpus": self.vcpus},
                "drive_pattern": self.drive_pattern,
                "drive_count": self.drive_count,
                "debian_release": self.debian_release,
            } | self.zfs_install_data
        return {
            "engine": self.engine,
            "debian_release": self.debian_release,
            "role": self.role,
            "primary": self.primary,
            "server_id": self.server_id,
            "replication_address": self.private_address,
            "hardware": {"ram_bytes": self.memory * 1024 * 1024, "cpus": self.vcpus},
            "drive_pattern": self.drive_pattern,
            "drive_count": self.drive_count,
        } | self.zfs_install_data

    @property
    def zfs_install_data(self) -> dict:
        if self.zfs_install != "prebuilt":
            return {}
        return {
            "zfs_install": "prebuilt",
            "zfs_module_repository": {
                "url": ZFS_REPO_URL,
                "suite": releases.get(self.debian_release).codename,
                "key_file": str(ZFS_REPO / "dbzfs-zfs-modules.asc"),
            },
        }


@dataclass(frozen=True)
class Lab:
    vms: dict  # name -> VM, in definition order: the lab that `up` and `converge` run
    image: dict
    network: dict = field(default_factory=dict)
    bare: dict = field(default_factory=dict)  # name -> VM on the bare image, booted only by name
    # name -> VM that joins the lab's replication groups on day 2: booted only by name (the e2e
    # topology scenarios), not in inventories/lab.py
    joining: dict = field(default_factory=dict)
    # name -> backup VM (role "backup", no engine): booted only by name (the backup e2e test,
    # `python -m lab up backup1`), not in inventories/lab.py but in inventories/lab_backup.py
    backup: dict = field(default_factory=dict)
    # name -> benchmark VM (role "bench", no engine): booted only by `./dbzfs bench` (bench/run.py)
    bench: dict = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.vms)

    @property
    def release(self) -> str:
        """The Debian release its VMs run (image.suite), as debian_release spells it: "12", "13"."""
        return next(r.major for r in releases.RELEASES.values() if r.codename == self.image["suite"])

    @property
    def all_vms(self) -> dict[str, VM]:
        return {**self.vms, **self.joining, **self.bare, **self.backup, **self.bench}

    def vm(self, name: str) -> VM:
        try:
            return self.all_vms[name]
        except KeyError:
            raise LabDefinitionError(
                f"no VM {name!r} in {DEFINITION} (have: {', '.join(self.all_vms)})"
            ) from None


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated in one mapping (YAML keeps the last one silently:
    a second `db1:` would replace the first VM)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # SafeLoader itself refuses unhashable keys, with their line
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise LabDefinitionError(
                    f"the key appears twice in one mapping (first on line "
                    f"{seen[key]}); YAML would keep only the last",
                    key=str(key),
                    line=line,
                    fix="rename one (each VM needs its own name) or remove it",
                )
            seen[key] = line
        return super().construct_mapping(node, deep)


def load(path: str | Path = DEFINITION) -> Lab:
    shown = _shown(path)
    try:
        with open(path) as f:
            raw = yaml.load(f, Loader=_Loader)  # noqa: S506 - a SafeLoader
        return _check(raw)
    except LabDefinitionError as e:
        e.file = shown
        raise
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise LabDefinitionError(
            f"not valid YAML: {e.problem or e.context}",
            file=shown,
            line=mark.line + 1 if mark else None,
            fix="correct the YAML there",
        ) from None
    except OSError as e:
        raise LabDefinitionError(
            f"cannot read it ({e.strerror})", file=shown, fix="restore lab/lab.yaml from git"
        ) from None


def _shown(path: str | Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


SUITE_ENV = "DBZFS_LAB_SUITE"  # over image.suite: the lab on another supported release
# "prebuilt": every database VM boots the bare image and installs ZFS from the lab's module
# repository (the release upgrade's lab: no DKMS build for the new kernel under emulation)
ZFS_ENV = "DBZFS_LAB_ZFS_INSTALL"
TOP_KEYS = ("defaults", "network", "image", "vms", "joining_vms", "bare_vms", "backup_vms", "bench_vms")
VM_KEYS = (
    "engine",
    "role",
    "primary",
    "server_id",
    "ssh_port",
    "private_address",
    "memory",
    "vcpus",
    "drive_count",
    "drive_size",
    "drive_serial",
    "groups",
    "zfs_install",
)
# primary and server_id: per engine and role; groups, zfs_install: optional
REQUIRED = tuple(k for k in VM_KEYS if k not in ("primary", "server_id", "groups", "zfs_install"))
# A backup VM (backup_vms) runs no database: no engine, primary or server_id.
NO_DATABASE = ("engine", "primary", "server_id")
REQUIRED_BACKUP = tuple(k for k in REQUIRED if k not in NO_DATABASE)
# How a VM of `vms` (or `backup_vms`) gets ZFS: absent, from the lab image; "prebuilt", booted from
# the bare image and installed by the deploy from the lab's module repository. bare_vms install with
# DKMS.
ZFS_INSTALLS = ("prebuilt",)
IMAGE_TEXT = ("suite", "mirror", "security_mirror", "size")
IMAGE_LISTS = ("components", "base_packages", "kernel_packages", "header_packages", "zfs_packages")
EXTRA_GROUPS = ("monitoring",)  # group_data/<group>.py applies to the VMs listed in it
MIN_MEMORY = 2048  # MiB: the deploy sizes for >= 2 GiB (validation, hardware)
MIN_BACKUP_MEMORY = 1024  # MiB: a backup VM runs no database (the deploy does not size one there)
MIN_DRIVE = 64 * 1024**2  # ZFS refuses a vdev smaller than 64 MiB (SPA_MINDEVSIZE)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mapping(value: object, key: str, fix: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise LabDefinitionError(
            f"must be a mapping, not {type(value).__name__}", key=key, value=value, fix=fix
        )
    return value


def _check(raw: object) -> Lab:
    if not isinstance(raw, dict):
        raise LabDefinitionError(
            "must be a mapping with defaults, network, image and vms",
            key="lab.yaml",
            value=raw,
            fix="restore lab/lab.yaml from git",
        )
    unknown = sorted(set(raw) - set(TOP_KEYS), key=str)
    if unknown:
        raise LabDefinitionError(
            "unknown key", key=str(unknown[0]), value=raw[unknown[0]], fix=f"use only {', '.join(TOP_KEYS)}"
        )
    if not isinstance(raw.get("vms"), dict) or not raw["vms"]:
        raise LabDefinitionError(
            "needs a non-empty 'vms' mapping",
            key="vms",
            value=raw.get("vms"),
            fix="one entry per VM: name -> settings",
        )
    defaults = _mapping(raw.get("defaults"), "defaults", "key: value settings shared by the VMs")
    network = _mapping(raw.get("network"), "network", "keep the network of lab/lab.yaml")
    image = _mapping(raw.get("image"), "image", "keep the image of lab/lab.yaml")
    if os.environ.get(SUITE_ENV):  # ./dbzfs test-debian12: the same lab on another release
        image = {**image, "suite": os.environ[SUITE_ENV]}
    if os.environ.get(ZFS_ENV, "prebuilt") != "prebuilt":
        raise LabDefinitionError(
            "not a way the lab installs ZFS on every VM",
            key=ZFS_ENV,
            value=os.environ[ZFS_ENV],
            fix="prebuilt, or unset",
        )
    _check_image(image)
    prefix = network.get("private_prefix", 24)
    if not (_is_int(prefix) and 8 <= prefix <= 30):
        raise LabDefinitionError(
            "must be a prefix length 8..30", key="network.private_prefix", value=prefix, fix="e.g. 24"
        )
    port = network.get("apt_cache_port", 3142)
    if not (_is_int(port) and 1 <= port <= 65535):
        raise LabDefinitionError(
            "must be a TCP port 1..65535", key="network.apt_cache_port", value=port, fix="e.g. 3142"
        )
    guest = network.get("apt_cache_guest_address", "10.0.2.100")
    try:
        ipaddress.IPv4Address(guest if isinstance(guest, str) else "")
    except ValueError:
        raise LabDefinitionError(
            "not an IPv4 address", key="network.apt_cache_guest_address", value=guest, fix="e.g. 10.0.2.100"
        ) from None
    for key in sorted(set(defaults) - set(VM_KEYS), key=str):
        raise LabDefinitionError(
            "unknown key", key=f"defaults.{key}", value=defaults[key], fix=f"use only {', '.join(VM_KEYS)}"
        )
    bare = _mapping(raw.get("bare_vms"), "bare_vms", "one entry per bare VM: name -> settings")
    vms = {name: _vm(name, spec, defaults, prefix, "zfs") for name, spec in raw["vms"].items()}
    bare = {
        name: _vm(name, spec, defaults, prefix, "bare", section="bare_vms") for name, spec in bare.items()
    }
    joining = _mapping(raw.get("joining_vms"), "joining_vms", "one entry per VM: name -> settings")
    joining = {
        name: _vm(name, spec, defaults, prefix, "zfs", section="joining_vms")
        for name, spec in joining.items()
    }
    backup = _mapping(raw.get("backup_vms"), "backup_vms", "one entry per backup VM: name -> settings")
    backup = {
        name: _vm(name, spec, defaults, prefix, "zfs", section="backup_vms") for name, spec in backup.items()
    }
    bench = _mapping(raw.get("bench_vms"), "bench_vms", "one entry per benchmark VM: name -> settings")
    bench = {
        name: _vm(name, spec, defaults, prefix, "zfs", section="bench_vms") for name, spec in bench.items()
    }
    sections = {
        "vms": vms,
        "joining_vms": joining,
        "bare_vms": bare,
        "backup_vms": backup,
        "bench_vms": bench,
    }
    for index, (section, names) in enumerate(sections.items()):
        for name in names:
            earlier = [other for other in list(sections)[:index] if name in sections[other]]
            if earlier:
                raise LabDefinitionError(
                    f"VM names in both {earlier[0]} and {section}",
                    key=f"{section}.{name}",
                    fix="give the VM its own name",
                )
    everything = {**vms, **joining, **bare, **backup, **bench}
    for vm in everything.values():
        # A bare VM's primary is bare; a joining VM is a replica of a lab VM (it joins a group that
        # exists without it).
        home = bare if vm.name in bare else vms
        if vm.primary and (
            vm.primary not in home
            or home[vm.primary].engine != vm.engine
            or home[vm.primary].role != "primary"
        ):
            raise LabDefinitionError(
                f"is not a {vm.engine} primary here",
                vm=vm.name,
                key="primary",
                value=vm.primary,
                fix=f"name a {vm.engine} primary of {'vms' if vm.name in joining else 'the same section'}",
            )
        if vm.name in joining and vm.role != "replica":
            raise LabDefinitionError(
                "a joining VM joins as a replica",
                vm=vm.name,
                key="role",
                value=vm.role,
                fix="role: replica, with the lab primary it follows",
            )
    for attr in ("ssh_port", "private_address"):
        owner = {}
        for vm in everything.values():
            value = getattr(vm, attr)
            if value in owner:
                raise LabDefinitionError(
                    f"{attr} must differ between VMs: {owner[value]} has it too",
                    vm=vm.name,
                    key=attr,
                    value=value,
                    fix=f"give each VM its own {attr}",
                )
            owner[value] = vm.name
    owner = {}
    for vm in everything.values():
        for serial in vm.serials:
            if serial in owner and owner[serial] != vm.name:
                raise LabDefinitionError(
                    f"drive serials must differ between VMs: {serial} is also {owner[serial]}'s",
                    vm=vm.name,
                    key="drive_serial",
                    value=vm.drive_serial,
                    fix="keep {vm} in drive_serial",
                )
            owner[serial] = vm.name
    release = Lab(vms={}, image=image).release

    def released(section: dict) -> dict:
        return {name: dataclasses.replace(vm, debian_release=release) for name, vm in section.items()}

    return Lab(
        vms=released(vms),
        image=image,
        network=network,
        bare=released(bare),
        joining=released(joining),
        backup=released(backup),
        bench=released(bench),
    )


def _check_image(image: dict) -> None:
    for key in IMAGE_TEXT + IMAGE_LISTS:
        if key not in image:
            raise LabDefinitionError("missing", key=f"image.{key}", fix="keep the image of lab/lab.yaml")
    for key in IMAGE_TEXT:
        if not isinstance(image[key], str) or not image[key].strip():
            raise LabDefinitionError(
                "must be text", key=f"image.{key}", value=image[key], fix="keep the image of lab/lab.yaml"
            )
    parse_size_at(image["size"], "image.size", None)
    codenames = {r.codename: r for r in releases.RELEASES.values()}
    if image["suite"] not in codenames:
        raise LabDefinitionError(
            "not a Debian release the toolkit supports",
            key="image.suite",
            value=image["suite"],
            fix=" or ".join(f"{c} ({r.label})" for c, r in sorted(codenames.items())),
        )
    for key in IMAGE_LISTS:
        value = image[key]
        if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
            raise LabDefinitionError(
                "must be a list of names", key=f"image.{key}", value=value, fix="e.g. [linux-image-amd64]"
            )


def parse_size_at(value: object, key: str, vm: str | None) -> int:
    try:
        return parse_size(value)
    except LabDefinitionError as e:
        e.key, e.vm = key, vm
        raise


def _vm(name: object, spec: object, defaults: dict, prefix: int, image: str, section: str = "vms") -> VM:
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,15}", str(name)):
        raise LabDefinitionError(
            "not a VM name",
            key=f"{section}.{name}",
            fix="lowercase letters, digits, '-', starting with a letter, at most 16",
        )
    example = "role: backup" if section == "backup_vms" else "engine: mariadb"
    spec = _mapping(spec, f"{section}.{name}", f"key: value settings, e.g. {example}")
    s = {**defaults, **spec}

    def fail(key: str, message: str, fix: str) -> NoReturn:
        where = f"defaults.{key}" if key not in spec and key in defaults else key
        raise LabDefinitionError(message, vm=name, key=where, value=s.get(key), fix=fix)

    for key in sorted(set(spec) - set(VM_KEYS), key=str):
        raise LabDefinitionError(
            "unknown key", vm=name, key=str(key), value=spec[key], fix=f"use only {', '.join(VM_KEYS)}"
        )
    backup = section == "backup_vms"
    no_database = {"backup_vms": BACKUP_ROLE, "bench_vms": BENCH_ROLE}.get(section)
    for key in REQUIRED_BACKUP if no_database else REQUIRED:
        if s.get(key) is None:
            raise LabDefinitionError("missing", vm=name, key=key, fix=f"set {key} for the VM or in defaults")
    server_id = s.get("server_id")
    if no_database:
        what = "a backup host" if backup else "a benchmark VM"
        if s["role"] != no_database:
            fail("role", f"a VM of {section} is {what}", f"role: {no_database}")
        for key in NO_DATABASE:
            if s.get(key) is not None:
                fail(
                    key,
                    "a backup VM runs no database" if backup else "a benchmark VM declares no database",
                    "remove it (a backup VM pulls the database VMs' snapshots)"
                    if backup
                    else "remove it (the benchmark installs and runs both engines in turn)",
                )
    else:
        if s["engine"] not in ENGINES:
            fail("engine", "not an engine", f"use one of {', '.join(ENGINES)}")
        if s["role"] == BACKUP_ROLE:
            fail(
                "role",
                "a backup host runs no database: it belongs in backup_vms",
                "move the VM to backup_vms, without engine, primary or server_id",
            )
        if s["role"] == BENCH_ROLE:
            fail(
                "role",
                "a benchmark VM belongs in bench_vms",
                "move the VM to bench_vms, without engine, primary or server_id",
            )
        if s["role"] not in ROLES:
            fail("role", "not a role", f"use one of {', '.join(ROLES)}")
        if (s["role"] == "replica") != bool(s.get("primary")):
            fail("primary", "a replica names its primary, a primary does not", "set primary on replicas only")
        if s.get("primary") is not None and not isinstance(s["primary"], str):
            fail("primary", "must be a VM name", "e.g. db1")
        if s["engine"] == "mariadb" and not (_is_int(server_id) and 1 <= server_id < 2**32):
            fail(
                "server_id",
                "a MariaDB VM needs an integer server_id 1..4294967295",
                "e.g. 1, unique among the VMs",
            )
        if s["engine"] == "postgresql" and server_id is not None:
            fail("server_id", "PostgreSQL has no server_id", "remove it")
    if not (_is_int(s["ssh_port"]) and 1024 <= s["ssh_port"] <= 65535):
        fail("ssh_port", "must be a TCP port 1024..65535", "e.g. 2221, unique among the VMs")
    try:
        address = (
            ipaddress.IPv4Address(str(s["private_address"]).split("/")[0])
            if isinstance(s["private_address"], str)
            else None
        )
    except ValueError:
        address = None
    if address is None:
        fail("private_address", "not an IPv4 address", "e.g. 10.99.0.11, unique among the VMs")
    for key, low, unit in (
        ("memory", MIN_BACKUP_MEMORY if backup else MIN_MEMORY, "MiB"),
        ("vcpus", 1, "vCPUs"),
        ("drive_count", 2, "drives"),
    ):
        if not _is_int(s[key]):
            fail(
                key,
                f"must be an integer ({unit}), not {type(s[key]).__name__}",
                {"memory": "e.g. 4096", "vcpus": "e.g. 2", "drive_count": "e.g. 24"}[key],
            )
        if s[key] < low:
            fail(
                key,
                f"must be at least {low} {unit}",
                {
                    "memory": (
                        "e.g. 1536 (a backup VM needs 1 GiB)"
                        if backup
                        else "e.g. 4096 (the deploy needs 2 GiB)"
                    ),
                    "vcpus": "e.g. 2",
                    "drive_count": "e.g. 24 (mirrors need 2 or more)",
                }[key],
            )
    drive_size = parse_size_at(
        s["drive_size"], "drive_size" if "drive_size" in spec else "defaults.drive_size", name
    )
    if drive_size < MIN_DRIVE:
        fail("drive_size", "ZFS refuses drives smaller than 64M", "e.g. 512M")
    serial = s["drive_serial"]
    if not isinstance(serial, str):
        fail("drive_serial", "must be text", 'e.g. "{vm}-nvme{index:02d}"')
    try:
        serials = [serial.format(vm=name, index=i) for i in range(s["drive_count"])]
    except (KeyError, IndexError, ValueError) as e:
        fail(
            "drive_serial",
            f"not a format with the fields {{vm}} and {{index}} ({e})",
            'e.g. "{vm}-nvme{index:02d}"',
        )
    if len(set(serials)) != len(serials) or any(len(x) > 20 for x in serials):
        fail(
            "drive_serial", "drive serials must be unique and <= 20 characters", 'e.g. "{vm}-nvme{index:02d}"'
        )
    if len({len(x) for x in serials}) != 1 or serial.count("{index") != 1:
        fail("drive_serial", "drive_serial needs one fixed-width {index:0Nd}", 'e.g. "{vm}-nvme{index:02d}"')
    zfs_install = s.get("zfs_install")
    if section == "bare_vms":
        if zfs_install is not None:
            fail("zfs_install", "a bare VM installs ZFS with DKMS (./dbzfs test-install)", "remove it")
        zfs_install = "dkms"
    elif zfs_install is not None and zfs_install not in ZFS_INSTALLS:
        fail(
            "zfs_install",
            "not a way the lab installs ZFS",
            "prebuilt (the bare image, ZFS from the lab's module repository), or leave it out",
        )
    if section in ("vms", "joining_vms") and zfs_install is None and os.environ.get(ZFS_ENV) == "prebuilt":
        zfs_install = "prebuilt"
    if zfs_install == "prebuilt":
        image = "bare"
    groups = s.get("groups") or []
    if not (isinstance(groups, list) and all(g in EXTRA_GROUPS for g in groups)):
        fail(
            "groups",
            "must be a list of inventory groups",
            f"e.g. [monitoring] (have: {', '.join(EXTRA_GROUPS)})",
        )
    return VM(
        name=name,
        engine=s.get("engine"),
        role=s["role"],
        primary=s.get("primary"),
        server_id=server_id,
        ssh_port=s["ssh_port"],
        private_address=str(address),
        private_prefix=prefix,
        memory=s["memory"],
        vcpus=s["vcpus"],
        drive_count=s["drive_count"],
        drive_size=drive_size,
        drive_serial=serial,
        image=image,
        zfs_install=zfs_install,
        groups=tuple(groups),
    )
