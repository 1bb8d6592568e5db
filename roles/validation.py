"""Checks an inventory's complete data before any host is touched.

`validate(hosts, secrets)` returns every problem at once, each naming the host, the key, the value
and the fix. deploy.py runs it before any operation; `./dbzfs validate INVENTORY` (this module's
main) runs it with no SSH at all.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from roles import secrets as secrets_mod
from roles.hostdata import BY_ID, HostConfig, parse_size

REPO_ROOT = Path(__file__).resolve().parent.parent

ENGINES = ("mariadb", "postgresql")
ROLES = ("primary", "replica")
WORKLOADS = ("oltp", "analytics")
COMPRESSION_RE = re.compile(r"^(on|off|lz4|lzjb|gzip(-[1-9])?|zle|zstd(-([1-9]|1[0-9]))?"
                            r"|zstd-fast(-([1-9]|[1-9][0-9]|[1-9]00|1000))?)$")
DATASET_PROPERTIES = {
    "mountpoint", "atime", "relatime", "xattr", "dnodesize", "acltype", "recordsize",
    "primarycache", "secondarycache", "logbias", "redundant_metadata", "compression", "sync",
    "checksum", "copies", "quota", "refquota", "reservation", "refreservation", "snapdir",
    "special_small_blocks", "canmount", "exec", "setuid", "devices",
}
ON_OFF = ("on", "off")
CHOICES = {
    "atime": ON_OFF, "relatime": ON_OFF, "exec": ON_OFF, "setuid": ON_OFF, "devices": ON_OFF,
    "xattr": ("on", "off", "sa", "dir"),
    "dnodesize": ("legacy", "auto", "1k", "2k", "4k", "8k", "16k"),
    "acltype": ("off", "noacl", "posixacl", "posix", "nfsv4"),
    "primarycache": ("all", "metadata", "none"),
    "secondarycache": ("all", "metadata", "none"),
    "logbias": ("latency", "throughput"),
    "redundant_metadata": ("all", "most", "some", "none"),
    "sync": ("standard", "always", "disabled"),
    "canmount": ("on", "off", "noauto"),
}
# Keys the toolkit reads; a misspelt one with our prefixes is an error, not a silent default.
KNOWN_KEYS = {
    "engine", "role", "primary", "cluster", "server_id", "replication_address", "hardware",
    "workload", "drives", "drive_pattern", "drive_count", "wipe_drives", "zpool_name",
    "zpool_mirror_width", "zpool_spares", "zpool_ashift", "zpool_autoreplace", "zpool_autotrim",
    "zfs_capacity_threshold", "zfs_compression", "zfs_datasets", "zfs_dataset_properties",
    "zfs_module_params", "db_settings", "max_connections", "db_client_networks", "db_port",
    "databases", "db_users",
}
OUR_PREFIXES = ("zpool_", "zfs_", "db_", "drive", "wipe_")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Problem:
    host: str
    key: str
    value: object
    message: str
    fix: str

    def __str__(self) -> str:
        value = self.value if isinstance(self.value, (int, float)) else repr(self.value)
        text = f"{self.host}: {self.key} = {value}: {self.message}"
        return f"{text}. Fix: {self.fix}" if self.fix else text


class ValidationError(Exception):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__(format_problems(problems))


def format_problems(problems: list[Problem]) -> str:
    lines = [f"{len(problems)} problem(s) in the inventory data; no host was changed:"]
    lines += [f"  - {p}" for p in problems]
    return "\n".join(lines)


# What a db_users entry may say, per engine. PostgreSQL users get CONNECT on their database (or own
# it); table privileges are the application's migrations' business there.
USER_KEYS = {
    "mariadb": {"name", "password_secret", "database", "privileges"},
    "postgresql": {"name", "password_secret", "database", "owner"},
}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Checker:
    def __init__(self, hosts: Mapping[str, Mapping], secrets: secrets_mod.Secrets):
        self.data = hosts
        self.secrets = secrets
        self.cfg = {name: HostConfig.from_data(name, data) for name, data in hosts.items()}
        self.problems: list[Problem] = []

    def add(self, host, key, value, message, fix=""):
        self.problems.append(Problem(host, key, value, message, fix))

    def run(self) -> list[Problem]:
        for name, cfg in self.cfg.items():
            self.keys(name)
            self.identity(cfg)
            self.drives(cfg)
            self.pool(cfg)
            self.datasets(cfg)
            self.database(cfg)
        self.fleet_drives()
        self.clusters()
        return self.problems

    # --- per host ----------------------------------------------------------------------------

    def keys(self, name):
        for key in self.data[name]:
            if key.startswith(OUR_PREFIXES) and key not in KNOWN_KEYS:
                close = [k for k in KNOWN_KEYS if k.startswith(key[:5])]
                hint = f"did you mean one of {sorted(close)}?" if close else "remove it"
                self.add(name, key, self.data[name][key], "unknown key", hint)

    def identity(self, c: HostConfig):
        if c.engine not in ENGINES:
            self.add(c.name, "engine", c.engine, "unknown engine", f"use one of {list(ENGINES)}")
        if c.role not in ROLES:
            self.add(c.name, "role", c.role, "unknown role", f"use one of {list(ROLES)}")
        if c.workload not in WORKLOADS:
            self.add(c.name, "workload", c.workload, "unknown workload",
                     f"use one of {list(WORKLOADS)}")
        if c.engine == "mariadb" and not (_is_int(c.server_id) and 1 <= c.server_id < 2**32):
            self.add(c.name, "server_id", c.server_id, "MariaDB needs a unique server_id",
                     "set an integer 1..4294967295, unique within the replication group")
        if c.replication_address is not None:
            try:
                ipaddress.ip_address(c.replication_address)
            except ValueError:
                self.add(c.name, "replication_address", c.replication_address,
                         "not an IP address", "set the host's address on the replication network")
        hw = c.hardware
        if hw is not None and not (isinstance(hw, Mapping) and _is_int(hw.get("ram_bytes"))
                                   and _is_int(hw.get("cpus")) and hw["ram_bytes"] >= 2 * 1024**3
                                   and hw["cpus"] >= 1):
            self.add(c.name, "hardware", hw, "needs ram_bytes (>= 2 GiB) and cpus (>= 1) as integers",
                     'e.g. {"ram_bytes": 4 * 1024**3, "cpus": 2}')
        if c.max_connections is not None and not (_is_int(c.max_connections)
                                                  and 1 <= c.max_connections <= 100000):
            self.add(c.name, "max_connections", c.max_connections, "out of range",
                     "an integer 1..100000, or None for the sized default")
        for net in c.client_networks:
            try:
                network = ipaddress.ip_network(net)
            except ValueError:
                self.add(c.name, "db_client_networks", net, "not a network",
                         'use CIDR notation, e.g. "10.1.0.0/16"')
                continue
            if c.engine == "mariadb" and network.version == 6 and network.num_addresses > 1:
                self.add(c.name, "db_client_networks", net,
                         "MariaDB accounts cannot match an IPv6 network (netmasks are IPv4 only)",
                         "list IPv4 networks, or single IPv6 addresses (/128)")

    def drives(self, c: HostConfig):
        if c.drives and c.drive_pattern:
            self.add(c.name, "drives", c.drives, "both drives and drive_pattern are set",
                     "keep one of them")
        if not c.drives and not c.drive_pattern:
            self.add(c.name, "drives", c.drives, "no drives declared",
                     "list /dev/disk/by-id paths in drives, or set drive_pattern and drive_count")
            return
        if c.drives:
            for d in c.drives:
                if not str(d).startswith(BY_ID) or "/" in str(d)[len(BY_ID):]:
                    self.add(c.name, "drives", d, "not a /dev/disk/by-id path",
                             "name every drive by its stable id (ls -l /dev/disk/by-id)")
                elif re.search(r"-part\d+$", str(d)):
                    self.add(c.name, "drives", d, "is a partition",
                             "give ZFS the whole drive, without -partN")
            dupes = sorted({d for d in c.drives if c.drives.count(d) > 1})
            for d in dupes:
                self.add(c.name, "drives", d, "listed more than once", "list each drive once")
        else:
            if "/" in str(c.drive_pattern):
                self.add(c.name, "drive_pattern", c.drive_pattern,
                         "must be a glob of names under /dev/disk/by-id, without a path",
                         'e.g. "nvme-INTEL_SSDPE2KE064T8_*"')
            if not (_is_int(c.drive_count) and c.drive_count >= 2):
                self.add(c.name, "drive_count", c.drive_count,
                         "drive_pattern needs the number of drives it must match",
                         "set drive_count, e.g. 24")
        for d in c.wipe_drives:
            in_list = d in c.drives if c.drives else (
                str(d).startswith(BY_ID) and fnmatch.fnmatch(str(d)[len(BY_ID):], c.drive_pattern))
            if not in_list:
                self.add(c.name, "wipe_drives", d, "is not one of this host's pool drives",
                         "only drives of this host's pool can be opted in to wiping")

    def pool(self, c: HostConfig):
        p = c.pool
        if not re.match(r"^[A-Za-z][A-Za-z0-9_.:-]*$", str(p.name)) or p.name in (
                "mirror", "raidz", "spare", "log", "cache", "draid", "special"):
            self.add(c.name, "zpool_name", p.name, "not a valid pool name",
                     "start with a letter; letters, digits, _ . : - only; not a vdev keyword")
        if not (_is_int(p.mirror_width) and 2 <= p.mirror_width <= 4):
            self.add(c.name, "zpool_mirror_width", p.mirror_width, "must be 2, 3 or 4",
                     "use 2 for two-way mirrors")
            return
        if not (_is_int(p.spares) and p.spares >= 0):
            self.add(c.name, "zpool_spares", p.spares, "must be a count >= 0", "e.g. 0 or 2")
            return
        if not (_is_int(p.ashift) and 9 <= p.ashift <= 16):
            self.add(c.name, "zpool_ashift", p.ashift, "out of range 9..16",
                     "12 for 4 KiB sectors, 13 for 8 KiB flash pages")
        for key, value in (("zpool_autoreplace", p.autoreplace), ("zpool_autotrim", p.autotrim)):
            if value not in ON_OFF:
                self.add(c.name, key, value, "must be on or off", 'use "on" or "off"')
        count = c.expected_drive_count
        if count:
            in_mirrors = count - p.spares
            if in_mirrors < p.mirror_width:
                self.add(c.name, "zpool_spares", p.spares,
                         f"leaves {in_mirrors} of {count} drives for {p.mirror_width}-way mirrors",
                         "use fewer spares or more drives")
            elif in_mirrors % p.mirror_width:
                key = "drives" if c.drives else "drive_count"
                self.add(c.name, key, count,
                         f"{count} drives minus {p.spares} spare(s) leaves {in_mirrors}, not a "
                         f"multiple of the mirror width {p.mirror_width}",
                         "change the drive count, zpool_spares or zpool_mirror_width")
        t = c.capacity_threshold
        if not (_is_int(t) and 10 <= t <= 90):
            self.add(c.name, "zfs_capacity_threshold", t, "out of range 10..90 (percent)",
                     "80 keeps ZFS's allocator and the flash fast [Heap]")

    def datasets(self, c: HostConfig):
        if c.engine not in ENGINES:
            return
        declared = self.data[c.name].get("zfs_datasets") or {}
        if not isinstance(declared.get(c.engine), Mapping) or len(declared[c.engine]) < 3:
            self.add(c.name, "zfs_datasets", declared.get(c.engine) if isinstance(declared, Mapping) else declared,
                     f"needs a parent and two child datasets for {c.engine}",
                     "keep the default from group_data/all.py")
            return
        overrides = self.data[c.name].get("zfs_dataset_properties") or {}
        for ds in overrides:
            if ds not in declared[c.engine]:
                self.add(c.name, "zfs_dataset_properties", ds, f"no such dataset for {c.engine}",
                         f"use one of {list(declared[c.engine])}")
        if not COMPRESSION_RE.match(str(c.compression)):
            self.add(c.name, "zfs_compression", c.compression, "unknown compression",
                     "lz4, zstd, zstd-1..19, zstd-fast-N, gzip-1..9, zle or off")
        parent = next(iter(c.datasets))
        for ds, props in c.datasets.items():
            key = f"zfs_datasets[{c.engine!r}][{ds!r}]"
            if ds != parent and not ds.startswith(parent + "/"):
                self.add(c.name, key, ds, f"is not under the parent dataset {parent}",
                         f"name it {parent}/...")
            for prop, value in props.items():
                self.dataset_property(c, key, prop, value)
            mp = props.get("mountpoint")
            if not (isinstance(mp, str) and mp.startswith("/")):
                self.add(c.name, f"{key}['mountpoint']", mp, "needs an absolute mountpoint",
                         "e.g. /datastore/mysql")

    def dataset_property(self, c, key, prop, value):
        where = f"{key}[{prop!r}]"
        if prop not in DATASET_PROPERTIES:
            self.add(c.name, where, value, "unknown or unsupported ZFS property",
                     f"use one of {sorted(DATASET_PROPERTIES)}")
        elif prop == "recordsize":
            try:
                size = parse_size(value)
            except ValueError:
                size = 0
            if not (512 <= size <= 16 * 1024**2 and size & (size - 1) == 0):
                self.add(c.name, where, value, "recordsize must be a power of two in 512..16M",
                         '16k for InnoDB data, 32k-128k for PostgreSQL')
        elif prop == "compression" and not COMPRESSION_RE.match(str(value)):
            self.add(c.name, where, value, "unknown compression", "lz4 or zstd[-N]")
        elif prop in CHOICES and str(value) not in CHOICES[prop]:
            self.add(c.name, where, value, f"invalid value for {prop}",
                     f"use one of {list(CHOICES[prop])}")

    def database(self, c: HostConfig):
        if c.engine == "postgresql" and c.datasets:
            fpw = str(c.db_settings.get("full_page_writes", "")).lower()
            if fpw in ("off", "false", "0") and c.recordsize(c.data_dataset) < 8192:
                self.add(c.name, "db_settings['full_page_writes']", "off",
                         f"unsafe with recordsize {c.recordsize(c.data_dataset)} < 8k on "
                         f"{c.data_dataset}: a page could be torn across records",
                         "set the data dataset's recordsize to >= 8k or drop the override")
        for i, db in enumerate(c.databases):
            if not (isinstance(db, Mapping) and NAME_RE.match(str(db.get("name", "")))):
                self.add(c.name, f"databases[{i}]", db, "needs a valid name",
                         'e.g. {"name": "app"}')
        declared = {db.get("name") for db in c.databases if isinstance(db, Mapping)}
        for i, user in enumerate(c.db_users):
            if not (isinstance(user, Mapping) and NAME_RE.match(str(user.get("name", "")))):
                self.add(c.name, f"db_users[{i}]", user, "needs a valid name",
                         'e.g. {"name": "app", "password_secret": "app_password"}')
                continue
            allowed = USER_KEYS[c.engine] if c.engine in USER_KEYS else set(user)
            for key in sorted(set(user) - allowed):
                self.add(c.name, f"db_users[{i}].{key}", user[key],
                         f"not a {c.engine} user setting (would be ignored)",
                         f"use only {', '.join(sorted(allowed))}")
            target = user.get("database") or (user["name"] if c.engine == "postgresql" else None)
            if target and target not in declared:
                self.add(c.name, f"db_users[{i}].database", target,
                         f"user {user['name']} connects to database {target!r}, which is not in "
                         "databases", f'declare it: databases = [{{"name": "{target}"}}]')
            secret = user.get("password_secret")
            if not secret:
                self.add(c.name, f"db_users[{i}].password_secret", secret,
                         f"user {user['name']} has no password_secret",
                         "name the secret holding its password")
            elif c.role == "primary" and secret not in self.secrets:
                self.add(c.name, f"db_users[{i}].password_secret", secret,
                         f"secret {secret!r} for user {user['name']} is missing "
                         f"(looked in: {self.secrets.source})",
                         f"export {secrets_mod.env_name(secret)} or add it to the secrets file")

    # --- across hosts ------------------------------------------------------------------------

    def fleet_drives(self):
        owners = defaultdict(list)
        for name, c in self.cfg.items():
            for d in set(c.drives):
                owners[d].append(name)
        for drive, names in sorted(owners.items()):
            if len(names) > 1:
                for name in sorted(names)[1:]:
                    self.add(name, "drives", drive,
                             f"also listed for {sorted(names)[0]}: a drive belongs to one host",
                             "check the by-id names copied between hosts")

    def clusters(self):
        members = defaultdict(list)
        for c in self.cfg.values():
            members[c.cluster].append(c)
        for cluster, hosts in members.items():
            primaries = [c for c in hosts if c.role == "primary"]
            if len(primaries) > 1:
                for c in primaries[1:]:
                    self.add(c.name, "role", c.role,
                             f"second primary in replication group {cluster!r} "
                             f"(also {primaries[0].name})",
                             "make it a replica, or give it its own cluster name")
            replicas = [c for c in hosts if c.role == "replica"]
            if replicas:
                for c in hosts:
                    if not c.replication_address:
                        self.add(c.name, "replication_address", None,
                                 f"replication group {cluster!r} has replicas but this host has "
                                 "no replication address", "set its address on the private network")
                if secrets_mod.REPLICATION_PASSWORD not in self.secrets:
                    self.add(hosts[0].name, "secrets.replication_password", None,
                             f"replication group {cluster!r} needs a replication password "
                             f"(looked in: {self.secrets.source})",
                             f"export {secrets_mod.env_name(secrets_mod.REPLICATION_PASSWORD)} or "
                             f"add replication_password to {secrets_mod.DEFAULT_FILE}")
            ids = defaultdict(list)
            for c in hosts:
                if c.engine == "mariadb" and c.server_id is not None:
                    ids[c.server_id].append(c.name)
            for sid, names in ids.items():
                for name in names[1:]:
                    self.add(name, "server_id", sid, f"also used by {names[0]} in {cluster!r}",
                             "give every host of a replication group its own server_id")
        for c in self.cfg.values():
            if c.role != "replica":
                if c.primary is not None:
                    self.add(c.name, "primary", c.primary, "set on a host whose role is not replica",
                             "remove it, or make the host a replica")
                continue
            p = self.cfg.get(c.primary)
            if c.primary is None:
                self.add(c.name, "primary", None, "a replica must name the primary it follows",
                         "set primary to the primary's inventory name")
            elif c.primary == c.name:
                self.add(c.name, "primary", c.primary, "a replica cannot follow itself",
                         "name the group's primary")
            elif p is None:
                self.add(c.name, "primary", c.primary, "no such host in the inventory",
                         f"use one of {sorted(self.cfg)}")
            elif p.role != "primary":
                self.add(c.name, "primary", c.primary, f"{p.name} is a {p.role}, not a primary",
                         "replicas follow the group's primary (cascading is not supported)")
            elif p.engine != c.engine:
                self.add(c.name, "primary", c.primary,
                         f"{p.name} runs {p.engine}, this host runs {c.engine}",
                         "a replica follows a primary of the same engine")
            elif p.cluster != c.cluster:
                self.add(c.name, "primary", c.primary,
                         f"{p.name} is in replication group {p.cluster!r}, this host in {c.cluster!r}",
                         "put both in the same cluster")


def validate(hosts: Mapping[str, Mapping], secrets: secrets_mod.Secrets | None = None) -> list[Problem]:
    """All problems in the hosts' data (name -> host data mapping)."""
    secrets = secrets if secrets is not None else secrets_mod.load()
    return _Checker(hosts, secrets).run()


