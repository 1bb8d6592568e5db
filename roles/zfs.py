"""The storage role: ZFS installed, the host's drives found by id and checked, a striped-mirror
pool, the engine's datasets, sized module parameters, a scrub schedule and a capacity guard."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.facts.server import Command, KernelVersion, LinuxDistribution
from pyinfra.operations import apt, files, server

import engines
from facts.drives import DrivesByPattern
from facts.zfs import ModuleRepositoryPackages, ZpoolProperties, ZpoolTopology
from model import releases
from model.hostdata import HostConfig
from model.zfs_properties import BLOCKS_COMPRESSION
from operations import accounts, runtime, units, zfs as zfs_ops, zpool
from roles import engine, render, zfs_packages
from roles.engine import sized_for_this_host

# The engine's service account, created here with the same attributes Debian's packages use so
# that the dataset mountpoints can be owned by it before the server is installed.
SERVICE_USERS = {name: dataclasses.asdict(e.service_user) for name, e in engines.ENGINES.items()}


def resolve_drives(cfg: HostConfig) -> list[str] | None:
    """The host's pool drives as /dev/disk/by-id paths, in mirror order; None when the pool
    exists and some of its drives are gone (warned about: the pool is left as it is). Stops the
    deploy when the pattern matches no drive, more than the declared count, or fewer for a pool
    still to be created."""
    if cfg.drives:
        return list(cfg.drives)
    found = host.get_fact(DrivesByPattern, pattern=cfg.drive_pattern)
    if len(found) == cfg.drive_count:
        return found
    if 0 < len(found) < cfg.drive_count:
        # A host waiting for a replacement drive must still take every other change.
        topology = host.get_fact(ZpoolTopology, pool=cfg.pool.name)
        if topology is not None:
            logger.warning(short_of_drives_warning(cfg, topology, found))
            return None
    raise drive_count_refusal(cfg, found)


def drive_count_refusal(cfg: HostConfig, found: list[str]) -> runtime.Refused:
    shown = ", ".join(p.rsplit("/", 1)[-1] for p in found[:6]) + (" ..." if len(found) > 6 else "")
    return runtime.Refused(
        f"{host.name}: drive_pattern {cfg.drive_pattern!r} matches {len(found)} drive(s) under "
        f"/dev/disk/by-id, drive_count is {cfg.drive_count} ({shown or 'none'}). Check the "
        "pattern (ls -l /dev/disk/by-id) or the hardware; nothing was changed."
    )


def pool_state(cfg: HostConfig, topology: dict) -> str:
    if topology["state"]:
        return topology["state"]
    props = host.get_fact(ZpoolProperties, pool=cfg.pool.name) or {}
    return props.get("health", {}).get("value", "in an unknown state")


def short_of_drives_warning(cfg: HostConfig, topology: dict, found: list[str]) -> str:
    """What the converge says of a pool whose drives drive_pattern no longer all matches: a drive
    that is gone (put a new one in, the runbook), or a drive that is there, in the pool, but named
    by the inventory in no way (a replacement of another model or serial that ZED's autoreplace
    took into a failed drive's bay: the inventory is what must change)."""
    name = cfg.pool.name
    unnamed, missing, devices = zpool.unnamed_members(topology, found)
    problems = zpool.health_problems(topology)
    text = (
        f"{host.print_prefix}pool {name} is {pool_state(cfg, topology)} and drive_pattern "
        f"{cfg.drive_pattern!r} matches {len(found)} drive(s), drive_count is {cfg.drive_count}; "
    )
    if unnamed:
        text += (
            f"the pool holds {len(unnamed)} drive(s) the inventory does not name: "
            + ", ".join(f"{disk} ({devices[disk]})" for disk in unnamed)
            + " (there and in the pool, outside drive_pattern: e.g. a replacement drive of another "
            "model or serial that autoreplace took into a failed drive's bay)"
        )
        if missing:
            text += f"; pool drives missing from /dev/disk/by-id: {', '.join(missing)}"
    else:
        text += (
            f"pool drives missing from /dev/disk/by-id: {', '.join(missing) or 'none (check drive_pattern)'}"
        )
    text += (f"; zpool status: {'; '.join(problems)}" if problems else "") + ". The pool is left as it is; "
    if unnamed:
        text += "no drive needs replacing for that: " + zpool.INVENTORY_NAMES_THEM.format(
            drives=", ".join(unnamed), pool=name
        )
        if missing:
            text += f"; and put a new drive in for the missing one: {zpool.replace_runbook(host.name)}"
        return text + " (docs/runbooks/replace_drive.md)."
    return (
        text + f"put a new drive in and replace the missing one: {zpool.replace_runbook(host.name)} "
        "(docs/runbooks/replace_drive.md)."
    )


NVME_MULTIPATH = "/sys/module/nvme_core/parameters/multipath"


def multipath_warning(cfg: HostConfig, multipath: str | None) -> str | None:
    """autoreplace on with the kernel's native NVMe multipath on (Debian's default): each drive is
    a virtual multipath head with no bus path, ZFS records no phys_path for it, and ZED cannot tell
    that a new drive sits in a failed drive's bay (tried in the lab: autoreplace did nothing until
    the guests booted with nvme_core.multipath=N)."""
    if cfg.pool.autoreplace != "on" or (multipath or "").strip() != "Y":
        return None
    return (
        f"{host.print_prefix}zpool_autoreplace is on, but NVMe multipath is on in the kernel "
        f"({NVME_MULTIPATH} = Y): ZFS records no physical path for the pool's drives and ZED will "
        "not take a new drive put in a failed drive's bay. Boot with nvme_core.multipath=N "
        "(single-ported drives lose nothing), or replace drives with runbooks/replace_drive.py "
        "(docs/runbooks/replace_drive.md)."
    )


@deploy("Install ZFS")
def install(cfg: HostConfig) -> None:
    try:
        release = zfs_packages.release(host.get_fact(LinuxDistribution), cfg.debian_release)
        installed = engine.installed_packages()
        kernel = host.get_fact(KernelVersion)
        if cfg.zfs_install == "prebuilt":
            packages = _prebuilt_packages(cfg, kernel, installed)
        else:
            headers = zfs_packages.header_packages(kernel, installed)
    except zfs_packages.InstallError as e:
        raise runtime.Refused(f"{host.name}: {e}; nothing was changed.") from None
    if cfg.zfs_install == "prebuilt":
        repo = cfg.module_repository
        files.put(
            name="Signing key of the ZFS module repository",
            src=str(Path(repo["key_file"]).expanduser()),
            dest=zfs_packages.MODULE_REPOSITORY_KEYRING,
            mode="644",
        )
        apt.repo(
            name=f"ZFS module repository {repo['url']}",
            src=zfs_packages.repository_source(repo["url"], repo["suite"]),
            filename="dbzfs-zfs-modules",
        )
        engine.packages(
            f"ZFS module for Linux {kernel.strip()} and the matching tools, prebuilt (nothing compiles)",
            packages,
            installed=installed,
            max_list_age=0,
        )  # lists of the source just added
    else:
        _install_dkms(release, headers, installed)
    server.modprobe(name="Load the zfs module", module="zfs")
    # zfsutils-linux loads the module at boot with this unit; make sure nobody disabled it.
    units.service(name="Load zfs at boot", unit="zfs-load-module.service", enabled=True)


def _prebuilt_packages(cfg: HostConfig, release: str, installed: dict) -> list[str]:
    """The pinned module and tools; the repository's index is read only when the module for the
    running kernel is not installed yet."""
    repo = cfg.module_repository
    index, error = None, ""
    if not installed.get(zfs_packages.module_package(release)):
        answer = host.get_fact(ModuleRepositoryPackages, url=repo["url"], suite=repo["suite"])
        index, error = answer.get("packages"), answer.get("error", "")
    return zfs_packages.prebuilt_packages(release, repo["url"], index, installed, error)


def _install_dkms(release: releases.Release, headers: list[str], installed: dict) -> None:
    source = zfs_packages.zfs_source(release)
    for other in zfs_packages.other_sources(release):  # left by a host's earlier release
        files.file(name=f"No {other.name} (another release's ZFS source)", path=other.path, present=False)
    apt.repo(name=source.name, src=source.line, filename=source.filename)
    # The package lists are refreshed only when something must be installed (engine.packages),
    # so that a converge of an installed host changes nothing.
    engine.packages(
        "Kernel headers for the ZFS module build (running kernel, kernel metapackages)",
        headers,
        installed=installed,
        max_list_age=0,
    )  # lists of the source just added
    engine.packages(
        f"ZFS from {release.zfs_suite} (DKMS builds the module: minutes)",
        zfs_packages.ZFS_PACKAGES,
        installed=installed,
        extra_install_args=source.install_args,
    )


@deploy("Pool")
def pool(cfg: HostConfig) -> None:
    drives = resolve_drives(cfg)
    if drives is None:
        return
    vdevs, spares = cfg.pool.layout(drives)
    zpool.pool(
        name=f"Pool {cfg.pool.name}: {len(vdevs)} x {cfg.pool.mirror_width}-way mirror"
        + (f" + {len(spares)} spare(s)" if spares else ""),
        pool_name=cfg.pool.name,
        vdevs=vdevs,
        spares=spares,
        ashift=cfg.pool.ashift,
        properties={"autoreplace": cfg.pool.autoreplace, "autotrim": cfg.pool.autotrim},
        wipe=cfg.wipe_drives,
        exact_pairs=bool(cfg.drives),  # found by drive_pattern: a replaced drive keeps its mirror
    )


@deploy("Datasets")
def datasets(cfg: HostConfig) -> None:
    account = SERVICE_USERS[cfg.engine]
    accounts.system_account(
        name=f"Service account {account['user']} (and its group)",
        account=account["user"],
        home=account["home"],
        shell=account["shell"],
    )
    # The pool's root dataset holds no data and is not mounted [Let's Encrypt]; the engine's
    # datasets set their own mountpoints.
    zfs_ops.dataset(
        name=f"Dataset {cfg.pool.name} (not mounted)",
        dataset_name=cfg.pool.name,
        properties={"canmount": "off", "mountpoint": "none"},
    )
    for relative, props in cfg.datasets.items():
        # ZFS never recompresses what it wrote: the compression the blocks were written with is
        # recorded at creation (and by runbooks/rewrite_compression.py), not read from a property
        # a converge may change.
        on_create = (
            {BLOCKS_COMPRESSION: cfg.compression_of(relative)} if relative in cfg.child_datasets else None
        )
        zfs_ops.dataset(
            name=f"Dataset {cfg.dataset_name(relative)}",
            dataset_name=cfg.dataset_name(relative),
            properties=props,
            on_create=on_create,
        )
    for relative in cfg.child_datasets:
        files.directory(
            name=f"Owner of {cfg.mountpoint(relative)}",
            path=cfg.mountpoint(relative),
            user=account["user"],
            group=account["user"],
            mode=account["mode"],
        )


@deploy("ZFS module parameters")
def module_parameters(cfg: HostConfig) -> None:
    context = render.zfs_modprobe_context(cfg, sized_for_this_host(cfg))
    engine.config_file("zfs.conf.j2", context, "/etc/modprobe.d/zfs.conf")
    zfs_ops.module_parameters(
        name="Apply them to the loaded module", params=context["params"], write_file=False
    )


@deploy("Scrub and capacity")
def scrub_and_capacity(cfg: HostConfig) -> None:
    # ZED puts a hot spare in for a faulted or removed drive and, with autoreplace on, takes a new
    # drive in the same bay into the pool; without it a spare is only ever used by hand.
    if cfg.zed_email:
        engine.packages("mail for ZED's notices (zed_email)", ["bsd-mailx"])
    engine.config_file("zed.rc.j2", render.zed_context(cfg), "/etc/zfs/zed.d/zed.rc")
    units.service(
        name="ZFS event daemon (hot spares, autoreplace)",
        unit="zfs-zed.service",
        enabled=True,
        running=True,
    )
    warning = multipath_warning(cfg, host.get_fact(Command, f"cat {NVME_MULTIPATH} 2>/dev/null || true"))
    if warning:
        logger.warning(warning)
    units.service(
        name=f"Monthly scrub of {cfg.pool.name}",
        unit=f"zfs-scrub-monthly@{cfg.pool.name}.timer",
        enabled=True,
        running=True,
    )
    props = host.get_fact(ZpoolProperties, pool=cfg.pool.name)
    if props:
        used = int(props["capacity"]["value"])
        if used > cfg.capacity_threshold:
            logger.warning(
                f"{host.print_prefix}pool {cfg.pool.name} is {used}% full, above "
                f"zfs_capacity_threshold {cfg.capacity_threshold}%: ZFS and the "
                "flash slow down as free space shrinks; add mirrors or free space"
            )


@deploy("ZFS software")
def software() -> None:
    install(engine.host_config())


@deploy("ZFS storage")
def storage() -> None:
    cfg = engine.host_config()
    pool(cfg)
    datasets(cfg)
    module_parameters(cfg)
    scrub_and_capacity(cfg)
