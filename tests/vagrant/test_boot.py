"""The Vagrantfile for real (libvirt), in `./dbzfs test-long` before the lab boots: one VM up through
`vagrant up` from the lab's own box, its 24 NVMe drives by id with the lab's serials, and apt
reaching only the host's cache. The converge on it is test_converge.py (`./dbzfs test-long`)."""

import pytest

from tests.vagrant.conftest import NAME, on_vm

pytestmark = [pytest.mark.e2e, pytest.mark.vagrant]


def test_the_vm_has_its_24_nvme_drives_by_id_with_the_lab_serials(vagrant_vm):
    listed = on_vm(vagrant_vm, "ls /dev/disk/by-id")
    assert listed.returncode == 0, listed.stderr
    wanted = [d.rsplit("/", 1)[-1] for d in vagrant_vm.definition.vm(NAME).drive_ids]
    assert len(wanted) == 24 and set(wanted) <= set(listed.stdout.split()), listed.stdout


def test_apt_reaches_only_the_hosts_cache(vagrant_vm):
    direct = on_vm(vagrant_vm, "timeout 10 bash -c 'exec 3<>/dev/tcp/151.101.2.132/80' && echo reached")
    assert "reached" not in direct.stdout, "the guest reached an address beyond the host"
    proxied = on_vm(vagrant_vm, "apt-get -o Debug::NoLocking=1 update -qq && echo ok", timeout=900)
    assert proxied.returncode == 0 and "ok" in proxied.stdout, proxied.stdout + proxied.stderr