def check(hosts: Mapping[str, Mapping], secrets: secrets_mod.Secrets | None = None) -> None:
    problems = validate(hosts, secrets)
    if problems:
        raise ValidationError(problems)


def load_inventory(path: str) -> dict[str, dict]:
    """Host name -> merged host data, loaded exactly as `pyinfra INVENTORY ...` loads it."""
    from pyinfra.api import State
    from pyinfra.context import ctx_state
    from pyinfra_cli.inventory import make_inventory

    with ctx_state.use(State()):
        inventory = make_inventory(path, cwd=str(REPO_ROOT))
    return {host.name: host.data.dict() for host in inventory}


def load_inventory_isolated(path: str) -> dict[str, dict]:
    """load_inventory in a child process: importing pyinfra_cli monkey-patches the whole
    interpreter for gevent, which breaks a process that already runs threads (testinfra)."""
    import json
    import subprocess

    result = subprocess.run([sys.executable, "-m", "roles.validation", "--dump-data", path],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"cannot load inventory {path}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--dump-data":
        import json

        json.dump(load_inventory(argv[1]), sys.stdout, default=str)
        return 0
    if len(argv) != 1:
        print("usage: python -m roles.validation INVENTORY", file=sys.stderr)
        return 2
    try:
        hosts = load_inventory(argv[0])
        secrets = secrets_mod.load()
    except (OSError, secrets_mod.SecretsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    problems = validate(hosts, secrets)
    if problems:
        print(format_problems(problems), file=sys.stderr)
        return 1
    print(f"{argv[0]}: {len(hosts)} host(s) OK ({', '.join(sorted(hosts))}); secrets from "
          f"{secrets.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
