"""The Vagrantfile: `vagrant validate` (real vagrant, with the vagrant-libvirt plugin so the libvirt
provider block is checked too), and its drive serials agree with lab/lab.yaml as the lab reads it.

No box can be downloaded in CI: validate checks the Vagrantfile without booting anything.
A missing vagrant or ruby is a failure, never a skip (scripts/bootstrap installs them).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

from lab.definition import load

REPO = Path(__file__).resolve().parents[2]


def _need(exe):
    path = shutil.which(exe)
    assert path, f"{exe} is not installed: run scripts/bootstrap (Debian package {exe})"
    return path


def test_vagrant_validate():
    vagrant = _need("vagrant")
    plugins = subprocess.run(
        [vagrant, "plugin", "list"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert "vagrant-libvirt" in plugins.stdout, (
        f"vagrant-libvirt plugin missing (Debian package vagrant-libvirt):\n{plugins.stdout}{plugins.stderr}"
    )
    r = subprocess.run([vagrant, "validate"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"vagrant validate failed:\n{r.stdout}\n{r.stderr}"
    assert "validated successfully" in r.stdout


def test_vagrantfile_reads_the_lab_definition():
    ruby = _need("ruby")
    # Load the Vagrantfile with a stub Vagrant.configure, then print what it derives from lab.yaml.
    script = (
        'module Vagrant; def self.configure(_v); end; end; load "Vagrantfile"; '
        'LAB.fetch("vms").each { |n, s| s = DEFAULTS.merge(s || {}); '
        'c = Integer(s.fetch("drive_count")); '
        'puts [n, s["memory"], s["vcpus"], size_mib(s["drive_size"]), s["private_address"], '
        '(0...c).map { |i| drive_serial(s["drive_serial"], n, i) }.join(",")].join(" ") }'
    )
    r = subprocess.run([ruby, "-e", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lab = load()
    expected = [
        " ".join(
            [
                vm.name,
                str(vm.memory),
                str(vm.vcpus),
                str(vm.drive_size // 2**20),
                vm.private_address,
                ",".join(vm.serials),
            ]
        )
        for vm in lab.vms.values()
    ]
    assert r.stdout.split("\n")[:-1] == expected


RECORDER = """
class Recorder
  def initialize(log); @log = log; end
  def method_missing(name, *args, **kw, &blk)
    @log << [name, args, kw]
    blk.call(self, self) if blk && name != :ruby  # trigger bodies (drive files) are not run
    self
  end
  def respond_to_missing?(*) = true
end
module Vagrant; def self.configure(_v); $log = []; yield Recorder.new($log); end; end
load "Vagrantfile"
require "json"
$log.each { |name, args, kw| puts JSON.generate([name, args.map(&:to_s), kw.to_a.flatten.map(&:to_s)]) }
"""


def run_recorder(env=None):
    return subprocess.run(
        [_need("ruby"), "-e", RECORDER],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def recorded(env=None):
    r = run_recorder(env)
    assert r.returncode == 0, r.stderr
    return [(name, " ".join(args), " ".join(kw)) for name, args, kw in map(json.loads, r.stdout.splitlines())]


def test_libvirt_gets_a_dotted_netmask_the_drives_on_their_own_bridge_and_the_joining_vms_wait():
    calls = recorded({"DBZFS_VAGRANT_DRIVER": "qemu"})
    defined = [(args, kw) for name, args, kw in calls if name == "define"]
    lab = load()
    assert defined == [(n, "autostart true") for n in lab.vms] + [(n, "autostart false") for n in lab.joining]
    networks = [kw for name, _, kw in calls if name == "network"]
    assert networks and all("netmask 255.255.255.0 libvirt__forward_mode none" in kw for kw in networks)
    assert {args for name, args, _ in calls if name == "driver="} == {"qemu"}
    qemu = [kw.removeprefix("value ") for name, _, kw in calls if name == "qemuargs"]
    per_vm = len(qemu) // len(defined)
    first = qemu[:per_vm]
    assert first[:2] == ["-device", "pci-bridge,id=dbzfs-nvme,chassis_nr=31,bus=pci.0,addr=0x1f"]
    devices = [a for a in first[2:] if a.startswith("nvme,")]
    assert len(devices) == 24
    help_text = subprocess.run(
        ["qemu-system-x86_64", "-device", "nvme,help"], capture_output=True, text=True, timeout=60
    ).stdout
    dbcs = ",dbcs=off" if "dbcs=" in help_text else ""
    assert devices[0] == f"nvme,serial=db1-nvme00,drive=nvme0,bus=dbzfs-nvme,addr=0x01{dbcs}"
    assert devices[23].startswith("nvme,serial=db1-nvme23,drive=nvme23,bus=dbzfs-nvme,addr=0x18")


def test_the_libvirt_driver_follows_the_environment_then_the_labs_kvm_verdict():
    assert {a for n, a, _ in recorded({"DBZFS_VAGRANT_DRIVER": "kvm"}) if n == "driver="} == {"kvm"}
    verdict = REPO / ".lab" / "accel"
    if verdict.exists():  # a lab probed KVM on this machine: its verdict decides
        expected = "kvm" if verdict.read_text().strip() == "kvm" else "qemu"
    else:
        expected = "kvm" if os.access("/dev/kvm", os.W_OK) else "qemu"
    assert {a for n, a, _ in recorded({"DBZFS_VAGRANT_DRIVER": ""}) if n == "driver="} == {expected}


def test_the_vcpus_come_from_lab_yaml_unless_dbzfs_vagrant_cpus_says_otherwise():
    lab = load()
    default = {a for n, a, _ in recorded({"DBZFS_VAGRANT_CPUS": ""}) if n == "cpus="}
    # The Vagrantfile defines the lab's VMs and the joining ones (not bare, backup or bench VMs).
    assert default == {str(vm.vcpus) for vm in {**lab.vms, **lab.joining}.values()}
    assert {a for n, a, _ in recorded({"DBZFS_VAGRANT_CPUS": "4"}) if n == "cpus="} == {"4"}
    r = run_recorder({"DBZFS_VAGRANT_CPUS": "two"})
    assert r.returncode != 0 and 'DBZFS_VAGRANT_CPUS must be a positive number, not "two"' in r.stderr
