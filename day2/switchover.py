"""A planned switchover (runbooks/switchover.py): the primary of a replication group moves to one
of its replicas, with no acknowledged write lost, and the time writes were refused measured.

The engines' procedures are in day2/switchover_mariadb.py (GTID: the old primary goes
read-only, the new one applies its last GTID) and day2/switchover_postgresql.py (the old
primary shuts down cleanly, the new one replays its shutdown checkpoint). Shared here: the
arguments, the pre-checks that need no host, the new roles, the inventory change to print and
the report.

Arguments (`RUNBOOK`, read by day2/kit.py): `new_primary`, the replica that becomes the primary
(its group takes part, the other hosts of the inventory do not); `max_lag`, seconds.

Pre-checks, before any host is changed: the inventory matches the live topology (roles/topology),
`new_primary` names a replica of the group's primary, every host of the group answers and is
converged in this run (no --limit that leaves one out, checked whichever hosts take part), and the
new primary replicates from the primary and is at most `max_lag` seconds behind (each engine's
live checks).

The report: how long writes were refused (from the old primary refusing writes to the new
primary taking them, measured on the machine that runs pyinfra) and the inventory change to make.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from pyinfra import logger

from day2 import kit
from model.hostdata import HostConfig
from model.problems import Problem, format_problems
from operations import runtime
from roles import engine

DEFAULT_MAX_LAG = 30  # seconds a candidate may be behind before the switchover refuses
ENGINES = ("mariadb", "postgresql")
RUNBOOK = kit.Runbook(
    "runbooks/switchover.py",
    "the switchover",
    (
        kit.Parameter(
            "new_primary",
            "the replica that becomes the primary of its group",
            required=True,
            example="HOST",
            host=True,
        ),
        kit.Parameter(
            "max_lag",
            f"seconds the new primary may be behind, default {DEFAULT_MAX_LAG}",
            default=DEFAULT_MAX_LAG,
            parse=kit.whole_seconds,
            example="30",
        ),
    ),
    acts_on="new_primary",
)


def parse_max_lag(value: object) -> int:
    """The `max_lag` runbook argument (seconds, default DEFAULT_MAX_LAG); stops the run, naming
    it, on anything but a whole number of seconds."""
    if value is None or value == "":
        return DEFAULT_MAX_LAG
    try:
        return kit.whole_seconds(value)
    except ValueError as exc:
        problem = Problem(None, "max_lag", value, str(exc), "e.g. --data max_lag=30")
        raise runtime.Refused("\n" + format_problems([problem], what="before the switchover")) from None


def new_roles(group: engine.Group, new_primary: str) -> dict[str, HostConfig]:
    """Every host of the group with the role it has after the switchover."""
    out = {}
    for member in group.members:
        if member.name == new_primary:
            out[member.name] = replace(member, role="primary", primary=None)
        else:
            out[member.name] = replace(member, role="replica", primary=new_primary)
    return out


def inventory_change(group: engine.Group, new_primary: str) -> list[str]:
    """The lines to change in the inventory, one per host whose role or primary changes."""
    lines = []
    for name, after in new_roles(group, new_primary).items():
        before = next(m for m in group.members if m.name == name)
        if (before.role, before.primary) == (after.role, after.primary):
            continue
        if after.role == "primary":
            lines.append(f"{name}: role 'primary' (and no 'primary' key)")
        else:
            lines.append(f"{name}: role 'replica', primary {after.primary!r}")
    return lines


def plan_problems(
    cfg: HostConfig, group: engine.Group, new_primary: str | None, active: set[str]
) -> list[Problem]:
    """What stops the switchover before anything is read from the hosts (pure)."""
    if not new_primary:
        return [Problem(None, "new_primary", None, "missing", "run with --data new_primary=HOST")]
    names = {m.name: m for m in group.members}
    if new_primary not in names:
        return [
            Problem(
                None,
                "new_primary",
                new_primary,
                f"not a host of {cfg.name}'s replication group ({', '.join(names)})",
                "name a replica of the group's primary",
            )
        ]
    candidate = names[new_primary]
    if cfg.engine not in ENGINES:
        return [Problem(cfg.name, "engine", cfg.engine, "no switchover runbook for this engine", "")]
    problems = []
    if (
        candidate.role != "replica"
        or candidate.primary not in names
        or names[candidate.primary].role != "primary"
    ):
        problems.append(
            Problem(
                new_primary, "role", candidate.role, "the new primary must be a replica of the primary", ""
            )
        )
    fix = "run without --limit, or limit to the whole group"
    return problems + kit.left_out(names, active, f"of {new_primary}'s replication group", fix)


def lag_problem(new_primary: str, lag: object, max_lag: int) -> list[Problem]:
    """The candidate is too far behind (lag in seconds, or not a number)."""
    try:
        behind = float(str(lag))
    except ValueError:
        behind = None
    if behind is not None and behind <= max_lag:
        return []
    return [
        Problem(
            new_primary,
            "max_lag",
            max_lag,
            f"the new primary is {lag} s behind",
            "wait until it has caught up, or raise max_lag",
        )
    ]


class Report(kit.Report):
    """Times the switchover from the machine that runs pyinfra (steps "stop": the old primary
    stops taking writes, "promote": the new one takes them, "last") and prints the report."""

    def __init__(self, steps: dict, group: engine.Group, new_primary: str, refusing: str) -> None:
        super().__init__(steps)
        self.group, self.new_primary, self.refusing = group, new_primary, refusing
        self.times: dict[str, float] = {}

    def step_started(self, state_: object, step: str) -> None:
        if step == "stop":
            self.times["writes stopped"] = time.monotonic()

    def step_ended(self, state_: object, step: str) -> None:
        if step == "promote":
            self.times["writes taken"] = time.monotonic()
        if step == "last" and len(self.times) == 2:
            refused = self.times["writes taken"] - self.times["writes stopped"]
            old = self.group.primary.name if self.group.primary else "?"
            lines = [
                f"==> switchover done: {self.new_primary} is the primary of {self.group.me.cluster} "
                f"({self.group.me.engine}), {old} and the other hosts follow it",
                f"    writes were refused for {refused:.1f} s "
                f"({old} {self.refusing} until {self.new_primary} took writes)",
                "    update the inventory (a converge refuses until it matches):",
                *[f"      {line}" for line in inventory_change(self.group, self.new_primary)],
            ]
            logger.info("\n".join(lines))


def checked(
    cfg: HostConfig,
    group: engine.Group,
    new_primary: str,
    live_problems: Callable[[], list[Problem]],
) -> None:
    """Stop the run, before any change, when a plan or live pre-check fails (computed once per
    run for the group, from whichever host's deploy gets here first; `live_problems` reads the
    hosts)."""

    def compute() -> list[Problem]:
        return plan_problems(cfg, group, new_primary, kit.active()) or live_problems()

    problems = runtime.once_per_run(f"switchover {cfg.engine} {cfg.cluster}", compute)
    kit.refuse(problems, RUNBOOK.what)
