"""Rewriting a host's datasets with the compression its data declares (runbooks/rewrite_compression.py;
`./dbzfs roll` runs it after each host's converge).

ZFS compresses a block when it writes it and never again: a converge that changes
`zfs_compression` reaches new blocks only. Each engine dataset records the compression its blocks
were written with (model.zfs_properties.BLOCKS_COMPRESSION, set at creation and by this
rewrite); where it differs from what the data declares, the dataset is copied on the pool with the
new compression (operations/rewrite.py), the server stopped for the last incremental copy and
the swap, then started on the rewritten datasets.

One host per run (`--data host=HOST`, day2/kit.py): each rewrite stops the host's server for its
swap, so several hosts at once, a group's primary and replicas together, would stop a group.
A primary is refused unless `--data allow_primary=yes` says so (its writes are refused during the
swap): `./dbzfs roll` rewrites a primary as a replica, switched over first (roll_primary =
"switchover"), and passes allow_primary=yes for a primary it converges in place.

Pre-checks, before the host is changed: the live datasets already get the declared compression
for new blocks (a converge ran), and the pool has the space for the copies without crossing
zfs_capacity_threshold (it says how much it needs). A dataset without the record (created before
dbzfs recorded it) is not rewritten: the run names it and how to record what its blocks hold.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyinfra import host, inventory, logger
from pyinfra.operations import systemd

from day2 import kit, seeding
from facts.zfs import ZfsDatasetProperties, ZpoolProperties
from model.hostdata import HostConfig
from model.problems import Problem
from model.zfs_properties import BLOCKS_COMPRESSION, same_value
from operations import rewrite, runtime, seeding as seeding_ops
from roles import engine, snapshots

GIB = 1024**3
RUNBOOK = kit.Runbook(
    "runbooks/rewrite_compression.py",
    "the compression rewrite",
    (
        kit.Parameter(
            "host",
            "the host whose datasets are rewritten (one per run)",
            required=True,
            example="HOST",
            host=True,
        ),
        kit.Parameter(
            "allow_primary",
            "yes: the host may be its group's primary (its writes are refused during the swap)",
            default=False,
            parse=kit.yes_no,
            example="yes",
        ),
    ),
)


@dataclass(frozen=True)
class Target:
    relative: str
    live: str
    wanted: str  # the compression the data declares for it
    recorded: str | None  # what its blocks were written with; None: not recorded
    used: int  # bytes on the pool


def _value(props: dict, name: str) -> str | None:
    value = props.get(name, {}).get("value")
    return None if value in (None, "-", "") else value


def targets(cfg: HostConfig, found: dict) -> list[Target]:
    """The engine's data and log datasets that exist, with what they hold and what is wanted."""
    out = []
    for relative in cfg.child_datasets:
        live = cfg.dataset_name(relative)
        props = found.get(live)
        if props is None:
            continue
        out.append(
            Target(
                relative,
                live,
                cfg.compression_of(relative),
                _value(props, BLOCKS_COMPRESSION),
                int(_value(props, "used") or 0),
            )
        )
    return out


def to_rewrite(found_targets: list[Target]) -> list[Target]:
    return [
        t
        for t in found_targets
        if t.recorded is not None and not same_value("compression", t.wanted, t.recorded)
    ]


def space_needed(rewrite_these: list[Target]) -> int:
    """What the copies take while both exist: what the datasets use now (a copy with a better
    compression takes less; one with a worse one is refused by the threshold soon enough)."""
    return sum(t.used for t in rewrite_these)


def problems(cfg: HostConfig, found: dict, pool: dict | None) -> list[Problem]:
    """Why the host's datasets cannot be rewritten now, every reason at once."""
    found_targets = targets(cfg, found)
    rewrite_these = to_rewrite(found_targets)
    out = []
    for t in rewrite_these:
        live = _value(found.get(t.live, {}), "compression")
        if not same_value("compression", t.wanted, live):
            out.append(
                Problem(
                    cfg.name,
                    "zfs_compression",
                    t.wanted,
                    f"{t.live} still gets compression={live} for new blocks",
                    "converge the host first (./dbzfs deploy or ./dbzfs roll)",
                )
            )
    if rewrite_these and pool is not None:
        size = int(_value(pool, "size") or 0)
        allocated = int(_value(pool, "allocated") or 0)
        needed = space_needed(rewrite_these)
        limit = size * cfg.capacity_threshold // 100
        if size and allocated + needed > limit:
            out.append(
                Problem(
                    cfg.name,
                    "zfs_capacity_threshold",
                    cfg.capacity_threshold,
                    f"the copies need {needed / GIB:.1f} GiB; pool {cfg.pool.name} has "
                    f"{max(limit - allocated, 0) / GIB:.1f} GiB below the threshold "
                    f"({allocated / GIB:.1f} of {size / GIB:.1f} GiB allocated)",
                    "free space on the pool, or rewrite when it has it",
                )
            )
    return out


