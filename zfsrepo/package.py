"""The module package: ZFS's kernel modules as DKMS built them in a build root, in a .deb named
for the exact kernel (zfs-modules-<uname -r>), plus the ZFS userland .debs that root installed.

The package provides `zfs-modules` (what zfsutils-linux recommends instead of zfs-dkms),
conflicts with zfs-dkms, depends on the kernel image it was built for and runs depmod for that
kernel. Built with dpkg-deb on the build machine; nothing is compiled on the database hosts.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

# ZFS's userland comes from the same source package as zfs-dkms; the repository carries the
# versions the module was built with (bookworm-backports keeps only its newest).
USERLAND_SOURCE = "zfs-linux"
NOT_SHIPPED = ("zfs-dkms",)


class PackageError(RuntimeError):
    pass


def module_package_name(kernel: str) -> str:
    return f"zfs-modules-{kernel}"


def control(kernel: str, version: str, arch: str, installed_size_kib: int) -> str:
    return (
        f"Package: {module_package_name(kernel)}\n"
        f"Source: {USERLAND_SOURCE}\n"
        f"Version: {version}\n"
        f"Architecture: {arch}\n"
        "Maintainer: dbzfs <root@localhost>\n"
        f"Installed-Size: {installed_size_kib}\n"
        f"Depends: linux-image-{kernel}\n"
        f"Provides: zfs-modules (= {version})\n"
        "Conflicts: zfs-dkms\n"
        "Section: contrib/kernel\n"
        "Priority: optional\n"
        f"Description: OpenZFS kernel modules for Linux {kernel}\n"
        f" The spl and zfs modules of zfs-dkms {version}, built once with DKMS for\n"
        f" Linux {kernel} by dbzfs, so that the hosts need no compiler or headers.\n"
    )


def _maintainer_script(kernel: str) -> str:
    return f"#!/bin/sh\nset -e\nif [ -d /lib/modules/{kernel} ]; then depmod -a {kernel}; fi\n"


def build_module_deb(root: Path, kernel: str, version: str, out: Path, arch: str = "amd64") -> Path:
    """zfs-modules-<kernel>_<version>_<arch>.deb in `out`, from the modules DKMS installed under
    root/lib/modules/<kernel>."""
    built = sorted((root / "lib/modules" / kernel / "updates" / "dkms").glob("*.ko*"))
    names = {p.name.split(".ko")[0] for p in built}
    if not {"spl", "zfs"} <= names:
        raise PackageError(
            f"no spl and zfs modules for {kernel} under {root}/lib/modules/{kernel}/updates/dkms "
            f"(found {sorted(names) or 'none'}): did DKMS build ZFS for that kernel?"
        )
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="zfs-modules-") as tmp:
        staging = Path(tmp) / "pkg"
        dest = staging / "lib/modules" / kernel / "updates" / "zfs"
        dest.mkdir(parents=True)
        for ko in built:
            shutil.copy2(ko, dest / ko.name)
            (dest / ko.name).chmod(0o644)
        size = sum(f.stat().st_size for f in dest.iterdir()) // 1024 + 1
        debian = staging / "DEBIAN"
        debian.mkdir()
        (debian / "control").write_text(control(kernel, version, arch, size))
        for script in ("postinst", "postrm"):
            (debian / script).write_text(_maintainer_script(kernel))
            (debian / script).chmod(0o755)
        target = out / f"{module_package_name(kernel)}_{version.split(':')[-1]}_{arch}.deb"
        r = subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(staging), str(target)],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise PackageError(f"dpkg-deb failed for {target.name}: {r.stderr.strip()}")
    return target


def deb_fields(deb: Path, *fields: str) -> dict[str, str]:
    r = subprocess.run(["dpkg-deb", "-f", str(deb), *fields], capture_output=True, text=True, check=True)
    out = {}
    for line in r.stdout.splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    if len(fields) == 1 and fields[0] not in out:  # dpkg-deb prints a lone field without its name
        out = {fields[0]: r.stdout.strip()} if r.stdout.strip() else {}
    return out


def userland_debs(archives: Path, version: str) -> list[Path]:
    """The .debs of source zfs-linux at `version` in an apt archive directory (the build root's
    /var/cache/apt/archives after installing ZFS), zfs-dkms left out."""
    found = []
    for deb in sorted(archives.glob("*.deb")):
        f = deb_fields(deb, "Package", "Source", "Version")
        source = f.get("Source", f.get("Package", "")).split(" ")[0]
        if source == USERLAND_SOURCE and f.get("Version") == version and f.get("Package") not in NOT_SHIPPED:
            found.append(deb)
    if not any(deb_fields(d, "Package").get("Package") == "zfsutils-linux" for d in found):
        raise PackageError(f"no zfsutils-linux {version} among {archives}'s packages")
    return found
