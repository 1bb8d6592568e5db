"""One host's release upgrade (day2/upgrade_release.py, operations/upgrade.py): its scripts are valid
shell and resume where a cut run stopped, its sources move, and the release check lets the host it
moves run the release before its data's (and no other)."""

import subprocess

import pytest

from day2 import upgrade_release
from model import releases
from model.hostdata import HostConfig
from operations import upgrade as ops
from roles import release

BOOKWORM = {"name": "Debian", "major": 12}
TRIXIE = {"name": "Debian", "major": 13}
BULLSEYE = {"name": "Debian", "major": 11}


def bash_ok(script: str) -> bool:
    return subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_every_script_is_valid_shell():
    assert bash_ok(
        ops.rollback_point_script("dbpool/datastore", "dbpool", "dbzfs-upgrade-bookworm-to-trixie")
    )
    assert bash_ok(ops.packages_script("trixie", ["postgresql-17"]))
    assert bash_ok(ops.new_kernel_script("zfs-modules-"))
    assert bash_ok(ops.new_kernel_script(None))
    assert bash_ok(ops.after_boot_script("13", "dbpool", "mariadb.service", "mariadb"))
    for method in ("reboot", "kexec"):
        assert bash_ok(ops.reboot_command(method))


def test_the_rollback_point_is_taken_once_and_covers_the_system():
    script = ops.rollback_point_script("dbpool/datastore", "dbpool", "s")
    assert "zfs list -H -o name dbpool/datastore@s >/dev/null 2>&1; then" in script
    assert "zfs snapshot -r dbpool/datastore@s" in script
    assert "echo 'kept: dbpool/dbzfs-system@s'; exit 0" in script
    for fs in ("/", "/boot", "/boot/efi"):
        assert f"rsync -aHAXx --numeric-ids --delete {fs.rstrip('/') + '/'} " in script
    assert ops.snapshot_name("bookworm", "trixie") == "dbzfs-upgrade-bookworm-to-trixie"


def test_the_kernel_is_moved_even_when_held_and_held_again():
    script = ops.packages_script("trixie", ["postgresql-17"])
    assert "--allow-change-held-packages install $metas postgresql-17" in script
    assert "for p in $held; do" in script and 'apt-mark hold "$p"' in script  # the holds as they were
    assert "$2 !~ /^linux-(image|headers)-[0-9]/" in script  # linux-image-amd64 is a metapackage
    assert script.index("dpkg --configure -a") < script.index("full-upgrade")
    assert "--force-confold" in script


def test_kexec_boots_the_newest_installed_kernel_with_the_same_command_line():
    command = ops.reboot_command("kexec")
    assert '--initrd="/boot/initrd.img-$k" --reuse-cmdline' in command and "systemctl kexec" in command
    assert "systemctl reboot" in ops.reboot_command("reboot")


def test_no_module_for_the_new_kernel_stops_before_the_reboot():
    script = ops.new_kernel_script("zfs-modules-")
    assert 'install zfs-modules-"$k"' in script
    assert "the host is not rebooted" in script and "exit 1" in script


@pytest.mark.parametrize(
    ("running", "upgrading", "refused"),
    [(BOOKWORM, True, False), (TRIXIE, True, False), (BOOKWORM, False, True), (BULLSEYE, True, True)],
)
def test_only_the_host_being_moved_may_run_the_release_before_its_datas(fleet, running, upgrading, refused):
    cfg = HostConfig.from_data("db2", fleet["db2"])  # debian_release "13"
    assert bool(release.problems(cfg, running, upgrading=upgrading)) is refused


