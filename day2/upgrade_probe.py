"""What a host's release upgrade would do, asked of the host before anything changes (issue 47's
refusals), and the verdict. Pure: the probe's shell text, its output parsed, the problems.

The probe is apt itself, pointed at the moved sources (day2/upgrade_sources.py) in a temporary
directory: `apt-get update` into private lists, then `apt-get --assume-no full-upgrade` reads the
host's real dpkg status against the new release and prints what it would install, remove and
download, and `apt-cache` names the kernel the release's metapackage brings and, with the prebuilt
module repository, whether it has that kernel's module. Nothing outside the temporary directory
is written: the host's sources, lists and packages are as they were.

Refused (all at once, before any host of the group is touched):
 - the pool is not ONLINE, or is over its capacity threshold, or would be after the copy of the
   system the rollback needs (the root filesystem's used bytes, copied into the pool);
 - the root filesystem has no room for the new packages (apt's download plus what the upgrade
   adds, and a margin);
 - apt cannot read the new release's sources, or the upgrade would remove the engine's server
   (PostgreSQL's old server must stay for pg_upgradecluster);
 - no Debian kernel metapackage brings the new release's kernel (the ZFS module is built or
   installed for it before the reboot), or zfs_install = "prebuilt" and the module repository has
   no module for that kernel.
A host already on the new release is reported done (no change), not refused.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from model import releases
from model.hostdata import HostConfig
from model.problems import Problem

MARGIN = 1 << 30  # a GiB kept free on the root filesystem and the pool beyond what the upgrade uses
# the APT options that keep apt inside the probe's directory ($d)
APT_OPTIONS = (
    "-o Dir::Etc::SourceList=$d/sources.list -o Dir::Etc::SourceParts=$d/sources.list.d "
    "-o Dir::State::Lists=$d/lists -o Dir::Cache::Archives=$d/archives "
    "-o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Get::List-Cleanup=false"
)
_UNITS = {"B": 1, "kB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}


def _heredoc(path: str, text: str) -> str:
    marker = "DBZFS_SOURCE_EOF"
    while marker in text:
        marker += "_"
    return f"cat > {path} <<'{marker}'\n{text}{'' if text.endswith(chr(10)) else chr(10)}{marker}\n"


def script(moved: Mapping[str, str], pool: str | None, module_package: str | None) -> str:
    """The probe: `moved` maps each apt source file's name (sources.list, or its name under
    sources.list.d) to its moved text; `module_package`: the prebuilt module's package prefix
    ("zfs-modules-"), None with DKMS. Prints key=value lines, ends with end=1."""
    files = "".join(
        _heredoc("$d/sources.list" if name == "sources.list" else f"$d/sources.list.d/{name}", text)
        for name, text in moved.items()
    )
    module = ""
    if module_package:
        module = (
            f'if [ -n "$k" ]; then echo "module=$(apt-cache {APT_OPTIONS} policy '
            f'{shlex.quote(module_package)}"$k" | sed -n "s/^ *Candidate: //p")"; fi\n'
        )
    zpool = f"zpool list -Hp -o name,size,alloc,free,cap,health {shlex.quote(pool)} | sed 's/^/pool=/'\n"
    return (
        "set -u\n"
        "d=$(mktemp -d /var/tmp/dbzfs-upgrade-probe.XXXXXX)\n"
        "trap 'rm -rf \"$d\"' EXIT\n"
        "mkdir -p $d/sources.list.d $d/lists/partial $d/archives/partial\n"
        "chown -R _apt $d/lists $d/archives 2>/dev/null || true\n"
        ": > $d/sources.list\n"
        f"{files}"
        '. /etc/os-release; echo "os=$VERSION_ID"\n'
        'echo "kernel=$(uname -r)"\n'
        "df -B1 --output=avail,used / | tail -n1 | sed 's/^ */root=/'\n"
        + (zpool if pool else "")
        + f'apt-get {APT_OPTIONS} -qq update >$d/update.log 2>&1; echo "update=$?"\n'
        "sed 's/^/update_log=/' $d/update.log | tail -n5\n"
        f"LC_ALL=C DEBIAN_FRONTEND=noninteractive apt-get {APT_OPTIONS} --assume-no full-upgrade 2>&1 "
        "| sed -n -e 's/^Need to get /need=/p' -e 's/^After this operation, /after=/p' "
        "-e 's/^\\([0-9]*\\) upgraded, \\([0-9]*\\) newly installed, \\([0-9]*\\) to remove.*/"
        "counts=\\1 \\2 \\3/p'\n"
        f"LC_ALL=C apt-get {APT_OPTIONS} -s full-upgrade 2>/dev/null "
        "| sed -n 's/^Remv \\([^ ]*\\).*/remove=\\1/p'\n"
        "m=$(dpkg-query -W -f '${Package}\\n' 'linux-image-*' 2>/dev/null "
        "| grep -E '^linux-image-[a-z][a-z0-9-]*$' | grep -v -- '-dbg$' | head -n1)\n"
        'k=""\n'
        f'if [ -n "$m" ]; then k=$(apt-cache {APT_OPTIONS} depends "$m" 2>/dev/null '
        "| sed -n 's/^ *Depends: linux-image-\\([0-9][^ ]*\\)$/\\1/p' | head -n1); fi\n"
        'echo "new_kernel=$k"\n'
        f"{module}"
        "echo end=1\n"
    )


@dataclass
class Probe:
    os: str = ""
    kernel: str = ""
    root_avail: int = 0
    root_used: int = 0
    pool: dict[str, object] | None = None  # name, size, alloc, free, cap, health
    update_rc: int | None = None
    update_log: list[str] = field(default_factory=list)
    need: int | None = None  # bytes to download
    after: int | None = None  # bytes the upgrade adds (negative: frees)
    counts: tuple[int, int, int] | None = None  # upgraded, newly installed, to remove
    removed: list[str] = field(default_factory=list)
    new_kernel: str = ""
    module: str | None = None  # the candidate of the module's package; None: not asked
    complete: bool = False


def size(text: str) -> int:
    """apt's "161 MB" (or "1,024 kB") as bytes."""
    number, _, unit = text.strip().partition(" ")
    return round(float(number.replace(",", "")) * _UNITS[unit.strip()])


