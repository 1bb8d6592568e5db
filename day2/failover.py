"""A failover (runbooks/failover.py): the primary of a replication group is gone (its host or its
server down) and the replica that received the most takes its place; the others follow it.

Pre-checks, before any host is changed: `failed` names the group's primary in the inventory;
that primary's server does not answer, neither over SSH (when its host answers) nor on its port
seen from each replica (a primary that answers is switched over instead); every replica of the
group answers and takes part in the run; the new primary is the most advanced replica (GTID
positions received / WAL received), or the one named by `new_primary` when nothing is ahead of
it. Positions that cannot be ordered (MariaDB GTIDs of several domains, each ahead somewhere) refuse.

The failed primary's host is best left out of the run (`--exclude HOST`): pyinfra connects to
every host of the run before any deploy code runs, counts a host it cannot reach as failed and
exits 1 (and, without -y, asks whether to go on); left out, a failover that succeeds exits 0. Its
server is then judged from the replicas only (its port, seen from each). When its host takes part
and answers, the server is also asked over SSH; when it takes part and does not answer, the
failover goes on and the report says why pyinfra exits 1.

The old primary takes no part: when it comes back, its fence check (roles/fencing.py) keeps it
from starting as a primary while the new one takes writes, and it rejoins only by being
re-seeded (runbooks/seed.py). With full_page_writes off, pg_rewind cannot bring an old
PostgreSQL primary back (it needs full-page images or wal_log_hints), so re-seeding is the way.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyinfra import inventory, logger, state

from day2 import kit, switchover, switchover_mariadb, switchover_postgresql
from facts.mariadb import MariadbReplicaStatus
from facts.network import PortAnswers
from facts.postgresql import PostgresqlStandbyPosition
from model.hostdata import HostConfig
from model.problems import Problem
from operations import mariadb_topology, postgresql as pg, postgresql_topology, runtime
from roles import engine, render

RUNBOOK = kit.Runbook(
    "runbooks/failover.py",
    "the failover",
    (
        kit.Parameter(
            "failed",
            "the primary that is gone (its host may be down: leave it out with --exclude HOST)",
            required=True,
            example="HOST",
            host=True,
        ),
        kit.Parameter(
            "new_primary",
            "the replica to promote when nothing is ahead of it (default: the most advanced)",
            example="HOST",
            host=True,
        ),
    ),
    acts_on=None,  # the failed primary may be unreachable; its replicas are checked by plan_problems
)


# --- positions (pure) ---------------------------------------------------------------------------


def gtid_position(text: str) -> dict[int, int]:
    """A MariaDB GTID position "0-1-100,1-2-7" as domain -> sequence number."""
    out: dict[int, int] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        domain, _server, seq = part.split("-")
        out[int(domain)] = int(seq)
    return out


def gtid_at_least(a: dict[int, int], b: dict[int, int]) -> bool:
    """Whether position `a` holds everything `b` does, in every domain."""
    return all(a.get(domain, -1) >= seq for domain, seq in b.items())


def lsn(text: str) -> int:
    """A PostgreSQL LSN "16/B374D848" as a number (-1 for none)."""
    if not text:
        return -1
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def most_advanced(
    positions: dict[str, object], at_least: Callable[[object, object], bool], wanted: str | None
) -> tuple[str | None, list[Problem]]:
    """The replica to promote: `wanted` when nothing is ahead of it, else the first (inventory
    order) that holds everything every other holds; refused when none does."""
    names = list(positions)
    if wanted is not None:
        ahead = [n for n in names if n != wanted and not at_least(positions[wanted], positions[n])]
        if ahead:
            return None, [
                Problem(
                    wanted,
                    "new_primary",
                    wanted,
                    f"is behind {', '.join(ahead)}: promoting it would lose what they received",
                    f"promote {ahead[0]} (leave new_primary out to take the most advanced)",
                )
            ]
        return wanted, []
    for name in names:
        if all(at_least(positions[name], positions[other]) for other in names):
            return name, []
    shown = ", ".join(f"{n} at {positions[n]}" for n in names)
    return None, [
        Problem(
            None,
            "new_primary",
            None,
            f"no replica holds everything the others received ({shown})",
            "decide which one to promote and name it with --data new_primary=HOST",
        )
    ]


def plan_problems(
    group: engine.Group, failed: str | None, new_primary: str | None, active: set[str]
) -> list[Problem]:
    """What stops the failover before any host is read (pure)."""
    names = {m.name: m for m in group.members}
    if not failed:
        return [Problem(None, "failed", None, "missing", "name the primary that is gone: --data failed=HOST")]
    if failed not in names or names[failed].role != "primary":
        return [Problem(failed, "failed", failed, f"not the primary of {group.me.cluster}", "")]
    problems = []
    replicas = [m.name for m in group.members if m.role == "replica" and m.primary == failed]
    if not replicas:
        problems.append(Problem(failed, "failed", failed, "has no replica to take its place", ""))
    if new_primary is not None and new_primary not in replicas:
        problems.append(Problem(new_primary, "new_primary", new_primary, f"not a replica of {failed}", ""))
    fix = f"run without --limit, or limit to {failed}'s group; leave {failed} out with --exclude {failed}"
    return problems + kit.left_out(replicas, active, "which must follow the new primary", fix)


# --- live checks ----------------------------------------------------------------------------------


def _live_problems(group: engine.Group, failed: str, wanted: str | None) -> tuple[str | None, list[Problem]]:
    replicas = [m for m in group.members if m.role == "replica" and m.primary == failed]
    hosts = [inventory.get_host(m.name) for m in replicas]
    old = inventory.get_host(failed)
    active = {h.name for h in inventory.get_active_hosts()}
    mariadb_engine = group.me.engine == "mariadb"
    fact = MariadbReplicaStatus if mariadb_engine else PostgresqlStandbyPosition
    found = runtime.on_every_host(hosts, lambda h: h.get_fact(fact))
    problems = []
    if failed in active and old.get_fact(fact) is not None:
        answers = "its server answers: it is not gone"
        problems.append(Problem(failed, "failed", failed, answers, "use runbooks/switchover.py"))
    # Seen from the replicas, over the replication network: a replication thread may still show
    # "running" for up to its timeout after its primary died, so the port is asked directly.
    old_cfg = next(m for m in group.members if m.name == failed)
    port = render.MARIADB_PORT if mariadb_engine else render.PG_PORT
    probes = runtime.on_every_host(
        hosts, lambda h: h.get_fact(PortAnswers, address=old_cfg.replication_address, port=port)
    )
    positions = {}
    for member, status, open_ in zip(replicas, found, probes, strict=True):
        if status is None:
            down = "the server does not answer"
            problems.append(Problem(member.name, "host", member.name, down, "start it"))
            continue
        if open_:
            problems.append(
                Problem(
                    member.name,
                    "failed",
                    failed,
                    f"{failed}'s server still answers on {old_cfg.replication_address}:{port} "
                    f"(seen from {member.name}): it is not gone",
                    "use runbooks/switchover.py, or stop it first",
                )
            )
        if mariadb_engine:
            positions[member.name] = gtid_position(status.get("Gtid_IO_Pos", ""))
        else:
            positions[member.name] = max(lsn(status.get("received", "")), lsn(status.get("replayed", "")))
    if problems:
        return None, problems
    at_least = gtid_at_least if mariadb_engine else (lambda a, b: a >= b)
    return most_advanced(positions, at_least, wanted)


# --- the run --------------------------------------------------------------------------------------


class Report(kit.Report):
    """Times the promotion from the machine that runs pyinfra (steps "promote", "last") and
    prints the report at the end."""

    def __init__(self, steps: dict, group: engine.Group, failed: str, new: str, unreachable: bool):
        super().__init__(steps)
        self.group, self.failed, self.new, self.unreachable = group, failed, new, unreachable
        self.promoting: float | None = None
        self.promoted: float | None = None

    def step_started(self, state_: object, step: str) -> None:
        if step == "promote":
            self.promoting = time.monotonic()

    def step_ended(self, state_: object, step: str) -> None:
        if step == "promote":
            self.promoted = time.monotonic()
        if step == "last" and self.promoting and self.promoted:
            took = self.promoted - self.promoting
            logger.info("\n".join(report_lines(self.group, self.failed, self.new, took, self.unreachable)))


def report_lines(group: engine.Group, failed: str, new: str, took: float, unreachable: bool) -> list[str]:
    lines = [
        f"==> failover done: {new} is the primary of {group.me.cluster} "
        f"({group.me.engine}) in place of {failed}; the other replicas follow it",
        f"    the promotion took {took:.1f} s",
        f"    {failed} is fenced: it refuses to start as a primary while {new} takes writes",
        "    update the inventory (a converge refuses until it matches):",
        *[f"      {line}" for line in switchover.inventory_change(group, new)],
        f"    then rejoin {failed} as a replica by re-seeding it: "
        f"pyinfra INVENTORY runbooks/seed.py --data host={failed} --data wipe=yes",
    ]
    if unreachable:
        lines.append(
            f"    pyinfra exits 1 for this run: {failed} did not answer SSH, and pyinfra counts a host it "
            f"cannot reach as failed. Leave it out (--exclude {failed}) and a failover exits 0."
        )
    return lines


def run(args: dict) -> None:
    """The failover's steps for this host. `args`: kit.start(RUNBOOK)."""
    cfg = engine.host_config()
    failed = args.get("failed")
    configs = {h.name: HostConfig.from_data(h.name, h.data) for h in inventory}
    if failed not in configs:
        problem = Problem(None, "failed", failed, "not a host of the inventory", "")
        if not failed:
            fix = "name the primary that is gone: --data failed=HOST"
            problem = Problem(None, "failed", None, "missing", fix)
        kit.refuse([problem], RUNBOOK.what)
    target = configs[failed]
    group = engine.group(target)
    wanted = args.get("new_primary") or None

    def compute() -> tuple[str | None, list[Problem]]:
        problems = plan_problems(group, failed, wanted, kit.active())
        return (None, problems) if problems else _live_problems(group, failed, wanted)

    # Once per run, whichever host's deploy gets here first (a --limit that leaves the group out
    # is refused, not a run that plans nothing).
    new_primary, problems = runtime.once_per_run(f"failover {target.engine} {target.cluster}", compute)
    kit.refuse(problems, RUNBOOK.what)
    if (cfg.engine, cfg.cluster) != (target.engine, target.cluster) or cfg.name == failed:
        return
    group = engine.group(cfg)
    survivors = engine.Group(cfg, tuple(m for m in group.members if m.name != failed))
    steps = _mariadb_steps if cfg.engine == "mariadb" else _postgresql_steps
    promote, last = steps(cfg, survivors, new_primary)
    unreachable = any(h.name == failed for h in state.failed_hosts)
    report = Report({"promote": promote, "last": last}, group, failed, new_primary, unreachable)
    kit.report_once("failover report", report)


def _mariadb_steps(cfg: HostConfig, survivors: engine.Group, new_primary: str):
    promote = engine.step(
        cfg.name == new_primary,
        "not the new primary",
        mariadb_topology.take_over,
        name=f"{new_primary} applies everything it received and takes writes",
    )
    return promote, switchover_mariadb.follow_new_primary(cfg, survivors, new_primary)


def _postgresql_steps(cfg: HostConfig, survivors: engine.Group, new_primary: str):
    is_new = cfg.name == new_primary
    for member in survivors.members:
        if member.name != new_primary:
            engine.step(
                is_new,
                "not the new primary",
                pg.replication_slot,
                name=f"Replication slot for {member.name} on {new_primary}",
                slot=pg.slot_name(member.name),
            )
    promote = engine.step(
        is_new,
        "not the new primary",
        postgresql_topology.take_over,
        name=f"{new_primary} replays everything it received and is promoted",
    )
    return promote, switchover_postgresql.follow_new_primary(cfg, survivors, new_primary, stale_slots=[])
