"""The lab itself: every VM has its 24 NVMe drives by id, a loaded zfs module (except the VMs whose
deploy installs ZFS: test_bare_host_plan.py), the private network, apt through the host's cache,
and no way out to anything else."""

import fnmatch

import pytest

pytestmark = pytest.mark.e2e


def test_every_vm_answers_with_its_own_name_and_address(lab):
    results = lab.run_all("hostname; ip -4 -o addr show dev eth1")
    for name, r in results.items():
        r.check()
        lines = r.stdout.splitlines()
        vm = lab.vms[name]
        assert lines[0] == name
        assert f"inet {vm.private_address}/{vm.private_prefix}" in r.stdout


def test_every_vm_has_its_nvme_drives_by_id(lab):
    results = lab.run_all("ls -1 /dev/disk/by-id/; echo ---; ls -1 /dev/ | grep -E '^nvme[0-9]+n1$'")
    for name, r in results.items():
        r.check()
        by_id, _, namespaces = r.stdout.partition("---\n")
        vm = lab.vms[name]
        matched = sorted(fnmatch.filter(by_id.split(), vm.drive_pattern))
        assert matched == sorted(vm.drive_ids), f"{name}: by-id drives {matched} != declared {vm.drive_ids}"
        assert len(matched) == vm.drive_count == 24
        assert len(namespaces.split()) == vm.drive_count


def test_zfs_module_is_loaded_and_tools_work(lab):
    from_image = [n for n, vm in lab.vms.items() if vm.image == "zfs"]
    results = lab.run_all(
        "test -d /sys/module/zfs && grep -qw '^zfs' /proc/modules && zfs version", names=from_image
    )
    for name, r in results.items():
        r.check()
        assert r.stdout.startswith("zfs-2."), f"{name}: {r.stdout}"
        assert "zfs-kmod-2." in r.stdout, f"{name}: {r.stdout}"


def test_private_network_links_the_vms(lab):
    db1 = lab.vms["db1"]
    others = [vm for vm in lab.vms.values() if vm.name != db1.name]
    cmd = " && ".join(f"ping -c 2 -W 5 {vm.private_address}" for vm in others)
    lab.check(db1.name, cmd, timeout=120)
    lab.check("pg2", f"ping -c 2 -W 5 {lab.vms['pg1'].private_address}", timeout=60)


def test_apt_works_through_the_host_cache(lab):
    # The stamp pyinfra's apt.update(cache_time=...) reads and writes (Debian's apt leaves it
    # alone): the converge that follows finds lists refreshed minutes ago and does not refresh
    # them a second time (engine.packages: only lists over an hour old).
    results = lab.run_all(
        "apt-get update -q 2>&1 && touch /var/lib/apt/periodic/update-success-stamp && "
        "apt-get install -y -q --no-install-recommends -s hello",
        timeout=600,
    )
    for name, r in results.items():
        r.check()
        # the bare image has no backports: a prebuilt ZFS install needs none
        assert ("bookworm-backports" in r.stdout) == (lab.vms[name].image == "zfs"), f"{name}: {r.stdout}"
        assert "Inst hello" in r.stdout


PROXY_CHECK = """python3 - <<'PY'
import urllib.request as u
opener = u.build_opener(u.ProxyHandler({"http": "http://10.0.2.100:3142"}))
try:
    opener.open("http://example.com/", timeout=10)
    print("PROXY-OPEN")
except Exception as e:
    print("refused:", e)
PY"""


def test_guests_cannot_reach_anything_else(lab):
    # Only sends from inside the guest: qemu's restrict=on user netdev drops it on the host.
    results = lab.run_all(
        "if timeout 10 bash -c 'exec 3<>/dev/tcp/1.1.1.1/80' 2>/dev/null; then echo TCP-OUT-WORKS; fi; "
        "if timeout 10 getent hosts deb.debian.org; then echo DNS-WORKS; fi; " + PROXY_CHECK
        # the apt cache serves Debian's archive only: anything else is refused
    )
    for name, r in results.items():
        assert "TCP-OUT-WORKS" not in r.stdout, f"{name}: a direct TCP connection left the guest"
        assert "DNS-WORKS" not in r.stdout, f"{name}: DNS resolves from the guest"
        assert "PROXY-OPEN" not in r.stdout, f"{name}: the apt cache proxied a non-Debian site"
        assert "refused: HTTP Error 403" in r.stdout, f"{name}: {r.stdout}{r.stderr}"
