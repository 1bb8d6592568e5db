"""The operations of a host's release upgrade (day2/upgrade_release.py): the rollback point, the
release's packages, the kernel's ZFS module, the reboot into the new release and the checks after
it. Each is a script that finds where the host is and does only what is left, so a run that was
cut resumes: the snapshots are taken once, the packages converge, the reboot happens only while
the host still runs the old kernel.

The rollback point (`rollback_point`): a recursive snapshot of the engine's datasets, taken with
the server stopped, and a copy of the system (the root filesystem, and /boot and /boot/efi when
they are filesystems of their own) in the pool's dataset `<pool>/dbzfs-system`, snapshotted with
the same name. What it does not hold: other filesystems than those, the boot loader's code in the
disk's boot sector or EFI variables (the rollback reinstalls GRUB from the restored system where
GRUB boots the host), and anything outside the host.
"""

from __future__ import annotations

import shlex
from collections.abc import Generator, Sequence
from time import monotonic, sleep

from pyinfra import logger
from pyinfra.api import FunctionCommand, StringCommand, operation
from pyinfra.facts.server import Command, Uptime

SYSTEM_DATASET = "dbzfs-system"  # under the pool: the system's copies, one snapshot per upgrade
SYSTEM_MOUNT = "/var/lib/dbzfs-system"
# the filesystems the system's copy holds, and the directory each is copied to
SYSTEM_FILESYSTEMS = {"/": "root", "/boot": "boot", "/boot/efi": "boot-efi"}
APT_ENV = (
    "export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=l APT_LISTCHANGES_FRONTEND=none; "
    "o='-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold';"
)


def snapshot_name(old: str, new: str) -> str:
    """The rollback point's snapshot name: one per upgrade, the same in every run."""
    return f"dbzfs-upgrade-{old}-to-{new}"


def rollback_point_script(engine_dataset: str, pool: str, snapshot: str) -> str:
    """The engine's datasets snapshotted (the server is stopped first, by the runbook) and the
    system copied into the pool and snapshotted; each kept when it exists."""
    q = shlex.quote
    system = f"{pool}/{SYSTEM_DATASET}"
    copies = "".join(
        f'if [ "{fs}" = / ] || mountpoint -q {q(fs)}; then mkdir -p "$mp/{name}"; '
        f'rsync -aHAXx --numeric-ids --delete {q(fs.rstrip("/") + "/")} "$mp/{name}/"; fi\n'
        for fs, name in SYSTEM_FILESYSTEMS.items()
    )
    return (
        "set -eu\n"
        f"if zfs list -H -o name {q(engine_dataset + '@' + snapshot)} >/dev/null 2>&1; then\n"
        f"  echo 'kept: {engine_dataset}@{snapshot}'\n"
        "else\n"
        f"  zfs snapshot -r {q(engine_dataset + '@' + snapshot)}\n"
        f"  echo 'taken: {engine_dataset}@{snapshot}'\n"
        "fi\n"
        f"if zfs list -H -o name {q(system + '@' + snapshot)} >/dev/null 2>&1; then\n"
        f"  echo 'kept: {system}@{snapshot}'; exit 0\n"
        "fi\n"
        f"zfs list -H -o name {q(system)} >/dev/null 2>&1 || zfs create -o mountpoint={SYSTEM_MOUNT} "
        f"-o compression=zstd -o atime=off {q(system)}\n"
        f"mp=$(zfs get -H -o value mountpoint {q(system)})\n"
        f"{copies}"
        'findmnt -rn -o TARGET,FSTYPE,SOURCE > "$mp/mounts"\n'
        f"zfs snapshot {q(system + '@' + snapshot)}\n"
        f"echo 'taken: {system}@{snapshot}' "
        f"$(zfs get -Hp -o value used,logicalused {q(system)} | paste -sd' ')\n"
    )


@operation(is_idempotent=False)
def rollback_point(engine_dataset: str, pool: str, snapshot: str) -> Generator[StringCommand, None, None]:
    """See rollback_point_script."""
    yield StringCommand("bash", "-c", shlex.quote(rollback_point_script(engine_dataset, pool, snapshot)))


