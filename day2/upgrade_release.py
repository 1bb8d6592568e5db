"""One host's release upgrade (runbooks/upgrade_release.py; `./dbzfs upgrade` runs it host by host
in day2/upgrade.py's order, with the data day2.upgrade.data_for gives).

The host's data already says the new release (debian_release "13"; a PostgreSQL host also
postgresql_version "15": its cluster stays on 15 until the group's major step); the host runs the
one before. The runbook refuses before any change (all at once, with day2/upgrade_probe.py's
refusals): a --data key but its own, a host that runs neither release, a source file that is not
Debian's and names the old release (its owner decides what it becomes), and what the probe finds.

Steps, on that host only:
 1. rsync (and kexec-tools for reboot_method "kexec") from the old release;
 2. the server stops (the replica's replication stops with it; a primary's writes stop: `./dbzfs
    upgrade` switches a primary over first);
 3. the rollback point: the engine's datasets snapshotted, the system copied into the pool and
    snapshotted (operations/upgrade.py says what it holds);
 4. the apt sources moved to the new release (day2/upgrade_sources.py);
 5. the release's packages: full-upgrade, the kernel metapackages (held ones too, held again), and
    PostgreSQL's new server beside the old one;
 6. the new kernel's ZFS module (DKMS built it in step 5; prebuilt: installed from the module
    repository, whose suite was moved in step 4); no module: stop, no reboot;
 7. the reboot into the new kernel (reboot_method);
 8. after it: the release, the pool ONLINE, the server running (MariaDB: mariadb-upgrade).
Each step finds where the host is: a run that was cut resumes (the snapshots are taken once, the
reboot only while the host runs its old kernel). A host already on the new release runs step 8
only.
"""

from __future__ import annotations

import os
from io import StringIO

from pyinfra import host, logger
from pyinfra.facts.files import File
from pyinfra.facts.server import LinuxDistribution
from pyinfra.operations import files, server

import engines
from day2 import kit, upgrade_probe, upgrade_sources
from facts.upgrade import AptSourceFiles, ScriptOutput
from model import releases
from model.hostdata import HostConfig
from model.problems import Problem
from operations import runtime, seeding as seeding_ops, upgrade as ops
from roles import engine

RUNBOOK = kit.Runbook(
    "runbooks/upgrade_release.py",
    "the release upgrade",
    (
        kit.Parameter(
            "host",
            "the host to move to the release its data says",
            required=True,
            example="db2",
            host=True,
        ),
    ),
    moves_release=True,
)
MODULE_PREFIX = "zfs-modules-"


def moved_sources(
    cfg: HostConfig, files_: dict[str, str], old: releases.Release, new: releases.Release
) -> tuple[dict[str, upgrade_sources.Moved], list[Problem]]:
    """Each source file moved to the new release (the prebuilt module repository is moved as
    Debian's archive is: `./dbzfs zfs-repo` names its suites after the releases), and a problem
    per file that names the old release in a source that is not Debian's."""
    mirrors = ()
    if cfg.zfs_install == "prebuilt" and cfg.module_repository:
        mirrors = (str(cfg.module_repository.get("url", "")),)
    moved, found = {}, []
    for path, text in files_.items():
        move = upgrade_sources.move_deb822 if path.endswith(".sources") else upgrade_sources.move_list
        m = move(text, old, new, mirrors)
        moved[path] = m
        for line in m.foreign:
            found.append(
                Problem(
                    cfg.name,
                    "apt sources",
                    path,
                    f"a source that is not Debian's archive names {old.codename}: {line}",
                    f"move it to {new.codename} by hand (its owner names its suites), or remove it",
                )
            )
    return moved, found


def _probe_name(path: str) -> str:
    return "sources.list" if path == "/etc/apt/sources.list" else os.path.basename(path)


