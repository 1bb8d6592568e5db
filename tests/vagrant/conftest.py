"""The project's Vagrantfile booted for real with libvirt, one VM (db1) from the box
`./dbzfs lab vagrant-box` makes of the lab's bare image. `test_boot.py` (`./dbzfs test-long`, before
the lab boots): `vagrant up`, the drives by id, apt only through the host's cache.
`test_converge.py` (`./dbzfs test-long` and `./dbzfs test-vagrant`): deploy.py converged on it
(ZFS installed prebuilt from the lab's module repository: nothing compiles under emulation), the
testinfra checks, and a second converge with no change.

The fixtures are package-scoped: the VM is destroyed and libvirt stopped after the last test here,
before the lab's VMs boot in the same session.

Services are started here as the lab starts its own: libvirt's daemons (virtlogd, libvirtd) when
they are not running, and a forwarder from the management network's host address to the lab's
apt-cacher-ng. The management network does not forward (DBZFS_VAGRANT_ISOLATED=1): the guest
reaches only the host's apt cache. Everything is destroyed and stopped at the end, whatever
happens; what was already running is left running.
"""

import functools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from lab import aptcache, control, image, module_repo, vagrant_box, vm as vmmod  # noqa: E402
from lab.definition import STATE, load  # noqa: E402

from tests import labkit  # noqa: E402

NAME = "db1"
GATEWAY = "192.168.121.1"  # vagrant-libvirt's management network, host side
APT_PROXY = f"http://{GATEWAY}:3142"
LIBVIRT_SOCKET = Path("/var/run/libvirt/libvirt-sock")


def log(msg):
    labkit.log(msg)


@functools.cache
def libvirt_driver():
    """The lab's own KVM verdict (probed here when no lab has booted yet, as on a clean clone): the
    Vagrantfile would otherwise take a /dev/kvm that exists for kvm, and here KVM cannot boot
    Debian."""
    if os.environ.get("DBZFS_VAGRANT_DRIVER"):
        return os.environ["DBZFS_VAGRANT_DRIVER"]
    return "kvm" if vmmod.accel(image.ensure(load(), "bare", log=log), log=log) == "kvm" else "qemu"


def vagrant_env():
    return {
        **control.lab_env(),
        "DBZFS_VAGRANT_DRIVER": libvirt_driver(),
        "DBZFS_VAGRANT_BOX": vagrant_box.box_name(load()),
        "DBZFS_VAGRANT_ISOLATED": "1",
        "VAGRANT_DEFAULT_PROVIDER": "libvirt",
        "VAGRANT_CHECKPOINT_DISABLE": "1",
    }


def run(argv, timeout=1800, check=True, **kw):
    r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, **kw)
    if check:
        # Vagrant's error comes first on stderr, then a long Ruby backtrace.
        errors = r.stderr if len(r.stderr) < 6000 else f"{r.stderr[:3000]}\n...\n{r.stderr[-2000:]}"
        shown = f"{r.stdout[-4000:]}\n{errors}"
        assert r.returncode == 0, f"`{' '.join(argv)}` failed (rc {r.returncode}):\n{shown}"
    return r


def _started(exe, *args):
    """Start a daemon unless one runs; its name if this session started it."""
    name = Path(exe).name
    if subprocess.run(["pgrep", "-x", name], capture_output=True).returncode == 0:
        return None
    path = shutil.which(exe) or f"/usr/sbin/{exe}"
    assert os.path.exists(path), f"{exe} missing: run scripts/bootstrap vagrant"
    subprocess.run([path, *args], check=True, stdin=subprocess.DEVNULL, capture_output=True)
    return name


@pytest.fixture(scope="package")
def timings():
    yield from labkit.timings("vagrant")