def host_problems(target: HostConfig, allow_primary: bool) -> list[Problem]:
    """A group's primary is rewritten only when asked (pure)."""
    if target.role != "primary" or allow_primary:
        return []
    return [
        Problem(
            target.name,
            "host",
            target.name,
            "is its group's primary: its server stops for the swap, and writes are refused meanwhile",
            "./dbzfs roll INVENTORY --limit "
            f"{target.name} (it switches the primary over to a replica first), or --data allow_primary=yes",
        )
    ]


def run(args: dict) -> None:
    """The rewrite on the host named; nothing on the others. `args`: kit.start(RUNBOOK)."""
    name = args.get("host")
    target = HostConfig.from_data(name, inventory.get_host(name).data)
    refused = runtime.once_per_run(
        f"rewrite {name}", lambda: host_problems(target, bool(args.get("allow_primary")))
    )
    kit.refuse(refused, RUNBOOK.what)
    if host.name != name:
        return
    cfg = engine.host_config()
    if cfg.pool is None:
        return
    names = [cfg.dataset_name(r) for r in cfg.child_datasets]
    found = host.get_fact(ZfsDatasetProperties, datasets=names)
    found_targets = targets(cfg, found)
    for t in found_targets:
        if t.recorded is None:
            logger.warning(
                f"{host.print_prefix}{t.live}: the compression of its blocks is not recorded (created "
                f"before dbzfs recorded it); not rewritten. If you know it: zfs set "
                f"{BLOCKS_COMPRESSION}=VALUE {t.live}"
            )
    rewrite_these = to_rewrite(found_targets)
    leftovers = host.get_fact(
        ZfsDatasetProperties, datasets=[rewrite.aside_name(t.live) for t in found_targets]
    )
    if not rewrite_these and not leftovers:
        return
    found_problems = problems(cfg, found, host.get_fact(ZpoolProperties, pool=cfg.pool.name))
    kit.refuse(found_problems, RUNBOOK.what)
    for t in rewrite_these:
        logger.info(
            f"{host.print_prefix}{t.live}: blocks written with {t.recorded}, rewritten with {t.wanted} "
            f"({t.used / GIB:.2f} GiB)"
        )
    steps(cfg, rewrite_these, found_targets)


def steps(cfg: HostConfig, rewrite_these: list[Target], found_targets: list[Target]) -> None:
    """The copies, the stop, the swap (only for datasets still to rewrite: a run cut after a swap
    leaves those done alone), then the server started and what the rewrite left destroyed."""
    unit = seeding.engine_of(cfg).unit
    if rewrite_these:
        received = {t.live: {**cfg.datasets[t.relative], BLOCKS_COMPRESSION: t.wanted} for t in rewrite_these}
        rewrite.full_copy(name="Full copy with the new compression (the server runs)", datasets=received)
        seeding_ops.server_stopped(name=f"{unit} stopped for the last copy", unit=unit)
        rewrite.final_copy(
            name="The writes since, copied with the server stopped",
            datasets={t.live: t.wanted for t in rewrite_these},
        )
        seeding_ops.put_in_place(
            name="The rewritten datasets in place of the live ones",
            datasets=[
                {"live": t.live, "seed": rewrite.copy_name(t.live), "aside": rewrite.aside_name(t.live)}
                for t in rewrite_these
            ],
            snapshot=rewrite.DONE,
        )
    wanted = {t.live: t.wanted for t in found_targets}
    seeding_ops.mounted(name="Datasets mounted", datasets=list(wanted))
    systemd.service(name=f"{unit} running", service=unit, running=True)
    rewrite.cleaned_up(name="The datasets swapped out and the rewrite's snapshots destroyed", datasets=wanted)
    snapshots.retaken(cfg)
