"""The lab as a whole: up, down, status, converge. Used by `python -m lab` and tests/e2e.

All functions take a `log` callable for progress lines ("==> db1: ssh up after 41 s").
"""

import dataclasses
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence

import yaml

from model import releases

from . import aptcache, image, module_repo, vm as vmmod
from .definition import CACHE, REPO, SSH_CONFIG, STATE, VM, Lab, load  # noqa: F401 (STATE: for tests/labkit.py)
from .vm import LabError, Log, rel

PYINFRA = REPO / ".venv" / "bin" / "pyinfra"
PYTEST = REPO / ".venv" / "bin" / "pytest"
PYTHON = REPO / ".venv" / "bin" / "python"
INVENTORY = REPO / "inventories" / "lab.py"
BACKUP_INVENTORY = REPO / "inventories" / "lab_backup.py"  # the lab plus its backup VM


SECRETS = CACHE / "lab-secrets.yml"
# The lab secrets that are not random passwords: SSH keys, as the text of a private key file
# (ssh_private_key()): the backup host's (roles/backup.py) and the PostgreSQL hosts' key to its
# pgBackRest repository (roles/pgbackrest.py).
BACKUP_SSH_KEY = "backup_ssh_private_key"
PGBACKREST_SSH_KEY = "pgbackrest_ssh_private_key"
# The keys the lab's inventories' data names: the replication account, the lab's application user
# and the two keys.
LAB_SECRETS = ("replication_password", "lab_app_password", BACKUP_SSH_KEY, PGBACKREST_SSH_KEY)


def ssh_private_key(comment: str = "dbzfs-lab-backup") -> str:
    """A new OpenSSH ed25519 private key without a passphrase, as its file's text. Made in a
    private temporary directory (mode 700), removed with it."""
    with tempfile.TemporaryDirectory(prefix="dbzfs-lab-key-") as tmp:
        path = os.path.join(tmp, "key")
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path],
            check=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        with open(path) as f:
            return f.read()


def _new_secret(key: str) -> str:
    if key in (BACKUP_SSH_KEY, PGBACKREST_SSH_KEY):
        return ssh_private_key(comment=f"dbzfs-lab-{key}")
    return secrets.token_urlsafe(24)


