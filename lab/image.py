"""The lab's Debian guest images (lab.yaml image.suite: trixie or bookworm), in two variants from one
recipe:
  zfs   debootstrap + the release's kernel and headers (held) + ZFS DKMS from where the release
        takes it (trixie's contrib, bookworm-backports: model/releases.py): the lab's VMs
  bare  debootstrap + the release's kernel (held), main only, no headers, no ZFS: a fresh
        server as the installer leaves it, for proving the storage role's ZFS install

Cached under /var/cache/dbzfs-lab/images/<key>/ where <key> hashes everything that goes into the
image (the variant, the `image` section of lab.yaml, this file, lab/guest/*), so a second `ensure()` is
instant and any recipe change builds a new image. A build happens in a temporary directory that
is renamed into place only when complete: a failed or interrupted build leaves no image behind
(and the next build removes its leftovers).

An image directory holds root.img (raw ext4, read-only base for the VMs' qcow2 overlays),
vmlinuz, initrd.img, manifest.json (kernel and ZFS versions, build time) and build.log; the zfs
image's also holds zfs-debs/: the module package for its kernel and the ZFS userland it installed,
which the lab publishes as its ZFS module repository (zfsrepo) for VMs that install ZFS prebuilt.
Per-VM settings (hostname, private address, root's ssh key) are not in the image: they come on
the kernel command line at boot (lab/guest/dbzfs-lab-boot).
"""

import ast
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from model import releases
from zfsrepo import package

from . import aptcache
from .definition import CACHE, Lab
from .vm import Log

IMAGES = CACHE / "images"
GUEST_FILES = Path(__file__).resolve().parent / "guest"
BUILD_PROXY = "http://127.0.0.1:{port}"
GUEST_PROXY = "http://{address}:{port}"


class ImageBuildError(RuntimeError):
    pass


VARIANTS = ("zfs", "bare")
REPO_DEBS = "zfs-debs"  # in the zfs image's directory


