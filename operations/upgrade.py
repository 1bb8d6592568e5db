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


# The kernel the installed kernel metapackage (linux-image-amd64, -cloud-amd64, ...) depends on:
# the one the host boots next. Not the highest-sorting directory of /lib/modules (a backports
# kernel sorts above the new release's). A held package is "hi", not "ii" (the lab holds its kernel).
TARGET_KERNEL = (
    "t=$(dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n' 'linux-image-*' 2>/dev/null "
    "| awk '$1 ~ /^[ih]i/ && $2 !~ /^linux-image-[0-9]/ && $2 !~ /-dbg$/ {print $2; exit}'); "
    "k=$(dpkg-query -W -f '${Depends}' \"$t\" 2>/dev/null | tr ',|' '\\n\\n' "
    "| sed -n 's/^ *linux-image-\\([0-9][^ ]*\\).*/\\1/p' | head -n1)"
)


def each_system_filesystem(action, when=lambda name: "") -> str:  # noqa: ANN001
    """A line per filesystem of the system's copy (SYSTEM_FILESYSTEMS), each run only where that
    filesystem is mounted on this host (/ always): `action(path with a trailing slash, the copy's
    directory name)`, guarded by `when(name)` too."""
    return "".join(
        f'if {when(name)}{{ [ "{fs}" = / ] || mountpoint -q {shlex.quote(fs)}; }}; then '
        f"{action(fs.rstrip('/') + '/', name)}; fi\n"
        for fs, name in SYSTEM_FILESYSTEMS.items()
    )


