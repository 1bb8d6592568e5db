"""What a bare Debian VM of the lab's release (lab.yaml `bare_vms`) looks like before the deploy,
and its --dry run: shared by tests/e2e/test_bare_host_plan.py (in CI) and tests/install (the whole
install)."""

import time

from tests.e2e.pyinfra_results import proposed_changes
from tests.labkit import lab_release

# Prints nothing on a bare host: no zfs module, no ZFS tools, no ZFS or header packages, no
# contrib or backports source.
BARE_STATE = (
    "test -e /sys/module/zfs && echo module; command -v zpool zfs; "
    "dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n' 'zfs*' 'linux-headers-*' 2>/dev/null "
    "| grep '^.i'; "
    "grep -rh '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/ | grep -E 'backports|contrib'; "
    "true"
)

_ZFS_FROM = lab_release().zfs_suite  # the lab's release's: bookworm-backports, or trixie's contrib

# Operations a --dry run must propose on a bare host, in this order, by zfs_install.
INSTALL_OPERATIONS = {
    "dkms": (
        f"Debian {_ZFS_FROM} ",
        "Refresh the package lists",
        "Kernel headers for the ZFS module build",
        f"ZFS from {_ZFS_FROM}",
        "Load the zfs module",
        "Load zfs at boot",
        "Pool dbpool",
    ),
    "prebuilt": (
        "Signing key of the ZFS module repository",
        "ZFS module repository http",
        "Refresh the package lists",
        "ZFS module for Linux",
        "Load the zfs module",
        "Load zfs at boot",
        "Pool dbpool",
    ),
}


# The engine role's install operation, proposed after the ZFS install.
ENGINE_INSTALL = {
    "mariadb": "MariaDB server and client from Debian",
    "postgresql": f"PostgreSQL {lab_release().postgresql}, monitoring, sanoid and pgBackRest",
}


def dry_run(lab, limit=None):
    """`pyinfra INVENTORY deploy.py --dry --diff` -> (returncode, output, proposed operations)."""
    result = lab.pyinfra_dry(limit=limit)
    output = result.stdout + result.stderr
    return result.rc, output, proposed_changes(output)


def assert_proposes_the_install(proposed, output, how="dkms"):
    """Each of INSTALL_OPERATIONS proposed after the one before it (other operations between
    them: the firewall's package and its own refresh of the lists come first)."""
    after = -1
    for operation in INSTALL_OPERATIONS[how]:
        found = [i for i, line in enumerate(proposed) if operation in line and i > after]
        assert found, (operation, "after", proposed[after] if after >= 0 else None, proposed, output[-6000:])
        after = found[0]


def prebuilt(lab):
    """The lab's VMs that boot bare and get ZFS prebuilt from the first converge (lab.yaml)."""
    names = [n for n, vm in lab.vms.items() if vm.zfs_install == "prebuilt"]
    assert names, "lab.yaml has no VM with zfs_install: prebuilt"
    return names


def check_starts_bare(lab, names=None):
    for name in names or lab.names:
        assert lab.check(name, BARE_STATE).split() == [], name


def check_dry_run_plans_the_install(lab, timings, how="dkms", names=None):
    """--dry on the bare VMs (`names`: only those, with --limit) proposes the install (and, after
    it, the engine's server) and leaves them as bare as before."""
    t0 = time.monotonic()
    rc, output, proposed = dry_run(lab, limit=",".join(names) if names else None)
    timings["--dry on bare Debian"] = time.monotonic() - t0
    assert rc == 0, output[-6000:]
    assert_proposes_the_install(proposed, output, how)
    for engine in {lab.vms[n].engine for n in names or lab.names}:
        server = ENGINE_INSTALL[engine]
        assert any(server in p for p in proposed), (server, proposed)
    check_starts_bare(lab, names)