def test_sources_move_the_module_repository_with_the_release_and_refuse_a_foreign_one(fleet):
    fleet["db1"].update(
        zfs_install="prebuilt",
        zfs_module_repository={"url": "http://10.0.2.100:3142/zfs", "suite": "bookworm", "key_file": "/k"},
    )
    cfg = HostConfig.from_data("db1", fleet["db1"])
    debian, zfs = "http://deb.debian.org/debian", "http://10.0.2.100:3142/zfs"
    files = {
        "/etc/apt/sources.list": f"deb {debian} bookworm main contrib\n",
        "/etc/apt/sources.list.d/dbzfs-zfs-modules.list": f"deb [signed-by=/k] {zfs} bookworm main\n",
        "/etc/apt/sources.list.d/dbzfs-backports.list": f"deb {debian} bookworm-backports main contrib\n",
        "/etc/apt/sources.list.d/vendor.list": "deb http://apt.vendor.example/ bookworm main\n",
    }
    moved, problems = upgrade_release.moved_sources(cfg, files, releases.BOOKWORM, releases.TRIXIE)
    assert moved["/etc/apt/sources.list"].text == "deb http://deb.debian.org/debian trixie main contrib\n"
    assert (
        "http://10.0.2.100:3142/zfs trixie main"
        in moved["/etc/apt/sources.list.d/dbzfs-zfs-modules.list"].text
    )
    assert moved["/etc/apt/sources.list.d/dbzfs-backports.list"].text.strip() == ""
    assert [(p.key, p.value) for p in problems] == [("apt sources", "/etc/apt/sources.list.d/vendor.list")]
    assert "apt.vendor.example" in problems[0].message and problems[0].fix


def test_postgresqls_major_step_links_into_the_same_dataset_and_its_wal_into_the_wal_dataset(fleet):
    from day2 import upgrade_major

    fleet["pg1"].update(debian_release="13", postgresql_version="15")
    cfg = HostConfig.from_data("pg1", fleet["pg1"])
    script = upgrade_major.script(cfg, "15", "17")
    assert bash_ok(script)
    data = cfg.mountpoint(cfg.data_dataset)
    wal = cfg.mountpoint(cfg.log_dataset)
    assert f"pg_upgradecluster --method=link --no-start 15 main {data}/17/main" in script
    assert f"waldir = '{wal}/%v/%c'" in script
    assert (
        f"zfs snapshot -r {cfg.dataset_name(cfg.parent_dataset)}@dbzfs-upgrade-postgresql-15-to-17" in script
    )
    # resumable: a cluster on 17 already is done; the old one is dropped once 17 runs
    assert script.index('if [ -n "$(state 17)" ]') < script.index("pg_ctlcluster --mode fast 15 main stop")
    assert "pg_dropcluster 15 main" in script


def test_the_restore_rolls_back_the_engine_then_writes_the_system_back_outside_every_other_mount():
    script = ops.restore_script("dbpool/datastore", "dbpool", "s")
    assert bash_ok(script)
    assert "zfs list -H -o name -t snapshot -r dbpool/datastore | grep -x '.*@s'" in script
    assert 'zfs rollback -r "$s"' in script
    assert "--exclude=&/***" in script and "grep -vxE '/|/boot|/boot/efi'" in script
    assert 'rsync -aHAXx --numeric-ids --delete $excludes "$src/root/" /' in script
    assert "grub-install" in script


@pytest.fixture
def replica(fleet):
    fleet["db2"]["debian_release"] = "12"
    return HostConfig.from_data("db2", fleet["db2"])


SNAP = "dbzfs-upgrade-bookworm-to-trixie"


def snaps(cfg):
    return {f"{cfg.dataset_name(cfg.parent_dataset)}@{SNAP}", f"{cfg.pool.name}/dbzfs-system@{SNAP}"}


def test_a_replica_with_its_rollback_point_may_be_rolled_back(replica):
    from day2 import upgrade_rollback

    live = {"writable": False}
    assert upgrade_rollback.problems(replica, live, releases.TRIXIE, snaps(replica), SNAP, None) == []


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"live": {"writable": True}}, "role"),
        ({"running": releases.BOOKWORM}, None),  # not moved yet: allowed (the release it says)
        ({"snapshots": set()}, "snapshot"),
        ({"running": None}, "debian_release"),
    ],
)
def test_a_rollback_that_would_lose_writes_or_has_no_rollback_point_is_refused(replica, change, key):
    from day2 import upgrade_rollback

    args = {"live": {"writable": False}, "running": releases.TRIXIE, "snapshots": snaps(replica), **change}
    found = upgrade_rollback.problems(replica, args["live"], args["running"], args["snapshots"], SNAP, None)
    assert [p.key for p in found] == ([key] if key else [])


