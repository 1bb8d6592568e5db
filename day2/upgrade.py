"""The release upgrade of one replication group from Debian 12 to 13, planned (`./dbzfs upgrade`).
Pure: the steps from the inventory's data, and the data each host has after each step.

Node by node, replicas first, the primary last through a switchover, so that the group's writes
stop only for a switchover's seconds (MariaDB) or for pg_upgradecluster's (PostgreSQL):

MariaDB, a primary P with replicas R1..Rn:
    release R1, converge R1, ..., release Rn, converge Rn,
    switchover to R1, release P, converge P (as R1's replica), switchover back to P.
  A release step upgrades the server with the system (10.11 -> 11.8) and runs mariadb-upgrade;
  an 11.8 replica replicates from a 10.11 primary (MariaDB supports the newer replica), never the
  other way, so the primary goes last.

PostgreSQL, a primary P with standbys S1..Sn:
    release S1, ..., release Sn (each keeps its cluster on 15: Debian leaves postgresql-15
    installed, and the standby streams on from its 15 primary), switchover to S1, release P (as
    S1's standby, on 15), major S1 (pg_upgradecluster --method=link: writes stop until 17 starts),
    reseed P and S2..Sn from S1 (runbooks/seed.py: a standby streams from the same major version
    only), converge each, switchover back to P.
  From the major step until a standby's reseed ends, the group has no failover target: the mixed
  window the report measures.

A group without replicas has its primary upgraded where it is: its writes stop for the whole
release step (and the major step), which the plan says.

Every step names its host; a release step is where the node's snapshot is taken (its rollback
point). The data each step's pyinfra run reads (`data_for`): debian_release moved from the
host's release step on (that runbook moves a host to the release its data says),
postgresql_version kept at the old major until the major step, the roles swapped by the
switchovers. The driver writes it as an inventory (kit.overridden_inventory_text); the operator's
inventory is edited once, at the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model import releases
from model.hostdata import HostConfig

KINDS = ("release", "converge", "switchover", "major", "reseed")


@dataclass(frozen=True)
class Step:
    kind: str  # one of KINDS
    host: str  # the host it acts on (switchover: the new primary; reseed: the standby)
    source: str | None = None  # reseed: the primary it copies
    writes_stop: bool = False  # the group's writes stop for its length (beyond a switchover's seconds)

    def describe(self) -> str:
        what = {
            "release": f"{self.host}: snapshot, Debian's release upgrade, the kernel's ZFS module, reboot",
            "converge": f"{self.host}: deploy.py with the new release's data, then the gates",
            "switchover": f"switchover to {self.host}",
            "major": f"{self.host}: pg_upgradecluster --method=link (writes stop until it starts)",
            "reseed": f"{self.host}: reseeded from {self.source} (runbooks/seed.py)",
        }[self.kind]
        return what + (
            " (the group's writes stop meanwhile: no replica to switch to)" if self.writes_stop else ""
        )


@dataclass(frozen=True)
class Plan:
    group: str
    engine: str
    primary: str
    members: tuple[str, ...]  # the primary first, then its replicas in inventory order
    old: releases.Release
    new: releases.Release
    steps: tuple[Step, ...]
    done: tuple[str, ...] = ()  # members already on the new release: left as they are


class PlanError(ValueError):
    """The group cannot be planned (the message says why, the fix how)."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


def group_members(hosts: Mapping[str, Mapping], name: str) -> tuple[HostConfig, list[HostConfig]]:
    """The primary and replicas of the replication group `name` names: the group's name (its
    cluster, e.g. "postgresql") or any member's host name."""
    configs = {h: HostConfig.from_data(h, d) for h, d in hosts.items()}
    databases = {h: c for h, c in configs.items() if c.engine and not c.is_backup_host}
    if name in databases:
        cluster = (databases[name].engine, databases[name].cluster)
    else:
        clusters = {(c.engine, c.cluster) for c in databases.values() if c.cluster == name}
        if len(clusters) != 1:
            groups = sorted({c.cluster for c in databases.values()})
            raise PlanError(
                f"{name!r} names no replication group of the inventory",
                f"name a group ({', '.join(groups)}) or one of its hosts",
            )
        cluster = clusters.pop()
    members = [c for c in databases.values() if (c.engine, c.cluster) == cluster]
    primaries = [c for c in members if c.role == "primary"]
    if len(primaries) != 1:
        raise PlanError(
            f"group {cluster[1]!r} has {len(primaries)} primaries", "validate the inventory first"
        )
    replicas = [c for c in members if c.role == "replica" and c.primary == primaries[0].name]
    return primaries[0], replicas