def packages_script(new_codename: str, extra: Sequence[str]) -> str:
    """The release's packages: the lists, a full-upgrade (kept config files: the converge renders
    ours), then the kernel and headers metapackages the host has, moved to the new release's even
    when held (and held again), and `extra` (PostgreSQL's new server beside the old one)."""
    q = shlex.quote
    return (
        "set -eu\n"
        f"{APT_ENV}\n"
        "apt-get update -qq\n"
        "held=$(apt-mark showhold)\n"
        "apt-get -y -q $o full-upgrade\n"
        "metas=$(dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n' 'linux-image-*' 'linux-headers-*' "
        "2>/dev/null | awk '$1==\"ii\" && $2 !~ /[0-9]/ {print $2}')\n"
        f"apt-get -y -q $o --allow-change-held-packages install $metas {' '.join(q(p) for p in extra)}\n"
        'if [ -n "$held" ]; then\n'
        "  dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n' 'linux-image-*' 'linux-headers-*' "
        "| awk '$1==\"ii\" {print $2}' | xargs -r apt-mark hold >/dev/null\n"
        "fi\n"
        f"grep -q {q(new_codename)} /etc/os-release\n"
        'echo "release: $(. /etc/os-release; echo "$PRETTY_NAME")"\n'
    )


def new_kernel_script(module_package: str | None) -> str:
    """The newest installed kernel has ZFS's module (prebuilt: its package installed first from
    the module repository); the script fails, before any reboot, when it has none."""
    prebuilt = ""
    if module_package:
        prebuilt = f'{APT_ENV}\napt-get -y -q $o install {shlex.quote(module_package)}"$k"\n'
    return (
        "set -eu\n"
        "k=$(ls /lib/modules | sort -V | tail -n1)\n"
        f"{prebuilt}"
        'if ! modinfo -k "$k" zfs >/dev/null 2>&1; then\n'
        '  echo "no ZFS module for kernel $k: the host is not rebooted" >&2; exit 1\n'
        "fi\n"
        'echo "kernel=$k zfs=$(modinfo -k "$k" -F version zfs)"\n'
    )


def reboot_command(method: str) -> str:
    """The host's reboot into its newest kernel, detached from the SSH session: the firmware's
    (the boot loader picks the newest kernel) or kexec's (no firmware; and the lab's VMs, which
    qemu boots with the image's own kernel, boot the installed one only this way)."""
    if method == "kexec":
        return (
            "k=$(ls /lib/modules | sort -V | tail -n1); "
            'kexec -l "/boot/vmlinuz-$k" --initrd="/boot/initrd.img-$k" --reuse-cmdline && '
            "( sleep 1 && systemctl kexec ) </dev/null >/dev/null 2>&1 &"
        )
    return "( sleep 1 && systemctl reboot ) </dev/null >/dev/null 2>&1 &"


@operation(is_idempotent=False)
def rebooted(method: str, timeout: int = 900, always: bool = False) -> Generator:
    """Reboot into the newest installed kernel and wait until the host answers again on a shorter
    uptime (as pyinfra's server.reboot, with the reboot's command chosen). Decided when it runs:
    no reboot when the host already runs its newest kernel (a resumed run), unless `always` (a
    system restored under the running one)."""

    def reboot(state, host_) -> bool:  # noqa: ANN001 - pyinfra's FunctionCommand signature
        kernels = host_.get_fact(Command, "echo $(uname -r) $(ls /lib/modules | sort -V | tail -n1)")
        running, newest = ((kernels or "").split() + ["", ""])[:2]
        if running == newest and not always:
            logger.info(f"{host_.name}: runs {running}, its newest kernel, already: no reboot")
            return True
        before = host_.get_fact(Uptime)
        logger.info(f"{host_.name}: rebooting from {running} into {newest} ({method})")
        host_.run_shell_command(StringCommand("bash", "-c", shlex.quote(reboot_command(method))))
        sleep(10)
        host_.disconnect()
        t0 = monotonic()
        while monotonic() - t0 < timeout:
            host_.connect(show_errors=False)
            if host_.connected and host_.get_fact(Uptime) < before:
                logger.info(f"{host_.name}: up again {monotonic() - t0 + 10:.0f} s after its reboot")
                return True
            sleep(5)
        raise Exception(f"{host_.name} did not come back within {timeout} s of its reboot")

    yield FunctionCommand(reboot, (), {})


