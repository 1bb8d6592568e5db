"""The lab's VMs with `zfs_install: prebuilt` (lab.yaml: pg2) booted from the bare image, and the
first converge installed ZFS on them from the lab's module repository (lab/module_repo.py, built
with the zfs image by zfsrepo): the module package for the running kernel and the ZFS tools at its
version, apt having verified the repository's signature; no compiler, headers or DKMS on the
host. That a power loss brings the module, the pool, the datasets and the standby back with no
deploy in between is checked after test_crash.py's power loss of pg2 (back_after_power_loss). (The
second converge with 0 changes, for every VM of the lab: test_idempotence.py.)"""

import re

import pytest

from tests import labkit
from tests.bare_host import prebuilt
from tests.e2e.test_postgresql_role import streaming, wait_for

pytestmark = pytest.mark.e2e

NOTHING_COMPILES = (
    # gcc-12-base (libgcc's runtime, on every Debian system) is no compiler: names, not gcc*
    "dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n' zfs-dkms dkms 'linux-headers-*' gcc gcc-12 "
    "cpp cpp-12 make build-essential 2>/dev/null | grep '^.i'; command -v cc gcc make dkms; true"
)


def test_module_is_the_package_built_for_the_running_kernel(converged):
    for name in prebuilt(converged):
        kernel = converged.check(name, "uname -r").strip()
        module = f"zfs-modules-{kernel}"
        versions = dict(
            line.split()
            for line in converged.check(
                name, f"dpkg-query -W -f '${{Package}} ${{Version}}\\n' {module} zfsutils-linux zfs-zed"
            ).splitlines()
        )
        assert len(set(versions.values())) == 1 and len(versions) == 3, versions
        owner = converged.check(name, 'dpkg -S "$(modinfo -n zfs)" "$(modinfo -n spl)"')
        assert all(line.startswith(f"{module}:") for line in owner.splitlines()), owner
        loaded = converged.check(name, "cat /sys/module/zfs/version").strip()
        assert versions["zfsutils-linux"].startswith(loaded.split("-")[0]), (loaded, versions)
        size = converged.check(name, f"dpkg-query -W -f '${{Installed-Size}}' {module}").strip()
        labkit.log(f"==> {name}: {module} {versions[module]} installed ({int(size) // 1024} MiB unpacked)")


def test_nothing_compiles_on_the_host(converged):
    for name in prebuilt(converged):
        assert converged.check(name, NOTHING_COMPILES).split() == [], name


def test_apt_verified_the_repository_and_no_backports_were_needed(converged):
    for name in prebuilt(converged):
        sources = converged.check(name, "cat /etc/apt/sources.list.d/dbzfs-zfs-modules.list")
        assert re.search(
            r"^deb \[signed-by=/etc/apt/keyrings/dbzfs-zfs-modules\.asc\] http://\S+ "
            + labkit.lab_release().codename
            + " main$",
            sources,
            re.M,
        ), sources
        # apt keeps a repository's InRelease only after its signature checked out
        assert (
            converged.check(name, "ls /var/lib/apt/lists/ | grep -c 'dbzfs-zfs-modules.*_InRelease$'").strip()
            == "1"
        )
        assert (
            converged.run(name, "grep -rl backports /etc/apt/sources.list /etc/apt/sources.list.d/").rc == 1
        )


def back_after_power_loss(lab, names):
    """After a power loss of `names` (test_crash.py's replicas cycle: pg2 loses power under
    replication load, boots and catches up): the module from the repository is loaded with the
    deployed ARC setting, the pool and its datasets are back, PostgreSQL runs and streams.
    Checked there rather than with a power cycle of its own: one boot fewer in CI."""
    for name in names:
        assert lab.check(name, "cat /sys/module/zfs/version").strip()
        owner = lab.check(name, 'dpkg -S "$(modinfo -n zfs)"')
        assert owner.startswith(f"zfs-modules-{lab.check(name, 'uname -r').strip()}:"), owner
        conf = lab.check(name, "cat /etc/modprobe.d/zfs.conf")
        arc = re.search(r"zfs_arc_max=(\d+)", conf).group(1)
        assert lab.check(name, "cat /sys/module/zfs/parameters/zfs_arc_max").strip() == arc
        assert lab.check(name, "zpool list -H -o name,health").split() == ["dbpool", "ONLINE"]
        mounted = lab.check(name, "zfs list -H -o mounted -t filesystem dbpool/datastore/postgresql")
        assert mounted.strip() == "yes", mounted
        assert lab.check(name, f"systemctl is-active {labkit.lab_postgresql().unit}").strip() == "active"
    if "pg2" in names:
        wait_for(lambda: streaming(lab), 180, "pg2 streaming from pg1 again after its power loss")
