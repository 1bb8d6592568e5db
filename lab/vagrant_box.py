"""A Vagrant box for libvirt made from the lab's bare image, for machines that cannot reach Vagrant's
box catalogue: the lab and Vagrant then boot the same Debian 12 (kernel held at the image's, so a
prebuilt ZFS module repository of that kernel fits).

    python -m lab vagrant-box [--apt-proxy URL]     # prints the box file and the `vagrant box add`

The box boots the way the lab's VMs do, without a boot loader: libvirt starts the image's kernel
and initrd directly (`root=/dev/vda`, the image is one ext4 filesystem), so the box's own
Vagrantfile names them. They are kept beside libvirt's images (KERNELS/<key>/), where libvirt's
qemu user can read them; a box under ~/.vagrant.d could not be.

What changes in the image: a `vagrant` user with Vagrant's insecure key (Vagrant replaces it at
the first `up`) and passwordless sudo, as Vagrant expects of a box; the lab's apt proxy (an
address that exists only on the qemu lab's network) replaced by `--apt-proxy` or removed.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import image
from .definition import CACHE, Lab
from .vm import LabError, Log

BOXES = CACHE / "vagrant-boxes"
KERNELS = Path("/var/lib/libvirt/images/dbzfs-box")


def box_name(lab: Lab) -> str:
    """The box's name in Vagrant: dbzfs/<the lab's suite> (dbzfs/trixie)."""
    return f"dbzfs/{lab.image['suite']}"


CMDLINE = "root=/dev/vda rw console=ttyS0 net.ifnames=0 mitigations=off"

BOX_VAGRANTFILE = """# Written by lab/vagrant_box.py: the lab's bare image, booted directly from its kernel.
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.kernel = {kernel!r}
    lv.initrd = {initrd!r}
    lv.cmd_line = {cmdline!r}
  end
end
"""


def insecure_key() -> str:
    """Vagrant's insecure public key, from the vagrant package (no download)."""
    found = sorted(Path("/usr/share/rubygems-integration/all/gems").glob("vagrant-[0-9]*/keys/vagrant.pub"))
    if not found:
        raise LabError("Vagrant's insecure key not found: install Debian's vagrant (scripts/bootstrap lab)")
    return found[-1].read_text().strip()


def metadata(root_img: Path) -> dict:
    return {
        "provider": "libvirt",
        "format": "qcow2",
        "virtual_size": math.ceil(root_img.stat().st_size / 1024**3),
    }


def box_vagrantfile(kernel_dir: Path) -> str:
    return BOX_VAGRANTFILE.format(
        kernel=str(kernel_dir / "vmlinuz"), initrd=str(kernel_dir / "initrd.img"), cmdline=CMDLINE
    )


def apt_proxy_setting(url: str | None) -> str | None:
    """The guest's apt.conf.d/01proxy text, or None for no proxy."""
    if not url:
        return None
    if not url.startswith("http://") or any(c in url for c in "\"'; \n"):
        raise LabError(f"--apt-proxy {url!r}: give an http:// URL, e.g. http://192.168.121.1:3142")
    return f'Acquire::http::Proxy "{url}";\n'


def _run(*argv: str) -> str:
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` failed (rc {r.returncode}): {r.stderr.strip()[-800:]}")
    return r.stdout


def _customise(root: Path, proxy: str | None) -> None:
    """The image as Vagrant expects a box: the vagrant user, its key, sudo; apt's proxy."""
    conf = root / "etc/apt/apt.conf.d/01proxy"
    conf.unlink(missing_ok=True)
    if proxy:
        conf.write_text(proxy)
    if "vagrant:" not in (root / "etc/passwd").read_text():
        _run("chroot", str(root), "useradd", "--create-home", "--shell", "/bin/bash", "vagrant")
    uid = int(_run("chroot", str(root), "id", "-u", "vagrant"))
    gid = int(_run("chroot", str(root), "id", "-g", "vagrant"))
    ssh = root / "home/vagrant/.ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    (ssh / "authorized_keys").write_text(insecure_key() + "\n")
    (ssh / "authorized_keys").chmod(0o600)
    for p in (ssh, ssh / "authorized_keys"):
        shutil.chown(p, uid, gid)
    sudoers = root / "etc/sudoers.d/vagrant"
    sudoers.write_text("vagrant ALL=(ALL) NOPASSWD: ALL\n")
    sudoers.chmod(0o440)


def build(lab: Lab, apt_proxy: str | None = None, log: Log = print) -> Path:
    """The box file for the current bare image (built again only when the image or the proxy
    changed); its kernel and initrd in KERNELS/<key>/."""
    proxy = apt_proxy_setting(apt_proxy)
    source = image.ensure(lab, "bare", log=log)
    tag = image.key(lab, "bare") + ("-proxy" if proxy else "")
    box = BOXES / f"dbzfs-{lab.image['suite']}-{tag}.box"
    kernels = KERNELS / image.key(lab, "bare")
    if box.exists() and (kernels / "vmlinuz").exists():
        log(f"==> vagrant box: {box} (cached)")
        return box
    BOXES.mkdir(parents=True, exist_ok=True)
    kernels.mkdir(parents=True, exist_ok=True)
    kernels.chmod(0o755)
    for name in ("vmlinuz", "initrd.img"):
        shutil.copyfile(source / name, kernels / name)
        (kernels / name).chmod(0o644)
    with tempfile.TemporaryDirectory(dir=BOXES, prefix=".build-") as tmp:
        work = Path(tmp)
        root_img, mnt = work / "root.raw", work / "mnt"
        log("==> vagrant box: copying the bare image")
        _run("cp", "--sparse=always", str(source / "root.img"), str(root_img))
        root_img.chmod(0o644)
        mnt.mkdir()
        _run("mount", "-o", "loop", str(root_img), str(mnt))
        try:
            _customise(mnt, proxy)
        finally:
            _run("umount", str(mnt))
        log("==> vagrant box: qcow2 image")
        _run("qemu-img", "convert", "-O", "qcow2", str(root_img), str(work / "box.img"))
        (work / "metadata.json").write_text(json.dumps(metadata(root_img)) + "\n")
        (work / "Vagrantfile").write_text(box_vagrantfile(kernels))
        partial = work / "box.tar"
        _run("tar", "-C", str(work), "-cf", str(partial), "metadata.json", "Vagrantfile", "box.img")
        partial.replace(box)
    log(f"==> vagrant box: {box}; add it with: vagrant box add --force --name {box_name(lab)} {box}")
    return box
