"""The Vagrantfile: `vagrant validate` (real vagrant, with the vagrant-libvirt plugin so the libvirt
provider block is checked too), and its drive serials agree with lab/lab.yaml as the lab reads it.

No box can be downloaded in CI: validate checks the Vagrantfile without booting anything.
A missing vagrant or ruby is a failure, never a skip (scripts/bootstrap installs them).
"""

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