def key(lab: Lab, variant: str = "zfs") -> str:
    """Hash of everything that goes into the image."""
    if variant not in VARIANTS:
        raise ValueError(f"image variant {variant!r}: one of {VARIANTS}")
    h = hashlib.sha256()
    h.update(variant.encode() + b"\0")
    h.update(json.dumps(lab.image, sort_keys=True).encode())
    h.update(
        json.dumps(
            {k: lab.network.get(k) for k in ("apt_cache_port", "apt_cache_guest_address")}, sort_keys=True
        ).encode()
    )
    # The builder's code as Python sees it: comments and formatting do not rebuild the image.
    for code in (Path(__file__), Path(package.__file__)):
        h.update(ast.dump(ast.parse(code.read_text())).encode())
    for f in sorted(GUEST_FILES.iterdir()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def path(lab: Lab, variant: str = "zfs") -> Path:
    return IMAGES / key(lab, variant)


def is_built(lab: Lab, variant: str = "zfs") -> bool:
    return (path(lab, variant) / "manifest.json").exists()


def manifest(lab: Lab, variant: str = "zfs") -> dict:
    return json.loads((path(lab, variant) / "manifest.json").read_text())


@contextmanager
def _lock() -> Iterator[None]:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with open(IMAGES / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def ensure(lab: Lab, variant: str = "zfs", log: Log = print) -> Path:
    """Return the image directory, building it first if needed."""
    target = path(lab, variant)
    if is_built(lab, variant):
        return target
    with _lock():
        if is_built(lab, variant):  # built by someone else while we waited
            return target
        _remove_leftovers()
        tmp = IMAGES / f".build-{target.name}-{os.getpid()}"
        try:
            _build(lab, variant, tmp, log)
            os.rename(tmp, target)
        except BaseException:
            _remove_tree(tmp)
            raise
    return target


def _repository_debs(root: Path, out: Path) -> None:
    """What `./dbzfs zfs-repo` publishes: the module package DKMS's build in this root makes, and
    the ZFS userland packages of the same version the root installed."""
    kernels = [k.name for k in (root / "lib/modules").iterdir()]
    if len(kernels) != 1:
        raise ImageBuildError(f"expected one kernel in the image, found {kernels}")
    version = subprocess.run(
        ["chroot", str(root), "dpkg-query", "-W", "-f", "${Version}", "zfs-dkms"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        package.build_module_deb(root, kernels[0], version, out)
        for deb in package.userland_debs(root / "var/cache/apt/archives", version):
            shutil.copy2(deb, out / deb.name)
    except package.PackageError as e:
        raise ImageBuildError(str(e)) from None


def repository_debs(lab: Lab) -> list[Path]:
    """The zfs image's module package and ZFS userland (built with the image)."""
    return sorted((path(lab, "zfs") / REPO_DEBS).glob("*.deb"))


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root).rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    return [p for p in points if p.startswith(prefix)]


def _unmount_all(root: Path) -> None:
    for p in sorted(_mounts_under(root), key=len, reverse=True):
        subprocess.run(["umount", "-l", p], check=False)
    left = _mounts_under(root)
    if left:
        raise ImageBuildError(f"could not unmount {left}; not deleting {root}")


def _remove_tree(root: Path) -> None:
    if not root.exists():
        return
    _unmount_all(root)  # never rmtree through a bind mount of /dev, /sys or /proc
    shutil.rmtree(root, ignore_errors=True)


def _remove_leftovers() -> None:
    for d in IMAGES.glob(".build-*"):
        _remove_tree(d)


def _build(lab: Lab, variant: str, tmp: Path, log: Log) -> None:
    spec = dict(lab.image)
    bare = variant == "bare"
    if bare:
        spec["components"] = ["main"]
    port = int(lab.network.get("apt_cache_port", 3142))
    guest_proxy = GUEST_PROXY.format(
        address=lab.network.get("apt_cache_guest_address", "10.0.2.100"), port=port
    )
    aptcache.ensure(port, log=log)
    tmp.mkdir(parents=True)
    root = tmp / "rootfs"
    build_log = tmp / "build.log"
    started = time.monotonic()
    env = {
        **os.environ,
        "http_proxy": BUILD_PROXY.format(port=port),
        "DEBIAN_FRONTEND": "noninteractive",
        "LC_ALL": "C.UTF-8",
    }
    env.pop("https_proxy", None)

    def step(what: str) -> None:
        log(f"==> image: {what} ({time.monotonic() - started:.0f} s)")

    def run(*cmd: str, **kw) -> None:
        with open(build_log, "a") as out:
            out.write(f"\n$ {' '.join(cmd)}\n")
            out.flush()
            r = subprocess.run(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, **kw
            )
        if r.returncode != 0:
            tail = build_log.read_text(errors="replace").splitlines()[-25:]
            raise ImageBuildError(
                f"image build failed: {' '.join(cmd)} (rc {r.returncode}); last lines "
                f"of {build_log}:\n" + "\n".join(tail)
            )

    def chroot(*cmd: str) -> None:
        run("chroot", str(root), *cmd)

    def write(rel: str, text: str, mode: int = 0o644) -> None:
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(mode)

    step(f"building Debian {spec['suite']} image {tmp.name[7:23]}, {variant} (log: {build_log})")
    step("debootstrap")
    run(
        "debootstrap",
        "--variant=minbase",
        f"--components={','.join(spec['components'])}",
        f"--include={','.join(spec['base_packages'])}",
        spec["suite"],
        str(root),
        spec["mirror"],
    )
    suite, comps = spec["suite"], " ".join(spec["components"])
    # Where the release's ZFS comes from (model/releases.py): its own suite (trixie), or its
    # backports (bookworm), which the zfs image adds and installs ZFS from by name.
    zfs_suite = releases.get(lab.release).zfs_suite
    write(
        "/etc/apt/sources.list",
        f"deb {spec['mirror']} {suite} {comps}\n"
        f"deb {spec['mirror']} {suite}-updates {comps}\n"
        f"deb {spec['security_mirror']} {suite}-security {comps}\n"
        + ("" if bare or zfs_suite == suite else f"deb {spec['mirror']} {zfs_suite} {comps}\n"),
    )
    write("/etc/apt/apt.conf.d/01proxy", f'Acquire::http::Proxy "{BUILD_PROXY.format(port=port)}";\n')
    write("/usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0o755)
    # A lab VM's disks are throwaway (cache=unsafe): dpkg need not fsync every file it unpacks.
    write("/etc/dpkg/dpkg.cfg.d/dbzfs-lab-unsafe-io", "force-unsafe-io\n")
    for fs, args in (
        ("proc", ["-t", "proc", "proc"]),
        ("sys", ["-t", "sysfs", "sysfs"]),
        ("dev", ["--bind", "/dev"]),
        ("dev/pts", ["--bind", "/dev/pts"]),
    ):
        run("mount", *args, str(root / fs))
    try:
        step("kernel from " + suite)
        chroot("apt-get", "update", "-q")
        # When the lists were refreshed (Debian leaves /var/lib/apt/periodic empty; pyinfra's
        # apt.update(cache_time=...) reads and writes this stamp).
        chroot(
            "sh", "-c", "mkdir -p /var/lib/apt/periodic && touch /var/lib/apt/periodic/update-success-stamp"
        )
        chroot("apt-get", "dist-upgrade", "-y", "-q")
        chroot("apt-get", "install", "-y", "-q", "--no-install-recommends", *spec["kernel_packages"])
        if not bare:
            chroot("apt-get", "install", "-y", "-q", "--no-install-recommends", *spec["header_packages"])
        installed = subprocess.run(
            [
                "chroot",
                str(root),
                "dpkg-query",
                "-W",
                "-f",
                "${db:Status-Abbrev} ${Package}\n",
                "linux-image-*",
                "linux-headers-*",
            ],
            capture_output=True,
            text=True,
            env=env,
        ).stdout.splitlines()
        chroot("apt-mark", "hold", *sorted({line.split()[1] for line in installed if line.startswith("ii")}))
        if not bare:
            step(f"ZFS from {zfs_suite} (DKMS build)")
            chroot(
                "apt-get",
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                *(["-t", zfs_suite] if zfs_suite != suite else []),
                *spec["zfs_packages"],
            )
            step("ZFS module package and userland for the module repository (zfsrepo)")
            _repository_debs(root, tmp / REPO_DEBS)
        chroot("apt-get", "clean")
    finally:
        _unmount_all(root)
    kernels = sorted((root / "lib/modules").iterdir())
    if len(kernels) != 1:
        raise ImageBuildError(f"expected one kernel in the image, found {[k.name for k in kernels]}")
    kver = kernels[0].name
    zfs_ko = list(kernels[0].rglob("zfs.ko*"))
    if bare == bool(zfs_ko):
        raise ImageBuildError(
            f"{'a' if zfs_ko else 'no'} zfs.ko for {kver} in the {variant} image (see {build_log})"
        )
    zfs_version = (
        None
        if bare
        else subprocess.run(
            ["chroot", str(root), "dpkg-query", "-W", "-f", "${Version}", "zfsutils-linux"],
            capture_output=True,
            text=True,
        ).stdout
    )

    step("configuring the guest")
    (root / "usr/sbin/policy-rc.d").unlink()
    write("/etc/apt/apt.conf.d/01proxy", f'Acquire::http::Proxy "{guest_proxy}";\n')
    write("/etc/fstab", "/dev/vda / ext4 defaults,discard 0 1\n")
    write("/etc/hostname", "dbzfs-lab\n")
    write(
        "/etc/network/interfaces",
        "auto lo\niface lo inet loopback\n\n# user-mode NIC (ssh, apt cache); eth1 (private network) is set"
        " by dbzfs-lab-boot\nauto eth0\niface eth0 inet dhcp\n",
    )
    if not bare:
        write("/etc/modules-load.d/zfs.conf", "zfs\n")
    write("/etc/ssh/sshd_config.d/dbzfs-lab.conf", "PermitRootLogin prohibit-password\nUseDNS no\n")
    shutil.copy(GUEST_FILES / "dbzfs-lab-boot", root / "usr/local/sbin/dbzfs-lab-boot")
    shutil.copy(GUEST_FILES / "dbzfs-lab-boot.service", root / "etc/systemd/system/dbzfs-lab-boot.service")
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (wants / "dbzfs-lab-boot.service").symlink_to("/etc/systemd/system/dbzfs-lab-boot.service")
    # No background apt runs that would hold the dpkg lock while a deploy installs packages.
    for unit in (
        "apt-daily.timer",
        "apt-daily-upgrade.timer",
        "apt-daily.service",
        "apt-daily-upgrade.service",
    ):
        (root / "etc/systemd/system" / unit).unlink(missing_ok=True)
        (root / "etc/systemd/system" / unit).symlink_to("/dev/null")
    (root / "etc/machine-id").write_text("")  # each VM makes its own at first boot
    (root / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)

    step("kernel, initrd and root filesystem")
    shutil.copy(root / "boot" / f"vmlinuz-{kver}", tmp / "vmlinuz")
    shutil.copy(root / "boot" / f"initrd.img-{kver}", tmp / "initrd.img")
    run("mkfs.ext4", "-q", "-F", "-L", "dbzfs-root", "-d", str(root), str(tmp / "root.img"), spec["size"])
    os.chmod(tmp / "root.img", 0o444)
    _remove_tree(root)
    seconds = round(time.monotonic() - started)
    (tmp / "manifest.json").write_text(
        json.dumps(
            {
                "key": tmp.name[7:23],
                "variant": variant,
                "suite": suite,
                "kernel": kver,
                "zfs": zfs_version,
                "build_seconds": seconds,
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            indent=2,
        )
        + "\n"
    )
    step(f"image ready ({variant}): kernel {kver}, zfs {zfs_version or 'none'}, built in {seconds} s")
