"""Which packages put ZFS on a Debian host, from the host's facts (pure: unit-tested).

Debian ships ZFS as source, zfs-dkms in contrib: trixie's own on Debian 13, bookworm-backports'
on Debian 12 (model/releases.py). DKMS compiles the module
for every kernel whose headers are installed. So the headers must be
  - the running kernel's own (linux-headers-$(uname -r)): the module is built for it and loads
    now, without a reboot;
  - for each installed kernel metapackage (linux-image-amd64, linux-image-cloud-amd64, ...) the
    headers metapackage at the same version: when apt brings a new kernel it brings its headers,
    and DKMS builds the module for it before the next boot.
Headers come from the release the kernel came from, never with `-t bookworm-backports` on Debian 12:
with that, linux-headers-amd64 resolves to the backports kernel series (6.12), which matches no
installed kernel, and the running kernel gets no module.

Or prebuilt (zfs_install: "prebuilt"): the module built once per kernel and served with the
matching ZFS userland from the operator's signed apt repository (`./dbzfs zfs-repo`): the host
installs zfs-modules-$(uname -r), zfsutils-linux and zfs-zed at the module's version, and no
compiler, headers or backports. A kernel the repository has no module for is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from model import keys, releases
from model.checking import Context
from model.hostdata import HostConfig

ZFS_PACKAGES = ["zfs-dkms", "zfsutils-linux", "zfs-zed"]
ZFS_TOOLS = ["zfsutils-linux", "zfs-zed"]  # with the prebuilt module: same version as the module
INSTALLS = keys.choices("zfs_install")  # "dkms", "prebuilt"
MODULE_REPOSITORY_KEYRING = "/etc/apt/keyrings/dbzfs-zfs-modules.asc"
MODULE_REPOSITORY_COMPONENT = "main"
# linux-image-<flavour>: a metapackage (no version in the name), not a -dbg one
_METAPACKAGE = re.compile(r"linux-image-([a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)*)")


class InstallError(ValueError):
    pass


def release(distribution: dict | None, declared: str) -> releases.Release:
    """The host's release from a pyinfra LinuxDistribution fact, when it is the one its data
    declares (debian_release); InstallError naming both otherwise."""
    found = releases.of_distribution(distribution)
    wanted = releases.get(declared)
    if found is None:
        raise InstallError(
            f"the host runs {releases.described(distribution)}; the toolkit converges "
            + " and ".join(r.label for r in releases.RELEASES.values())
            + " only"
        )
    if found is not wanted:
        raise InstallError(
            f"the host runs {found.label}, its data says debian_release {declared!r} ({wanted.label}): "
            f'set debian_release: "{found.major}" for it (or upgrade it first: docs/releases.md)'
        )
    return found


@dataclass(frozen=True)
class Source:
    """The apt source ZFS comes from on a release (zfs-dkms is in contrib: its license keeps it
    out of main)."""

    name: str  # for the operation
    line: str  # the .list line
    filename: str  # under /etc/apt/sources.list.d/, without .list
    install_args: str  # for apt-get install: backports are only taken when asked for

    @property
    def path(self) -> str:
        return f"/etc/apt/sources.list.d/{self.filename}.list"


def zfs_source(rel: releases.Release, mirror: str = "http://deb.debian.org/debian") -> Source:
    if rel.zfs_suite.endswith("-backports"):
        return Source(
            name=f"Debian {rel.zfs_suite} (contrib) for ZFS 2.3",
            line=f"deb {mirror} {rel.zfs_source}",
            filename="dbzfs-backports",
            install_args=f"-t {rel.zfs_suite}",
        )
    return Source(
        name=f"Debian {rel.zfs_suite} contrib for ZFS",
        line=f"deb {mirror} {rel.zfs_source}",
        filename="dbzfs-zfs-contrib",
        install_args="",
    )


def other_sources(rel: releases.Release) -> list[Source]:
    """The ZFS sources of the other releases (a host upgraded from one keeps its file)."""
    mine = zfs_source(rel).filename
    return [zfs_source(r) for r in releases.RELEASES.values() if zfs_source(r).filename != mine]


def header_packages(release: str, installed: dict[str, set[str]]) -> list[str]:
    """Header packages for `release` (`uname -r`) and the installed kernel metapackages, pinned to
    the metapackage's version. InstallError when the running kernel is not a Debian package (no
    headers can be installed for it)."""
    release = release.strip()
    if not any(p in installed for p in (f"linux-image-{release}", f"linux-image-{release}-unsigned")):
        raise InstallError(
            f"the running kernel {release} is not an installed Debian package (no linux-image-{release}): "
            "ZFS's DKMS module needs that kernel's headers from Debian. Boot a Debian kernel first"
        )
    wanted = [f"linux-headers-{release}"]
    for name in sorted(installed):
        m = _METAPACKAGE.fullmatch(name)
        if not m or name.endswith("-dbg"):
            continue
        versions = sorted(installed[name])
        wanted.append(
            f"linux-headers-{m.group(1)}={versions[-1]}" if versions else f"linux-headers-{m.group(1)}"
        )
    return wanted


def missing(packages: list[str], installed: dict[str, set[str]]) -> list[str]:
    """The packages (name or name=version) not installed at that version."""
    out = []
    for p in packages:
        name, _, version = p.partition("=")
        if name not in installed or (version and version not in installed[name]):
            out.append(p)
    return out


def module_package(release: str) -> str:
    """The prebuilt module package for a kernel (`uname -r`)."""
    return f"zfs-modules-{release.strip()}"


def repository_source(url: str, suite: str) -> str:
    return f"deb [signed-by={MODULE_REPOSITORY_KEYRING}] {url} {suite} {MODULE_REPOSITORY_COMPONENT}"


def prebuilt_packages(
    release: str,
    url: str,
    available: dict[str, list[str]] | None,
    installed: dict[str, set[str]],
    error: str = "",
) -> list[str]:
    """zfs-modules-<release>, zfsutils-linux and zfs-zed pinned to one version: the installed
    module's, else the repository's (`available`: its index, package -> versions; None when it was
    not read because the module is installed). InstallError, naming the kernel and the
    repository, when the repository cannot be read or has no module for this kernel."""
    release = release.strip()
    if not any(p in installed for p in (f"linux-image-{release}", f"linux-image-{release}-unsigned")):
        raise InstallError(
            f"the running kernel {release} is not an installed Debian package (no linux-image-{release}): "
            "a prebuilt ZFS module is built for a Debian kernel. Boot a Debian kernel first"
        )
    name = module_package(release)
    if installed.get(name):
        version = sorted(installed[name])[-1]
    else:
        if available is None or error:
            raise InstallError(
                f"the ZFS module repository {url} could not be read ({error or 'no answer'}), so the "
                f"module package for the running kernel {release} cannot be checked"
            )
        versions = available.get(name) or []
        if not versions:
            others = sorted(p for p in available if p.startswith("zfs-modules-"))
            raise InstallError(
                f"the ZFS module repository {url} has no {name} for the running kernel {release} "
                f"(it has {', '.join(others) or 'no module package'}). Build one for this kernel "
                f"(./dbzfs zfs-repo --kernel {release}) or install with zfs_install: dkms"
            )
        if len(set(versions)) > 1:
            raise InstallError(
                f"the ZFS module repository {url} has {name} at several versions "
                f"({', '.join(sorted(set(versions)))}): publish one version per kernel"
            )
        version = versions[0]
        lacking = [p for p in ZFS_TOOLS if version not in (available.get(p) or [])]
        if lacking:
            raise InstallError(
                f"the ZFS module repository {url} has {name} {version} but not {', '.join(lacking)} at that "
                "version: module and tools must match (republish with ./dbzfs zfs-repo)"
            )
    return [f"{name}={version}"] + [f"{p}={version}" for p in ZFS_TOOLS]


# --- the rules of zfs_install and zfs_module_repository (validation/checks.py runs them) ------


def check(ctx: Context, c: HostConfig) -> None:
    if not ctx.ok(c, "zfs_install", "zfs_module_repository"):
        return
    if not ctx.choice(c, "zfs_install", c.zfs_install):
        return
    repo = c.module_repository
    if c.zfs_install == "dkms":
        if repo is not None:
            ctx.add(
                c.name,
                "zfs_module_repository",
                repo,
                'set, but zfs_install is "dkms": nothing would use it',
                'set zfs_install = "prebuilt", or remove zfs_module_repository',
            )
        return
    example = keys.KEYS["zfs_module_repository"].example
    if repo is None:
        ctx.add(
            c.name,
            "zfs_module_repository",
            None,
            'missing: zfs_install "prebuilt" installs the module from it',
            f"e.g. {example} (./dbzfs zfs-repo builds one)",
        )
        return
    for field in sorted(set(repo) - {"url", "suite", "key_file"}, key=str):
        ctx.add(
            c.name,
            f"zfs_module_repository[{field!r}]",
            repo[field],
            "unknown field",
            "use url, suite, key_file",
        )
    url, suite, key_file = repo.get("url"), repo.get("suite"), repo.get("key_file")
    where = "zfs_module_repository"
    if not (isinstance(url, str) and re.fullmatch(r"https?://[^\s/]+(/\S*)?", url)):
        ctx.add(
            c.name,
            f"{where}['url']",
            url,
            "not an http(s) URL",
            'e.g. "http://apt.example.net/zfs-modules/"',
        )
    if not (isinstance(suite, str) and re.fullmatch(r"[a-z][a-z0-9-]*", suite)):
        ctx.add(c.name, f"{where}['suite']", suite, "not a Debian suite name", '"bookworm"')
    if not isinstance(key_file, str) or not key_file:
        ctx.add(c.name, f"{where}['key_file']", key_file, "missing: the repository's public key", example)
        return
    path = Path(key_file).expanduser()
    try:
        head = path.read_text(errors="replace")[:200]
    except OSError as e:
        ctx.add(
            c.name,
            f"{where}['key_file']",
            key_file,
            f"cannot be read on this machine ({e.strerror})",
            "the armored public key ./dbzfs zfs-repo wrote (dbzfs-zfs-modules.asc)",
        )
        return
    if "-----BEGIN PGP PUBLIC KEY BLOCK-----" not in head:
        ctx.add(
            c.name,
            f"{where}['key_file']",
            key_file,
            "not an armored OpenPGP public key",
            "export it with gpg --armor --export KEY (a private key never goes to the hosts)",
        )
