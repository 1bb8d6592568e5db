"""Load and check lab/lab.yaml, the one lab definition; paths of the lab's state.

`load()` returns a `Lab` with the image recipe and one `VM` per guest (defaults merged in).
Runtime state lives in <repo>/.lab (per checkout); the image and the apt cache live in
/var/cache/dbzfs-lab (per machine, shared by checkouts; override with DBZFS_LAB_CACHE).
"""

import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
DEFINITION = Path(__file__).resolve().parent / "lab.yaml"
STATE = REPO / ".lab"
CACHE = Path(os.environ.get("DBZFS_LAB_CACHE", "/var/cache/dbzfs-lab"))
SSH_KEY = STATE / "id_ed25519"
SSH_CONFIG = STATE / "ssh_config"

BY_ID_PREFIX = "nvme-QEMU_NVMe_Ctrl_"  # how the guest's udev names a qemu NVMe drive by serial
ENGINES = ("mariadb", "postgresql")
ROLES = ("primary", "replica")


class LabDefinitionError(ValueError):
    pass


def parse_size(text):
    """'512M' / '8G' / bytes -> bytes."""
    m = re.fullmatch(r"(\d+)([KMGT]?)", str(text).strip())
    if not m:
        raise LabDefinitionError(f"bad size {text!r} (want e.g. 512M, 8G)")
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " ")


@dataclass(frozen=True)
class VM:
    name: str
    engine: str
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
    image: str = "zfs"  # "zfs": the lab image; "bare": Debian 12 without ZFS or kernel headers

    @property
    def serials(self):
        return [self.drive_serial.format(vm=self.name, index=i) for i in range(self.drive_count)]

    @property
    def drive_ids(self):
        """The drives' names under /dev/disk/by-id in the guest, in index order."""
        return [BY_ID_PREFIX + s for s in self.serials]

    @property
    def drive_pattern(self):
        """A glob under /dev/disk/by-id matching this VM's drives and nothing else: the {index}
        part becomes '?'s, so namespace links (..._1) and partitions (-partN) stay out."""
        first = self.drive_serial.format(vm=self.name, index=0)
        head, _, rest = self.drive_serial.partition("{index")
        head, tail = head.format(vm=self.name), rest.partition("}")[2].format(vm=self.name)
        return BY_ID_PREFIX + head + "?" * (len(first) - len(head) - len(tail)) + tail

    @property
    def state_dir(self):
        return STATE / self.name

    @property
    def console_log(self):
        return self.state_dir / "console.log"

    @property
    def host_data(self):
        """The data this VM's inventory entry carries (see group_data/all.py)."""
        return {
            "engine": self.engine,
            "role": self.role,
            "primary": self.primary,
            "server_id": self.server_id,
            "replication_address": self.private_address,
            "hardware": {"ram_bytes": self.memory * 1024 * 1024, "cpus": self.vcpus},
            "drive_pattern": self.drive_pattern,
            "drive_count": self.drive_count,
        }


@dataclass(frozen=True)
class Lab:
    vms: dict  # name -> VM, in definition order: the lab that `up` and `converge` run
    image: dict
    network: dict = field(default_factory=dict)
    bare: dict = field(default_factory=dict)  # name -> VM on the bare image, booted only by name

    @property
    def names(self):
        return list(self.vms)

    @property
    def all_vms(self):
        return {**self.vms, **self.bare}

    def vm(self, name):
        try:
            return self.all_vms[name]
        except KeyError:
            raise LabDefinitionError(f"no VM {name!r} in {DEFINITION} (have: {', '.join(self.all_vms)})") from None


def load(path=DEFINITION):
    with open(path) as f:
        raw = yaml.safe_load(f)
    try:
        return _check(raw)
    except LabDefinitionError as e:
        raise LabDefinitionError(f"{path}: {e}") from None