def checked(cfg: HostConfig) -> tuple[releases.Release, releases.Release, dict, bool]:
    """The releases, the moved sources, and whether the step is still to do (its stamp absent:
    operations.upgrade.stamp_path); stops the run with every problem before any change. A host
    that says the new release without the stamp was cut mid-step: resumed, with no probe."""
    new = cfg.release
    old = releases.previous(new)
    running = releases.of_distribution(host.get_fact(LinuxDistribution))
    if old is None or running not in (old, new):
        raise runtime.Refused(f"{cfg.name}: runs {running.label if running else 'another system'}")
    stamp = host.get_fact(File, path=ops.stamp_path(ops.snapshot_name(old.codename, new.codename)))
    if running is new and stamp:
        return old, new, {}, False
    moved, found = moved_sources(cfg, host.get_fact(AptSourceFiles), old, new)
    if running is new:
        kit.refuse(found, RUNBOOK.what)
        logger.info(f"{cfg.name}: says {new.label} without its release step's stamp: resuming the step")
        return old, new, moved, True
    texts = {_probe_name(p): m.text for p, m in moved.items()}
    module = MODULE_PREFIX if cfg.zfs_install == "prebuilt" else None
    script = upgrade_probe.script(texts, cfg.pool.name if cfg.pool else None, module)
    probe = upgrade_probe.parse(host.get_fact(ScriptOutput, script=script))
    found += upgrade_probe.problems(cfg, new, probe)
    kit.refuse(found, RUNBOOK.what)
    logger.info(
        f"{cfg.name}: {old.label} -> {new.label}: {probe.counts} (upgraded, new, removed), "
        f"{upgrade_probe.gib(probe.need or 0)} GiB to download, kernel {probe.new_kernel}"
    )
    return old, new, moved, True


def run(args: dict) -> None:
    if host.name != args["host"]:
        return
    cfg = engine.host_config()
    old, new, moved, pending = checked(cfg)
    unit = engines.of(cfg).service  # PostgreSQL: the cluster of the version it runs
    if pending:
        steps(cfg, old, new, moved, unit)
    stamp = ops.stamp_path(ops.snapshot_name(old.codename, new.codename))
    server.shell(
        name=f"{cfg.name}: {new.label}, the pool ONLINE, {unit} running",
        commands=[ops.after_boot_script(new.major, cfg.pool.name, unit, cfg.engine, stamp)],
    )


def steps(cfg: HostConfig, old: releases.Release, new: releases.Release, moved: dict, unit: str) -> None:
    snapshot = ops.snapshot_name(old.codename, new.codename)
    tools = ["rsync"] + (["kexec-tools"] if cfg.reboot_method == "kexec" else [])
    engine.packages(f"{', '.join(tools)} from {old.label}", tools)
    seeding_ops.server_stopped(name=f"{cfg.name}: stop {unit}", unit=unit)
    ops.rollback_point(
        name=f"Rollback point @{snapshot}: {cfg.dataset_name(cfg.parent_dataset)} and the system's copy",
        engine_dataset=cfg.dataset_name(cfg.parent_dataset),
        pool=cfg.pool.name,
        snapshot=snapshot,
    )
    for path, m in moved.items():
        if not m.changed:
            continue
        if m.text.strip():
            files.put(name=f"{path} moved to {new.codename}", src=StringIO(m.text), dest=path)
        else:
            files.file(name=f"{path}: nothing left for {new.codename}", path=path, present=False)
    extra = [f"postgresql-{new.postgresql}"] if cfg.engine == "postgresql" else []
    server.shell(
        name=f"{new.label}'s packages (full-upgrade, the kernel, {', '.join(extra) or 'the server'})",
        commands=[ops.packages_script(new.codename, extra)],
    )
    module = MODULE_PREFIX if cfg.zfs_install == "prebuilt" else None
    server.shell(name="ZFS's module for the new kernel", commands=[ops.new_kernel_script(module)])
    ops.rebooted(name=f"Reboot into {new.label}'s kernel ({cfg.reboot_method})", method=cfg.reboot_method)