def rollback_point_script(engine_dataset: str, pool: str, snapshot: str) -> str:
    """The engine's datasets snapshotted (the server is stopped first, by the runbook) and the
    system copied into the pool and snapshotted; each kept when it exists (a resumed run). The
    copy's dataset keeps POSIX ACLs and extended attributes (rsync -A -X: /var/log/journal has
    ACLs), and must be mounted: unmounted, rsync -x would copy / into its own mount point."""
    q = shlex.quote
    system = f"{pool}/{SYSTEM_DATASET}"
    copies = each_system_filesystem(
        lambda fs, name: f'mkdir -p "$mp/{name}"; rsync -aHAXx --numeric-ids --delete {q(fs)} "$mp/{name}/"'
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
        f"-o compression=zstd -o atime=off -o acltype=posix -o xattr=sa {q(system)}\n"
        f"zfs set acltype=posix xattr=sa {q(system)}\n"
        f"mp=$(zfs get -H -o value mountpoint {q(system)})\n"
        f'mountpoint -q "$mp" || zfs mount {q(system)}\n'
        'mountpoint -q "$mp" || { echo "$mp: the system copy\'s dataset is not mounted" >&2; exit 1; }\n'
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
    """The release's packages: an interrupted dpkg finished first, the lists, a full-upgrade (kept
    config files: the converge renders ours), then the kernel and headers metapackages the host
    has, moved to the new release's even when held (the holds put back as they were), and `extra`
    (PostgreSQL's new server beside the old one)."""
    q = shlex.quote
    return (
        "set -eu\n"
        f"{APT_ENV}\n"
        "dpkg --configure -a\n"
        "apt-get update -qq\n"
        "apt-get -y -q $o -f install\n"
        "held=$(apt-mark showhold)\n"
        "apt-get -y -q $o full-upgrade\n"
        "metas=$(dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n' 'linux-image-*' 'linux-headers-*' "
        "2>/dev/null | awk '$1 ~ /^[ih]i/ && $2 !~ /^linux-(image|headers)-[0-9]/ && $2 !~ /-dbg$/ "
        "{print $2}')\n"
        f"apt-get -y -q $o --allow-change-held-packages install $metas {' '.join(q(p) for p in extra)}\n"
        "for p in $held; do\n"
        "  if dpkg-query -W -f '${db:Status-Abbrev}' \"$p\" 2>/dev/null | grep -q '^[ih]i'; then\n"
        '    apt-mark hold "$p" >/dev/null\n'
        "  fi\n"
        "done\n"
        f"grep -q {q(new_codename)} /etc/os-release\n"
        'echo "release: $(. /etc/os-release; echo "$PRETTY_NAME")"\n'
    )


def new_kernel_script(module_package: str | None) -> str:
    """The kernel the host boots next (TARGET_KERNEL) has ZFS's module (prebuilt: its package
    installed first from the module repository); the script fails, before any reboot, when it
    has none."""
    prebuilt = ""
    if module_package:
        prebuilt = f'{APT_ENV}\napt-get -y -q $o install {shlex.quote(module_package)}"$k"\n'
    return (
        "set -eu\n"
        f"{TARGET_KERNEL}\n"
        '[ -n "$k" ] || { echo "no kernel metapackage names the kernel to boot" >&2; exit 1; }\n'
        f"{prebuilt}"
        'if ! modinfo -k "$k" zfs >/dev/null 2>&1; then\n'
        '  echo "no ZFS module for kernel $k: the host is not rebooted" >&2; exit 1\n'
        "fi\n"
        'echo "kernel=$k zfs=$(modinfo -k "$k" -F version zfs)"\n'
    )


def reboot_command(method: str) -> str:
    """The host's reboot into the kernel it boots next (TARGET_KERNEL), detached from the SSH
    session (nothing of it holds the channel open): the firmware's (the boot loader picks the
    newest kernel) or kexec's (no firmware; and the lab's VMs, which qemu boots with the image's
    own kernel, boot an installed one only this way). kexec's load is checked before."""
    if method == "kexec":
        return (
            f"{TARGET_KERNEL}; "
            'kexec -l "/boot/vmlinuz-$k" --initrd="/boot/initrd.img-$k" --reuse-cmdline || exit 1; '
            "( sleep 1 && systemctl kexec ) </dev/null >/dev/null 2>&1 &"
        )
    return "( sleep 1 && systemctl reboot ) </dev/null >/dev/null 2>&1 &"


@operation(is_idempotent=False)
def rebooted(method: str, timeout: int = 900, always: bool = False) -> Generator:
    """Reboot into the kernel the host boots next and wait until it answers again on a shorter
    uptime (as pyinfra's server.reboot, with the reboot's command chosen). Decided when it runs:
    no reboot when the host already runs that kernel (a resumed run), unless `always` (a system
    restored under the running one)."""

    # pyinfra passes (state, host) only to a function whose arguments are named so
    def reboot(state, host) -> bool:  # noqa: ANN001 - pyinfra's FunctionCommand signature
        kernels = host.get_fact(Command, f'{TARGET_KERNEL}; echo "$(uname -r) $k"')
        running, target = ((kernels or "").split() + ["", ""])[:2]
        if running == target and not always:
            logger.info(f"{host.name}: runs {running}, the kernel it boots next, already: no reboot")
            return True
        before = host.get_fact(Uptime)
        logger.info(f"{host.name}: rebooting from {running} into {target or 'its kernel'} ({method})")
        ok, output = host.run_shell_command(StringCommand("bash", "-c", shlex.quote(reboot_command(method))))
        if not ok:
            raise Exception(f"{host.name}: the reboot did not start: {output}")
        sleep(10)
        host.disconnect()
        back_after(host, before, timeout)
        return True

    yield FunctionCommand(reboot, (), {})


def back_after(host, before: float, timeout: float, wait=sleep, clock=monotonic) -> float:  # noqa: ANN001
    """Wait until the host answers with an uptime shorter than `before` (seconds); returns the
    seconds waited. A host still shutting down may take the connection and drop it (under
    emulation its shutdown takes longer than the first wait): that connection is closed, the
    error ignored, and the wait goes on."""
    t0 = clock()
    logger.info(f"{host.name}: waiting for it to answer SSH on a fresh boot (at most {timeout:.0f} s)")
    while clock() - t0 < timeout:
        try:
            host.connect(show_errors=False)
            if host.connected and host.get_fact(Uptime) < before:
                logger.info(f"{host.name}: up again {clock() - t0 + 10:.0f} s after its reboot")
                return clock() - t0
        except Exception as e:  # noqa: BLE001 - a connection the shutdown dropped
            logger.info(f"{host.name}: not back yet ({type(e).__name__})")
        if host.connected:
            host.disconnect()
        wait(5)
    raise Exception(f"{host.name} did not come back within {timeout:.0f} s of its reboot")


def stamp_path(snapshot: str) -> str:
    """Written once a host's release step is done (after its reboot and checks): a run cut before
    that is resumed, not taken for done (the host says the new release as soon as base-files is
    upgraded, long before its reboot). On the root filesystem: a rollback takes it away."""
    return f"/var/lib/dbzfs/{snapshot}.done"


def after_boot_script(new_major: str, pool: str, unit: str, engine: str, stamp: str | None = None) -> str:
    """After the reboot: the new release, the pool imported and its datasets mounted, the
    server's unit running (MariaDB: mariadb-upgrade run on its tables); then `stamp` written."""
    q = shlex.quote
    done = f"mkdir -p {q(stamp.rsplit('/', 1)[0])} && date -u +%FT%TZ > {q(stamp)}\n" if stamp else ""
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
        f"{done}"
    )


def restore_script(engine_dataset: str, pool: str, snapshot: str) -> str:
    """The node back to its rollback point, the server stopped: every dataset of the engine rolled
    back to the snapshot (`zfs rollback -r`: later snapshots of it are destroyed), then the
    system's copy written back over the running system (rsync --delete, one filesystem at a time,
    every other mount left out: the pool's datasets, /proc, /run...), and GRUB reinstalled from
    the restored system where GRUB boots the host. The host must reboot right after."""
    q = shlex.quote
    system = f"{pool}/{SYSTEM_DATASET}"
    restores = each_system_filesystem(
        lambda fs, name: f'rsync -aHAXx --numeric-ids --delete $excludes "$src/{name}/" {q(fs)}',
        when=lambda name: f'[ -d "$src/{name}" ] && ',
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


def retired_script(engine_dataset: str, pool: str, snapshot: str, suffix: str) -> str:
    """After a rollback: the rollback point's snapshots renamed aside (kept, never destroyed here),
    so that the next upgrade takes new ones instead of keeping these as a resumed run would."""
    q = shlex.quote
    system = f"{pool}/{SYSTEM_DATASET}"
    return "".join(
        f"if zfs list -H -o name {q(d + '@' + snapshot)} >/dev/null 2>&1; then "
        f"zfs rename -r {q(d + '@' + snapshot)} {q(d + '@' + snapshot + suffix)}; fi\n"
        for d in (engine_dataset, system)
    )