def after_boot_script(new_major: str, pool: str, unit: str, engine: str) -> str:
    """After the reboot: the new release, the pool imported and its datasets mounted, the
    server's unit running (MariaDB: mariadb-upgrade run on its tables)."""
    q = shlex.quote
    upgrade = ""
    if engine == "mariadb":
        upgrade = "mariadb-upgrade --silent >/dev/null || mariadb-upgrade\n"
    return (
        "set -eu\n"
        f'[ "$(. /etc/os-release; echo "$VERSION_ID")" = {q(new_major)} ] '
        f"|| {{ echo 'the host does not run Debian {new_major} after its reboot' >&2; exit 1; }}\n"
        f"zpool list -H -o health {q(pool)} | grep -qx ONLINE "
        f"|| {{ echo 'pool {pool} not ONLINE after the reboot' >&2; zpool status {q(pool)} >&2; exit 1; }}\n"
        f"for i in $(seq 60); do systemctl is-active --quiet {q(unit)} && break; sleep 2; done\n"
        f"systemctl is-active --quiet {q(unit)} || systemctl start {q(unit)}\n"
        f"{upgrade}"
        f'echo "$(. /etc/os-release; echo "$PRETTY_NAME"), kernel $(uname -r), '
        f'{unit} $(systemctl is-active {q(unit)})"\n'
    )


def restore_script(engine_dataset: str, pool: str, snapshot: str) -> str:
    """The node back to its rollback point, the server stopped: every dataset of the engine rolled
    back to the snapshot (`zfs rollback -r`: later snapshots of it are destroyed), then the
    system's copy written back over the running system (rsync --delete, one filesystem at a time,
    every other mount left out: the pool's datasets, /proc, /run...), and GRUB reinstalled from
    the restored system where GRUB boots the host. The host must reboot right after."""
    q = shlex.quote
    system = f"{pool}/{SYSTEM_DATASET}"
    restores = "".join(
        f'if [ -d "$src/{name}" ] && {{ [ "{fs}" = / ] || mountpoint -q {q(fs)}; }}; then '
        f'rsync -aHAXx --numeric-ids --delete $excludes "$src/{name}/" {q(fs.rstrip("/") + "/")}; fi\n'
        for fs, name in SYSTEM_FILESYSTEMS.items()
    )
    return (
        "set -eu\n"
        f"zfs list -H -o name {q(system + '@' + snapshot)} >/dev/null "
        f"|| {{ echo 'no system copy {system}@{snapshot}' >&2; exit 1; }}\n"
        # the datasets that hold the snapshot (one made since, a seed's or a rewrite's, holds none)
        f"for s in $(zfs list -H -o name -t snapshot -r {q(engine_dataset)} | grep -x '.*@{snapshot}'); do\n"
        '  zfs rollback -r "$s"\n'
        "done\n"
        f"echo 'rolled back: {engine_dataset} (recursively) to @{snapshot}'\n"
        f"src=$(zfs get -H -o value mountpoint {q(system)})/.zfs/snapshot/{snapshot}\n"
        # every mount point but the ones restored: rsync neither writes into them nor deletes there
        "excludes=$(findmnt -rn -o TARGET | grep -vxE '/|/boot|/boot/efi' "
        "| sed -e 's/\\\\x20/ /g' -e 's|.*|--exclude=&/***|' | tr '\\n' ' ')\n"
        f"{restores}"
        "if [ -x /usr/sbin/grub-install ] && debconf-show grub-pc 2>/dev/null "
        "| grep -q install_devices; then\n"
        "  for d in $(debconf-show grub-pc | sed -n 's/.*install_devices: //p' | tr ',' ' '); do\n"
        '    grub-install "$d"\n'
        "  done\n"
        "  update-grub\n"
        "fi\n"
        "sync\n"
        "echo 'system restored from its copy: reboot now'\n"
    )


@operation(is_idempotent=False)
def restored(engine_dataset: str, pool: str, snapshot: str) -> Generator[StringCommand, None, None]:
    """See restore_script."""
    yield StringCommand("bash", "-c", shlex.quote(restore_script(engine_dataset, pool, snapshot)))