def _check(raw):
    if not isinstance(raw, dict) or not isinstance(raw.get("vms"), dict) or not raw["vms"]:
        raise LabDefinitionError("needs a non-empty 'vms' mapping")
    defaults = raw.get("defaults") or {}
    network = raw.get("network") or {}
    image = raw.get("image") or {}
    for key in ("suite", "mirror", "security_mirror", "components", "size", "base_packages",
                "kernel_packages", "header_packages", "zfs_packages"):
        if key not in image:
            raise LabDefinitionError(f"image: missing {key!r}")
    prefix = int(network.get("private_prefix", 24))
    vms = {name: _vm(name, {**defaults, **(spec or {})}, prefix, "zfs") for name, spec in raw["vms"].items()}
    bare = raw.get("bare_vms") or {}
    if not isinstance(bare, dict):
        raise LabDefinitionError("'bare_vms' must be a mapping")
    bare = {name: _vm(name, {**defaults, **(spec or {})}, prefix, "bare") for name, spec in bare.items()}
    if set(bare) & set(vms):
        raise LabDefinitionError(f"VM names in both vms and bare_vms: {sorted(set(bare) & set(vms))}")
    everything = {**vms, **bare}
    for vm in everything.values():
        if vm.primary and (vm.primary not in everything or everything[vm.primary].engine != vm.engine
                           or everything[vm.primary].role != "primary"
                           or everything[vm.primary].image != vm.image):
            raise LabDefinitionError(f"{vm.name}: primary {vm.primary!r} is not a {vm.engine} primary here")
    for attr in ("ssh_port", "private_address"):
        values = [getattr(v, attr) for v in everything.values()]
        if len(set(values)) != len(values):
            raise LabDefinitionError(f"{attr} must differ between VMs")
    all_serials = [s for v in everything.values() for s in v.serials]
    if len(set(all_serials)) != len(all_serials):
        raise LabDefinitionError("drive serials must differ between VMs")
    return Lab(vms=vms, image=image, network=network, bare=bare)


def _vm(name, s, prefix, image):
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,15}", str(name)):
        raise LabDefinitionError(f"VM name {name!r}: use lowercase letters, digits, '-'")
    unknown = set(s) - {"engine", "role", "primary", "server_id", "ssh_port", "private_address",
                        "memory", "vcpus", "drive_count", "drive_size", "drive_serial"}
    if unknown:
        raise LabDefinitionError(f"{name}: unknown keys {sorted(unknown)}")
    for key in ("engine", "role", "ssh_port", "private_address", "memory", "vcpus",
                "drive_count", "drive_size", "drive_serial"):
        if s.get(key) is None:
            raise LabDefinitionError(f"{name}: missing {key!r}")
    if s["engine"] not in ENGINES:
        raise LabDefinitionError(f"{name}: engine must be one of {ENGINES}")
    if s["role"] not in ROLES:
        raise LabDefinitionError(f"{name}: role must be one of {ROLES}")
    if (s["role"] == "replica") != bool(s.get("primary")):
        raise LabDefinitionError(f"{name}: a replica names its primary, a primary does not")
    address = str(ipaddress.ip_address(str(s["private_address"]).split("/")[0]))
    vm = VM(name=name, engine=s["engine"], role=s["role"], primary=s.get("primary"),
            server_id=s.get("server_id"), ssh_port=int(s["ssh_port"]),
            private_address=address, private_prefix=prefix, memory=int(s["memory"]),
            vcpus=int(s["vcpus"]), drive_count=int(s["drive_count"]),
            drive_size=parse_size(s["drive_size"]), drive_serial=str(s["drive_serial"]), image=image)
    serials = vm.serials
    if len(set(serials)) != len(serials) or any(len(x) > 20 for x in serials):
        raise LabDefinitionError(f"{name}: drive serials must be unique and <= 20 characters")
    if len({len(x) for x in serials}) != 1 or s["drive_serial"].count("{index") != 1:
        raise LabDefinitionError(f"{name}: drive_serial needs one fixed-width {{index:0Nd}}")
    return vm