class _SecretsDumper(yaml.SafeDumper):
    """Multi-line text (a private key) as a literal block scalar (`|`): one line of the file per
    line of the key, read back as the same text by yaml and by model/secrets.py."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_SecretsDumper.add_representer(str, _represent_text)


def dump_secrets(values: dict[str, str]) -> str:
    return yaml.dump(values, Dumper=_SecretsDumper, default_flow_style=False)


def lab_env() -> dict[str, str]:
    """Environment for pyinfra/testinfra runs against the lab: the lab's own throwaway secrets
    (generated once into /var/cache/dbzfs-lab/lab-secrets.yml, mode 600, outside the repo), so no
    real secret ever reaches a lab VM. An explicit DBZFS_SECRETS_FILE wins."""
    env = dict(os.environ)
    if env.get("DBZFS_SECRETS_FILE"):
        return env
    held = yaml.safe_load(SECRETS.read_text()) if SECRETS.exists() else {}
    missing = [key for key in LAB_SECRETS if not (held or {}).get(key)]
    if missing:  # a file from an older checkout keeps its secrets and gets the new ones
        values = {**(held or {}), **{key: _new_secret(key) for key in missing}}
        SECRETS.parent.mkdir(parents=True, exist_ok=True)
        tmp = SECRETS.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("# The local lab's throwaway secrets (lab/control.py); not used for any real host.\n")
            f.write(dump_secrets(values))
        os.replace(tmp, SECRETS)
    env["DBZFS_SECRETS_FILE"] = str(SECRETS)
    for k in [k for k in env if k.startswith("DBZFS_SECRET_")]:
        del env[k]  # real secrets from the environment stay away from the lab
    return env


def prune_images(lab: Lab, keep: int = 2, log: Log = print) -> None:
    """Remove cached images older than the `keep` newest. The current ones always stay, those of
    every release the lab boots included (`./dbzfs test-debian12` beside CI's Debian 13 lab, and the
    release upgrade's module repository: lab/module_repo.py)."""
    current = {
        image.path(dataclasses.replace(lab, image={**lab.image, "suite": r.codename}), v)
        for r in releases.RELEASES.values()
        for v in image.VARIANTS
    }
    built = sorted(
        (d for d in image.IMAGES.iterdir() if (d / "manifest.json").exists()),
        key=lambda d: (d / "manifest.json").stat().st_mtime,
        reverse=True,
    )
    for d in built[keep:]:
        if d not in current:
            log(f"==> image: removing old image {d}")
            shutil.rmtree(d, ignore_errors=True)


def _select(lab: Lab, names: Sequence[str] | None, everything: bool = False) -> list[VM]:
    """The named VMs; by default the lab's (or, with everything, the bare VMs too)."""
    if names:
        return [lab.vm(n) for n in names]
    return list((lab.all_vms if everything else lab.vms).values())


def up(lab: Lab | None = None, names: Sequence[str] | None = None, log: Log = print) -> Lab:
    """Build the image if needed, start the apt cache and the VMs not running yet (in parallel), wait
    until ssh answers on each. Idempotent. A VM that fails to come up is stopped and reported (with
    its console log); the others are left running."""
    lab = lab or load()
    vms = _select(lab, names)
    vmmod.require_qemu()
    t0 = time.monotonic()
    port = int(lab.network.get("apt_cache_port", 3142))
    guest_addr = lab.network.get("apt_cache_guest_address", "10.0.2.100")
    prebuilt = any(vm.zfs_install == "prebuilt" for vm in vms)
    # A VM installing ZFS prebuilt needs the zfs image's packages even when no VM boots that image.
    variants = dict.fromkeys([vm.image for vm in vms] + (["zfs", "bare"] if prebuilt else []))
    image_dirs = {variant: image.ensure(lab, variant, log=log) for variant in variants}
    prune_images(lab, log=log)
    aptcache.ensure(port, log=log)
    if prebuilt:
        module_repo.ensure(lab, log=log)
    vmmod.ensure_key()
    vmmod.write_ssh_config(lab)
    vmmod.ensure_switch()
    accel = vmmod.accel(next(iter(image_dirs.values())), log=log)
    booting = []
    for vm in vms:
        if vmmod.pid(vm):
            log(f"==> {vm.name}: already running (pid {vmmod.pid(vm)})")
            continue
        vmmod.prepare(vm, image_dirs[vm.image], log=log)
        log(
            f"==> {vm.name}: booting ({accel}, {vm.vcpus} vCPU, {vm.memory} MiB, {vm.drive_count} NVMe drives"
            f"{', bare image' if vm.image == 'bare' else ''}; console: {rel(vm.console_log)})"
        )
        try:
            vmmod.start(vm, image_dirs[vm.image], accel, port, guest_addr)
        except LabError:
            vmmod.stop(booting, timeout=0, log=log)
            raise
        booting.append(vm)
    t_boot = time.monotonic()
    try:
        vmmod.wait_all(vms, t_boot, log=log)
    except LabError as e:
        # A VM that crashed or hangs is of no use: kill it (its console log stays).
        vmmod.stop([lab.vm(n) for n in getattr(e, "failed", [])], timeout=0, log=log)
        raise
    if booting:
        log(
            f"==> lab up: {', '.join(vm.name for vm in vms)} in {time.monotonic() - t0:.0f} s "
            f"(boot {time.monotonic() - t_boot:.0f} s); ssh config: {rel(SSH_CONFIG)}"
        )
    return lab


def down(
    lab: Lab | None = None, names: Sequence[str] | None = None, timeout: float = 60, log: Log = print
) -> None:
    """Stop VMs (all by default, bare ones too); safe to run any time. With all VMs, also kills any
    stray qemu started from this checkout's .lab/ and the private network's switch."""
    lab = lab or load()
    vms = _select(lab, names, everything=True)
    vmmod.stop(vms, timeout=timeout, log=log)
    if not names:
        strays = vmmod.stray_qemus()
        if strays:
            log(f"==> killing stray qemu processes {strays}")
            vmmod._kill(strays, log, "qemu")
        vmmod.stop_switch()
    if not any(vmmod.pid(vm) for vm in lab.all_vms.values()):
        vmmod.stop_switch()


def wipe(lab: Lab | None = None, names: Sequence[str] | None = None, log: Log = print) -> None:
    """Fresh root disks (new overlays) and empty drives for stopped VMs; refuses running ones."""
    lab = lab or load()
    vms = _select(lab, names)
    running = [vm.name for vm in vms if vmmod.pid(vm)]
    if running:
        raise LabError(f"{', '.join(running)} running: stop first (python -m lab down)")
    for vm in vms:
        (vm.state_dir / "overlay.qcow2").unlink(missing_ok=True)
        shutil.rmtree(vm.state_dir / "drives", ignore_errors=True)
    log(f"==> {', '.join(vm.name for vm in vms)}: root disks and drives wiped (fresh at next up)")


def status(lab: Lab | None = None, log: Log = print) -> dict[str, int | None]:
    lab = lab or load()
    for variant in image.VARIANTS:
        img = image.path(lab, variant)
        log(f"image ({variant}): {img if image.is_built(lab, variant) else 'not built (' + str(img) + ')'}")
    log(
        f"apt cache: {'up' if aptcache.answers(int(lab.network.get('apt_cache_port', 3142))) else 'down'} "
        f"on 127.0.0.1:{lab.network.get('apt_cache_port', 3142)}"
    )
    # A backup VM runs no database: "-" for its engine, "backup" its role.
    width = max(6, *(len(name) for name in lab.all_vms))
    log(f"{'VM':{width}} {'state':20} {'ssh':16} {'private':12} {'engine':11} {'role':8} console")
    rows: dict[str, int | None] = {}
    for vm in lab.all_vms.values():
        p = vmmod.pid(vm)
        state = f"running (pid {p})" if p else "stopped"
        ssh = ("answers" if vmmod.ssh_answers(vm) else "no answer") if p else "-"
        rows[vm.name] = p
        log(
            f"{vm.name:{width}} {state:20} {'127.0.0.1:' + str(vm.ssh_port) + ' ' + ssh:16} "
            f"{vm.private_address:12} {vm.engine or '-':11} {vm.role:8} {rel(vm.console_log)}"
        )
    return rows


def converge(lab: Lab | None = None, log: Log = print, with_backup: bool = False) -> None:
    """up, then pyinfra inventories/lab.py deploy.py, then the testinfra checks in tests/infra;
    `with_backup`: the backup VMs too (lab.yaml backup_vms), with inventories/lab_backup.py."""
    lab = lab or load()
    names = [*lab.names, *(lab.backup if with_backup else [])]
    inventory = BACKUP_INVENTORY if with_backup else INVENTORY
    lab = up(lab, names, log=log)
    t0 = time.monotonic()
    log(f"==> converge: {rel(PYINFRA)} -y {rel(inventory)} deploy.py")
    r = subprocess.run([str(PYINFRA), "-y", str(inventory), "deploy.py"], cwd=REPO, env=lab_env())
    if r.returncode != 0:
        raise LabError(f"pyinfra failed (rc {r.returncode})")
    log(f"==> converge: pyinfra done in {time.monotonic() - t0:.0f} s")
    tests = [p for p in (REPO / "tests" / "infra").rglob("test_*.py")]
    if not tests:
        log("==> checks: tests/infra has no tests yet: nothing to check (OK)")
        return
    hosts = ",".join(f"paramiko://{n}" for n in names)
    argv = [
        str(PYTEST),
        "-p",
        "no:cacheprovider",
        "tests/infra",
        f"--hosts={hosts}",
        f"--ssh-config={SSH_CONFIG}",
        f"--inventory={rel(inventory)}",
    ]
    log(f"==> checks: {' '.join(rel(a) if a.startswith('/') else a for a in argv)}")
    r = subprocess.run(argv, cwd=REPO, env=lab_env())
    if r.returncode != 0:
        raise LabError(f"testinfra checks failed (rc {r.returncode})")
    log("==> checks passed")