def plan(hosts: Mapping[str, Mapping], name: str, new: releases.Release = releases.TRIXIE) -> Plan:
    """The steps that move group `name` to release `new` (see the module's docstring). Members
    whose data already says `new` are done and skipped; a group whose members are all done has no
    steps (a no-op, not an error)."""
    primary, replicas = group_members(hosts, name)
    old = releases.previous(new)
    if old is None:
        raise PlanError(f"{new.label} is the oldest release the toolkit converges", "nothing to upgrade from")
    members = (primary, *replicas)
    unknown = [c for c in members if c.debian_release not in (old.major, new.major)]
    if unknown:
        raise PlanError(
            f"{unknown[0].name} says debian_release {unknown[0].debian_release!r}",
            f"a group moves from {old.label} to {new.label}",
        )
    done = tuple(c.name for c in members if c.debian_release == new.major and c.postgresql_version is None)
    todo = [c for c in replicas if c.name not in done]
    steps: list[Step] = []
    if primary.name in done and todo and primary.engine == "postgresql":
        # Its standbys' clusters cannot stream from it, and their release step needs the version
        # they still run: the upgrade that moved the primary resumes instead (--from).
        raise PlanError(
            f"{primary.name} runs {new.label} and PostgreSQL {new.postgresql}, its standbys "
            f"{', '.join(c.name for c in todo)} do not",
            "resume the upgrade that moved it (./dbzfs upgrade ... --from STEP, as its report said), "
            "or move each standby's data to the new release and reseed it (runbooks/seed.py)",
        )
    if primary.name in done:
        # The primary moved first (a group upgraded by hand, or a MariaDB replica promoted):
        # what is left is its replicas, each as a replica.
        steps += _replica_steps(todo)
    elif not replicas:
        steps += _alone(primary)
    elif primary.engine == "mariadb":
        steps += _mariadb(primary, replicas, done)
    else:
        steps += _postgresql(primary, replicas, done)
    return Plan(
        group=primary.cluster,
        engine=primary.engine,
        primary=primary.name,
        members=tuple(c.name for c in members),
        old=old,
        new=new,
        steps=tuple(steps),
        done=done,
    )


def _replica_steps(replicas: Sequence[HostConfig]) -> list[Step]:
    steps = []
    for r in replicas:
        steps += [Step("release", r.name), Step("converge", r.name)]
    return steps


def _alone(primary: HostConfig) -> list[Step]:
    steps = [Step("release", primary.name, writes_stop=True)]
    if primary.engine == "postgresql":
        steps.append(Step("major", primary.name, writes_stop=True))
    return [*steps, Step("converge", primary.name)]


def _mariadb(primary: HostConfig, replicas: list[HostConfig], done: tuple[str, ...]) -> list[Step]:
    steps = []
    for r in replicas:
        if r.name not in done:
            steps += [Step("release", r.name), Step("converge", r.name)]
    stand_in = replicas[0].name
    return [
        *steps,
        Step("switchover", stand_in),
        Step("release", primary.name),
        Step("converge", primary.name),
        Step("switchover", primary.name),
    ]


def _postgresql(primary: HostConfig, replicas: list[HostConfig], done: tuple[str, ...]) -> list[Step]:
    stand_in = replicas[0].name
    steps = [Step("release", r.name) for r in replicas if r.name not in done]
    steps += [Step("switchover", stand_in), Step("release", primary.name), Step("major", stand_in)]
    for other in [primary.name, *(r.name for r in replicas[1:])]:
        steps.append(Step("reseed", other, source=stand_in))
    steps += [Step("converge", name) for name in [stand_in, primary.name, *(r.name for r in replicas[1:])]]
    return [*steps, Step("switchover", primary.name)]


def data_after(p: Plan, count: int) -> dict[str, dict[str, object]]:
    """The overrides (host -> keys; None: the key removed) of the group's data once the first
    `count` steps of the plan are done."""
    changed: dict[str, dict[str, object]] = {}
    for i, step in enumerate(p.steps[:count]):
        if step.kind == "release":
            changed.setdefault(step.host, {})["debian_release"] = p.new.major
            if p.engine == "postgresql":
                # kept on the old major until the major step; None when no major step comes (the
                # host is reseeded from a primary that is on the new one already)
                later = any(s.kind == "major" for s in p.steps[i + 1 :])
                changed[step.host]["postgresql_version"] = p.old.postgresql if later else None
        elif step.kind == "major":
            for name in p.members:  # the standbys follow through their reseed
                changed.setdefault(name, {})["postgresql_version"] = None
        elif step.kind == "switchover":
            for name in p.members:
                changed.setdefault(name, {}).update(
                    {"role": "primary", "primary": None}
                    if name == step.host
                    else {"role": "replica", "primary": step.host}
                )
    return changed


def data_for(p: Plan, index: int) -> dict[str, dict[str, object]]:
    """The overrides step `index` runs with. A release step runs with its own change made: its
    runbook moves the host to the release its data says (and refuses any other difference). A
    switchover runs with the data before it: the inventory must match the live topology. The
    others with the data before them too."""
    return data_after(p, index + 1 if p.steps[index].kind == "release" else index)


def final_data(p: Plan) -> dict[str, dict[str, object]]:
    """What the operator sets in the inventory once the group is done: every member's release."""
    return {name: {"debian_release": p.new.major} for name in p.members}