@pytest.fixture(scope="package")
def libvirt(request):
    labkit.set_capture(request)
    started = [n for n in (_started("virtlogd", "-d"), _started("libvirtd", "-d")) if n]
    try:
        deadline = time.monotonic() + 60
        while run(["virsh", "-c", "qemu:///system", "version"], check=False).returncode != 0:
            assert time.monotonic() < deadline, "libvirtd did not answer within 60 s"
            time.sleep(1)
        log(f"==> libvirt: {'started ' + ', '.join(started) if started else 'already running'}")
        # vagrant-libvirt keeps box images and root disks in the storage pool "default"
        virsh = ["virsh", "-c", "qemu:///system"]
        if run([*virsh, "pool-info", "default"], check=False).returncode != 0:
            run([*virsh, "pool-define-as", "default", "dir", "--target", "/var/lib/libvirt/images"])
        if "running" not in run([*virsh, "pool-info", "default"]).stdout:
            run([*virsh, "pool-start", "default"])
        yield
    finally:
        # libvirt's dnsmasq for the networks Vagrant made goes with the networks (vagrant destroy);
        # a leftover one is killed with the daemons this session started.
        for name in reversed(started):
            subprocess.run(["pkill", "-x", name], capture_output=True)
        if started:
            leftover = "dnsmasq --conf-file=/var/lib/libvirt/dnsmasq/"
            subprocess.run(["pkill", "-f", leftover], capture_output=True)
            log(f"==> libvirt: stopped {', '.join(started)}")


@pytest.fixture(scope="package")
def box(libvirt, timings):
    lab = load()
    t0 = time.monotonic()
    path = vagrant_box.build(lab, APT_PROXY, log=log)
    timings["box build"] = time.monotonic() - t0
    t0 = time.monotonic()
    run(
        ["vagrant", "box", "add", "--force", "--name", vagrant_box.box_name(lab), str(path)],
        env=vagrant_env(),
    )
    timings["vagrant box add"] = time.monotonic() - t0
    return path


def ssh_config(address):
    path = STATE / "vagrant-ssh-config"
    path.write_text(
        f"Host {NAME}\n  HostName {address}\n  User root\n  IdentityFile {vmmod.SSH_KEY}\n"
        "  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
    )
    return path


INVENTORY = '''"""Written by tests/vagrant/conftest.py: the Vagrant VM {name} at {address}, ZFS prebuilt."""
import dataclasses
import runpy

from lab.definition import load

_vm = dataclasses.replace(load().vm({name!r}), zfs_install="prebuilt")
_host = runpy.run_path({lab_inventory!r})["_mariadb_host"]
_name, _data = _host(_vm)
# this machine's SSH sessions reach the VM from the libvirt network's gateway
_data.update(ssh_hostname={address!r}, ssh_port=22, firewall_admin_networks=[{gateway!r} + "/32"])
mariadb = [(_name, _data)]
'''


@pytest.fixture(scope="package")
def vagrant_vm(box, timings):
    """db1 up through `vagrant up`, reachable as root with the lab's key; destroyed at the end."""
    lab = load()
    aptcache.ensure(int(lab.network.get("apt_cache_port", 3142)), log=log)
    module_repo.ensure(lab, log=log)
    vmmod.ensure_key()  # the Vagrantfile's provisioning gives root this key
    forwarder = None
    # Fresh drives, as a new server's: a pool label left by an earlier run makes the storage role
    # refuse the drives (rightly). The Vagrantfile creates missing drive files at `up`.
    drives = Path(os.environ.get("DBZFS_VAGRANT_DRIVES", "/var/lib/libvirt/images/dbzfs-lab")) / NAME
    shutil.rmtree(drives, ignore_errors=True)
    try:
        t0 = time.monotonic()
        run(["vagrant", "up", NAME, "--provider=libvirt"], timeout=3600, env=vagrant_env())
        timings["vagrant up"] = time.monotonic() - t0
        config = run(["vagrant", "ssh-config", NAME], env=vagrant_env()).stdout
        address = next(line.split()[1] for line in config.splitlines() if line.strip().startswith("HostName"))
        forwarder = subprocess.Popen(
            ["socat", f"TCP-LISTEN:3142,bind={GATEWAY},fork,reuseaddr", "TCP:127.0.0.1:3142"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        inventory = STATE / "inventories" / "vagrant.py"
        inventory.parent.mkdir(parents=True, exist_ok=True)
        inventory.write_text(
            INVENTORY.format(
                name=NAME,
                address=address,
                gateway=GATEWAY,
                lab_inventory=str(REPO / "inventories" / "lab.py"),
            )
        )
        handle = labkit.Lab(lab, [NAME], inventory)
        handle.ssh_config = ssh_config(address)
        handle.address = address
        yield handle
    finally:
        t0 = time.monotonic()
        run(["vagrant", "destroy", "-f", NAME], timeout=600, check=False, env=vagrant_env())
        timings["vagrant destroy"] = time.monotonic() - t0
        if forwarder:
            forwarder.kill()


def on_vm(vm, command, timeout=600):
    argv = ["ssh", "-F", str(vm.ssh_config), NAME, command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