def parse(output: list[str]) -> Probe:
    p = Probe()
    for line in output:
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "os":
            p.os = value
        elif key == "kernel":
            p.kernel = value
        elif key == "root":
            avail, used = value.split()
            p.root_avail, p.root_used = int(avail), int(used)
        elif key == "pool":
            name, total, alloc, free, cap, health = value.split("\t")
            p.pool = {
                "name": name,
                "size": int(total),
                "alloc": int(alloc),
                "free": int(free),
                "cap": int(cap),
                "health": health,
            }
        elif key == "update":
            p.update_rc = int(value)
        elif key == "update_log":
            p.update_log.append(value)
        elif key == "need":
            p.need = size(re.split(r"/| of", value)[0])
        elif key == "after":
            amount = size(" ".join(value.split()[:2]))
            p.after = -amount if "freed" in value else amount
        elif key == "counts":
            up, new, remove = (int(x) for x in value.split())
            p.counts = (up, new, remove)
        elif key == "remove":
            p.removed.append(value)
        elif key == "new_kernel":
            p.new_kernel = value
        elif key == "module":
            p.module = value
        elif key == "end":
            p.complete = True
    return p


def server_packages(cfg: HostConfig) -> list[str]:
    """The packages that must survive the upgrade: the PostgreSQL server the host's cluster runs
    (the data its release step runs with says 15: it runs on until pg_upgradecluster). MariaDB's
    server is upgraded in place (Debian's transitions)."""
    if cfg.engine == "postgresql":
        return [f"postgresql-{cfg.server_version}"]
    return []


def problems(cfg: HostConfig, new: releases.Release, p: Probe) -> list[Problem]:
    """Why the host's release upgrade must not start (see the module's docstring); [] to go."""
    name = cfg.name
    if not p.complete:
        return [
            Problem(name, "upgrade", None, "the probe did not finish", "check the host answers SSH as root")
        ]
    if p.os == new.major:
        return []
    found: list[Problem] = []
    if p.os != (releases.previous(new) or new).major:
        found.append(
            Problem(
                name,
                "debian_release",
                p.os,
                f"the host runs Debian {p.os}",
                f"upgrade it to {new.label} by hand",
            )
        )
        return found
    if p.update_rc != 0:
        found.append(
            Problem(
                name,
                "apt sources",
                p.update_rc,
                f"apt cannot read {new.label}'s sources: {' | '.join(p.update_log) or 'no output'}",
                "check the host reaches its mirrors, and the sources day2/upgrade_sources.py moved",
            )
        )
    if p.pool is not None:
        threshold = cfg.capacity_threshold
        after_copy = (int(p.pool["alloc"]) + p.root_used + MARGIN) * 100 // max(int(p.pool["size"]), 1)
        if p.pool["health"] != "ONLINE":
            found.append(
                Problem(
                    name, "pool", p.pool["health"], "the pool is not ONLINE", "repair it first (zpool status)"
                )
            )
        elif int(p.pool["cap"]) >= threshold or after_copy >= threshold:
            found.append(
                Problem(
                    name,
                    "zfs_capacity_threshold",
                    threshold,
                    f"the pool is {p.pool['cap']}% full, {after_copy}% with the system's copy for the "
                    f"rollback ({gib(p.root_used)} GiB) and a GiB spare",
                    "free space in the pool first (old snapshots: zfs list -t snapshot -o name,used -s used)",
                )
            )
    if p.need is not None and p.after is not None:
        wanted = p.need + max(p.after, 0) + MARGIN
        if p.root_avail < wanted:
            found.append(
                Problem(
                    name,
                    "root filesystem",
                    gib(p.root_avail),
                    f"{gib(p.root_avail)} GiB free on /, the upgrade needs {gib(wanted)} GiB "
                    f"(downloads {gib(p.need)}, installs {gib(max(p.after, 0))}, and a GiB spare)",
                    "free space on / first (apt-get clean, old kernels)",
                )
            )
    if not p.new_kernel:
        found.append(
            Problem(
                name,
                "kernel",
                p.kernel,
                f"no Debian kernel metapackage (linux-image-amd64 or another flavour) brings {new.label}'s "
                "kernel, for which the ZFS module is built before the reboot",
                "install the release's kernel metapackage (apt-get install linux-image-amd64)",
            )
        )
    lost = [pkg for pkg in server_packages(cfg) if pkg in p.removed]
    if lost:
        found.append(
            Problem(
                name,
                "upgrade",
                ", ".join(lost),
                "the release upgrade would remove the server the cluster runs on",
                "find what conflicts with it (apt-get -s full-upgrade on the host)",
            )
        )
    if cfg.zfs_install == "prebuilt" and p.module is not None and p.module in ("", "(none)"):
        found.append(
            Problem(
                name,
                "zfs_module_repository",
                p.new_kernel or "?",
                f"the module repository has no zfs-modules package for {new.label}'s kernel "
                f"{p.new_kernel or '(not found)'}",
                f"build it (./dbzfs zfs-repo --kernel {p.new_kernel or 'RELEASE'}) and publish it first",
            )
        )
    return found


def gib(n: int) -> float:
    return round(n / (1 << 30), 1)