def test_a_standby_whose_primary_moved_to_17_is_reseeded_not_rolled_back(fleet):
    from day2 import upgrade_rollback

    fleet["pg2"]["debian_release"] = "12"
    cfg = HostConfig.from_data("pg2", fleet["pg2"])
    found = upgrade_rollback.problems(cfg, {"writable": False}, releases.TRIXIE, snaps(cfg), SNAP, "17")
    assert [p.key for p in found] == ["postgresql_version"] and "reseed" in found[0].fix


def test_a_mariadb_replica_whose_primary_moved_is_not_rolled_back(replica):
    from day2 import upgrade_rollback

    found = upgrade_rollback.problems(
        replica, {"writable": False}, releases.TRIXIE, snaps(replica), SNAP, None, "13"
    )
    assert [p.key for p in found] == ["debian_release"] and "newer server" in found[0].message
    assert (
        upgrade_rollback.problems(
            replica, {"writable": False}, releases.TRIXIE, snaps(replica), SNAP, None, "12"
        )
        == []
    )


def test_the_kernel_to_boot_is_the_metapackages_not_the_highest_sorting_one():
    assert "${Depends}" in ops.TARGET_KERNEL and "ls /lib/modules" not in ops.TARGET_KERNEL
    assert ops.TARGET_KERNEL in ops.new_kernel_script(None) and ops.TARGET_KERNEL in ops.reboot_command(
        "kexec"
    )
    assert "--reuse-cmdline || exit 1; ( sleep 1 && systemctl kexec )" in ops.reboot_command("kexec")


def test_pyinfra_passes_the_state_and_host_to_the_reboot():
    """pyinfra 3 hands (state, host) only to a function whose arguments are named so."""
    import inspect

    from tests.unit.fact_stubs import run_operation  # noqa: F401 (the op must build like any other)

    gen = ops.rebooted._inner(method="kexec")
    command = next(gen)
    assert list(inspect.signature(command.function).parameters)[:2] == ["state", "host"]


def test_the_system_copy_keeps_acls_and_refuses_an_unmounted_dataset():
    script = ops.rollback_point_script("dbpool/datastore", "dbpool", "s")
    assert "-o acltype=posix -o xattr=sa" in script and "zfs set acltype=posix xattr=sa" in script
    assert 'mountpoint -q "$mp" || { echo' in script


def test_a_held_kernel_counts_as_installed():
    """dpkg says "hi" for a held package (the lab holds its kernel): the first lab run found no
    kernel to boot while it looked for "ii" only."""
    assert "$1 ~ /^[ih]i/" in ops.TARGET_KERNEL
    assert "$1 ~ /^[ih]i/" in ops.packages_script("trixie", [])
    assert "grep -q '^[ih]i'" in ops.packages_script("trixie", [])


def test_the_wait_for_the_reboot_survives_a_host_still_shutting_down():
    """A host that takes the connection while it shuts down, then drops it, then boots: the wait
    goes on past the dropped connection and ends on the shorter uptime."""

    class Host:
        name, connected = "db2", False

        def __init__(self):
            self.answers = [3600.0, ConnectionResetError("gone"), None, 12.0]
            self.disconnects = 0

        def connect(self, show_errors=True):
            if self.answers and self.answers[0] is None:
                self.answers.pop(0)  # nothing listens yet
                return
            self.connected = True

        def disconnect(self):
            self.connected, self.disconnects = False, self.disconnects + 1

        def get_fact(self, fact):
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    now = [0.0]
    host = Host()
    waited = ops.back_after(
        host, 3000.0, 900, wait=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0]
    )
    assert waited == 15.0 and host.disconnects == 2 and not host.answers


def test_the_wait_for_the_reboot_gives_up_after_its_timeout():
    class Host:
        name, connected = "db2", False

        def connect(self, show_errors=True):
            pass

    now = [0.0]
    with pytest.raises(Exception, match="did not come back within 30 s"):
        ops.back_after(
            Host(), 3000.0, 30, wait=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0]
        )
