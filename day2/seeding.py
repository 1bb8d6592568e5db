"""Seeding a replica from ZFS snapshots of another member of its replication group
(runbooks/seed.py): instead of pg_basebackup or mariadb-dump, the source's data and log datasets
are snapshotted consistently and sent host to host with `zfs send | ssh | zfs recv`, then an
incremental send catches up, and the replica starts from the received datasets.

Names, on the replica: each live dataset (e.g. dbpool/datastore/postgresql) is received beside
itself as LIVE-seed, the live one is renamed aside to LIVE-replaced, LIVE-seed takes its name;
the snapshots are @dbzfs-seed-REPLICA-full and @dbzfs-seed-REPLICA-catchup on both sides. The
names are the same in every run, so a run that was cut resumes where it stopped.

Pre-checks, before any host is changed (all problems at once): the replica and the source are
members of one replication group, the replica declared a replica with a primary; the source's
server answers and is what the inventory says it is (a primary, or a replica that replicates);
the group's primary answers as a primary; the replica's server is installed, its data directory
holds no database unless `--data wipe=yes`, its pool has room for the source's
datasets, nothing is in the way of the names above; the service account has the same ids on both
hosts (received files keep their owner ids); --limit includes every host that takes part.

The transfer (the key, the sends' receive, the datasets put in place, the cleanup) is
day2/transfer.py's, shared with a MariaDB restore. Steps (every host of the group passes every
step; hosts of other groups take no part):
 1. the replica's server stops;
 2. a one-time key (made here, kept in memory only) is authorized on the replica for the receive
    wrapper only, its private half and the replica's pinned host key go to the source's tmpfs;
 3. a consistent snapshot of the source (PostgreSQL: the replica's slot on the primary first);
 4. a full send into the seed datasets;
 5. a second snapshot and an incremental send to catch up;
 6. the replica's live datasets renamed aside, the seed renamed into place, the declared
    properties applied (operations.zfs.dataset, as roles/zfs.py), mounted and owned;
 7. the server starts as a replica of the group's primary from the snapshot's position;
 8. it is checked to replicate;
 9. cleanup: the key gone from both hosts, the seed snapshots destroyed, the datasets renamed
    aside destroyed with `wipe=yes`. A host that fails a step has its key removed
    at once by the report's error handler; the snapshots stay for a re-run to resume from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pyinfra import inventory, logger
from pyinfra.api import HiddenValue
from pyinfra.api.host import Host
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files

from day2 import kit, transfer
from day2.transfer import Dataset, database_held, gib, one_time_key
from facts.mariadb import MariadbLiveRole
from facts.postgresql import PostgresqlWalReceiver
from facts.seeding import HOST_KEY, SeedHostState
from facts.zfs import ZfsDatasetProperties
from model.hostdata import HostConfig
from model.problems import Problem
from operations import (
    common,
    postgresql as pg,
    postgresql_topology,
    runtime,
    seeding as ops,
)
from roles import engine, mariadb, postgresql, render, snapshots
from roles.zfs import SERVICE_USERS

RUNBOOK = kit.Runbook(
    "runbooks/seed.py",
    "the seeding",
    (
        kit.Parameter(
            "host",
            "the replica to seed, declared a replica of its group's primary",
            required=True,
            example="HOST",
            host=True,
            formerly=("replica",),
        ),
        kit.Parameter(
            "source", "the member to copy (default: the replica's primary)", example="HOST", host=True
        ),
        kit.Parameter(
            "wipe",
            "yes: replace a data directory that holds a database",
            default=False,
            parse=kit.yes_no,
            example="yes",
        ),
    ),
)
SPACE_MARGIN = transfer.SPACE_MARGIN


@dataclass(frozen=True)
class Engine:
    label: str
    unit: str
    server_binary: str
    live_fact: type


LIVE_FACTS = {"postgresql": PostgresqlWalReceiver, "mariadb": MariadbLiveRole}
ENGINES = LIVE_FACTS  # the engines a replica can be seeded for


def engine_of(cfg: HostConfig) -> Engine:
    """What seeding needs of a host's server, on its release."""
    if cfg.engine == "postgresql":
        c = postgresql.cluster(cfg)
        return Engine("PostgreSQL", c.unit, c.server_binary, PostgresqlWalReceiver)
    return Engine("MariaDB", mariadb.SERVICE, mariadb.SERVER_BINARY, MariadbLiveRole)


@dataclass(frozen=True)
class Plan:
    replica: HostConfig
    source: HostConfig
    primary: HostConfig
    wipe: bool
    datasets: tuple[Dataset, ...]  # the data dataset first, then the log dataset

    @property
    def engine(self) -> Engine:
        return engine_of(self.replica)

    def snapshot(self, which: str) -> str:
        slug = "".join(c if c.isalnum() or c in "_.-" else "_" for c in self.replica.name)
        return f"dbzfs-seed-{slug}-{which}"

    @property
    def full(self) -> str:
        return self.snapshot("full")

    @property
    def catchup(self) -> str:
        return self.snapshot("catchup")

    @property
    def marker(self) -> str:
        """The one-time key's comment prefix: its line in authorized_keys is found by it."""
        return f"dbzfs-seed:{self.replica.name}:"

    @property
    def data(self) -> Dataset:
        return self.datasets[0]

    def source_names(self) -> list[str]:
        """The source's datasets and seed snapshots (what the pre-checks read there)."""
        return [
            n
            for d in self.datasets
            for n in (d.source, f"{d.source}@{self.full}", f"{d.source}@{self.catchup}")
        ]

    def replica_names(self) -> list[str]:
        """The replica's parent dataset and every name the seed uses there."""
        names = [self.replica.dataset_name(self.replica.parent_dataset)]
        for d in self.datasets:
            names += [d.live, d.seed, d.aside, f"{d.seed}@{self.full}", f"{d.live}@{self.catchup}"]
        return names


def plan_problems(
    configs: dict[str, HostConfig],
    replica: str | None,
    source: str | None,
    wipe: bool,
    active: set[str],
) -> tuple[Plan | None, list[Problem]]:
    """The plan, or what stops the seeding before any host is read (pure; `replica`: the
    runbook's `host`)."""
    if not replica:
        return None, [Problem(None, "host", None, "missing", "run with --data host=HOST")]
    if replica not in configs:
        return None, [Problem(None, "host", replica, "not a host of the inventory", "name a replica")]
    r = configs[replica]
    if r.engine not in ENGINES:
        return None, [Problem(replica, "engine", r.engine, "no seeding for this engine", "")]
    group = {c.name: c for c in configs.values() if (c.engine, c.cluster) == (r.engine, r.cluster)}
    primary = group.get(r.primary or "")
    if r.role != "replica" or primary is None or primary.role != "primary":
        fix = "declare it role 'replica' with its group's primary, or name a replica"
        return None, [
            Problem(replica, "role", r.role, "not declared a replica of a primary of its group", fix)
        ]
    source = source or primary.name
    if source not in group or source == replica:
        found = (
            "the replica itself" if source == replica else f"not a member of {replica}'s replication group"
        )
        fix = f"name one of {', '.join(n for n in group if n != replica)}, or leave it out for {primary.name}"
        return None, [Problem(None, "source", source, found, fix)]
    s = group[source]
    problems = []
    for member in (r, s):
        if not member.replication_address:
            problems.append(
                Problem(
                    member.name,
                    "replication_address",
                    None,
                    "the seed travels over the replication network",
                    "declare it",
                )
            )
    datasets = []
    for role in ("data", "log"):
        mine, theirs = r.dataset_roles[role], s.dataset_roles[role]
        if r.mountpoint(mine) != s.mountpoint(theirs):
            problems.append(
                Problem(
                    replica,
                    "mountpoint",
                    r.mountpoint(mine),
                    f"the {role} dataset is mounted at {s.mountpoint(theirs)} on {source}: the received "
                    "files name their paths (pg_wal, the binlog index)",
                    "declare the same mountpoints on both",
                )
            )
        datasets.append(Dataset(mine, s.dataset_name(theirs), r.dataset_name(mine)))
    taking_part = {replica, source} | ({primary.name} if r.engine == "postgresql" else set())
    problems += kit.left_out(sorted(taking_part), active, "which the seeding changes or reads")
    plan = Plan(r, s, primary, bool(wipe), tuple(datasets))
    return (None if problems else plan), problems


def live_role(engine_name: str, fact: dict | None) -> dict | None:
    """{"follower": replicates from another server, "replicates": and does so now}."""
    if fact is None:
        return None
    if engine_name == "postgresql":
        return {"follower": fact["in_recovery"], "replicates": fact["status"] == "streaming"}
    follower = bool(fact.get("Master_Host"))
    running = (fact.get("Slave_IO_Running"), fact.get("Slave_SQL_Running")) == ("Yes", "Yes")
    return {"follower": follower, "replicates": follower and running}


def member_problems(plan: Plan, found: dict[str, dict]) -> list[Problem]:
    """The source and the group's primary against what the inventory says they are."""
    label = plan.engine.label
    source, primary = plan.source, plan.primary
    problems = []
    live = live_role(source.engine, found[source.name].get("live"))
    fix_inventory = "update the inventory to what runs (a failover?) first"
    if live is None:
        problems.append(
            Problem(
                source.name,
                "source",
                source.name,
                f"{label} does not answer",
                "start it, or name another member",
            )
        )
    elif source.role == "primary" and live["follower"]:
        problems.append(
            Problem(
                source.name,
                "role",
                "primary",
                "declared the primary, but the live server replicates",
                fix_inventory,
            )
        )
    elif source.role == "replica" and not live["replicates"]:
        problems.append(
            Problem(
                source.name,
                "source",
                source.name,
                "a replica that does not replicate now: its data may be stale or broken",
                f"repair its replication, or seed from {primary.name}",
            )
        )
    if primary.name != source.name:
        live = live_role(primary.engine, found[primary.name].get("live"))
        if live is None:
            problems.append(
                Problem(primary.name, "host", primary.name, f"{label} does not answer", "start it first")
            )
        elif live["follower"]:
            problems.append(
                Problem(
                    primary.name,
                    "role",
                    "primary",
                    "declared the primary, but the live server replicates",
                    fix_inventory,
                )
            )
    return problems


def space_needed(plan: Plan, source_zfs: dict, replica_zfs: dict) -> int:
    """Bytes the replica's pool must have free: what the source's datasets reference (a
    compressed send writes them as stored) plus SPACE_MARGIN, less what partial seeds hold."""
    referenced = sum(int(source_zfs[d.source]["referenced"]["value"]) for d in plan.datasets)
    held = sum(int(replica_zfs[d.seed]["used"]["value"]) for d in plan.datasets if d.seed in replica_zfs)
    return transfer.space_needed(referenced, held)


def replica_problems(plan: Plan, found: dict[str, dict]) -> list[Problem]:
    """The replica's server, data directory and pool, before the seed replaces its datasets."""
    r, s = plan.replica, plan.source
    server, zfs = found[r.name]["state"], found[r.name]["zfs"]
    source_server, source_zfs = found[s.name]["state"], found[s.name]["zfs"]
    label = plan.engine.label
    converge = "converge deploy.py on it first (the seed replaces its datasets, not its packages)"
    problems = []
    if not server["installed"]:
        problems.append(Problem(r.name, "host", r.name, f"{label} is not installed", converge))
    if not server["host_key"].startswith("ssh-ed25519 "):
        problems.append(
            Problem(
                r.name,
                "host key",
                HOST_KEY,
                "missing: the source pins the replica's ed25519 host key",
                "ssh-keygen -A",
            )
        )
    account = SERVICE_USERS[r.engine]["user"]
    ids, source_ids = (server["uid"], server["gid"]), (source_server["uid"], source_server["gid"])
    if not all(ids):
        problems.append(Problem(r.name, "host", r.name, f"no {account} account", converge))
    elif ids != source_ids:
        problems.append(
            Problem(
                r.name,
                account,
                ":".join(ids),
                f"its uid:gid here, {':'.join(source_ids)} on {s.name}: received files keep their owner ids",
                "give the account the same uid and gid on both hosts first",
            )
        )
    # A data directory the seed was put in place in by an earlier run holds the seed, not a
    # database to protect: a run that stopped after step 6 resumes without `wipe`.
    in_place = f"{plan.data.live}@{plan.catchup}" in zfs
    held = database_held(r.engine, server)
    if held and not plan.wipe and not in_place:
        running = "running" if server["active"] in ops.RUNNING else "stopped"
        problems.append(
            Problem(
                r.name,
                "wipe",
                None,
                f"its data directory holds {held} ({label} {running})",
                "re-run with --data wipe=yes to replace it (its datasets are destroyed once the seeded "
                "server replicates)",
            )
        )
    parent = r.dataset_name(r.parent_dataset)
    missing = [d.source for d in plan.datasets if d.source not in source_zfs]
    for name in missing:
        problems.append(Problem(s.name, "zfs_datasets", name, "does not exist on the source", ""))
    if parent not in zfs:
        problems.append(Problem(r.name, "zfs_datasets", parent, "does not exist", converge))
    elif not missing and not in_place:
        needed, available = space_needed(plan, source_zfs, zfs), int(zfs[parent]["available"]["value"])
        if available < needed:
            problems.append(
                Problem(
                    r.name,
                    "zpool_name",
                    r.pool.name,
                    f"{gib(available)} available under {parent}, the seed needs {gib(needed)} (what "
                    f"{s.name}'s datasets reference, plus {SPACE_MARGIN:.0%})",
                    "free space on the pool (old snapshots, other datasets) or add mirrors",
                )
            )
    problems += in_the_way(plan, zfs, source_zfs)
    return problems


def in_the_way(plan: Plan, zfs: dict, source_zfs: dict) -> list[Problem]:
    """Datasets on the replica that the seed's names would collide with."""
    problems = []
    for d in plan.datasets:
        token = zfs.get(d.seed, {}).get("receive_resume_token", {}).get("value", "-")
        resumable = token != "-" or f"{d.seed}@{plan.full}" in zfs
        if d.seed in zfs and not (resumable and f"{d.source}@{plan.full}" in source_zfs):
            problems.append(
                Problem(
                    plan.replica.name,
                    "dataset",
                    d.seed,
                    "exists, and is no receive this run can resume",
                    f"zfs destroy -r {d.seed} (on {plan.replica.name})",
                )
            )
        if d.aside in zfs and f"{d.live}@{plan.catchup}" not in zfs:
            problems.append(
                Problem(
                    plan.replica.name,
                    "dataset",
                    d.aside,
                    f"exists (an earlier seed's?): {d.live} cannot be renamed aside",
                    f"zfs destroy -r {d.aside} once it is not needed, or rename it",
                )
            )
    return problems


def live_problems(plan: Plan, found: dict[str, dict]) -> list[Problem]:
    """What the members' facts say against seeding (pure; `found`: read_members)."""
    return member_problems(plan, found) + replica_problems(plan, found)


def read_members(plan: Plan) -> dict[str, dict]:
    """The facts the pre-checks need, read on the replica, the source and the primary at once."""
    names = list(dict.fromkeys([plan.replica.name, plan.source.name, plan.primary.name]))

    def read(member: Host) -> dict:
        cfg = {plan.replica.name: plan.replica, plan.source.name: plan.source}.get(member.name, plan.primary)
        out: dict = {}
        if member.name in (plan.replica.name, plan.source.name):
            out["state"] = member.get_fact(
                SeedHostState,
                unit=plan.engine.unit,
                account=SERVICE_USERS[cfg.engine]["user"],
                server_binary=plan.engine.server_binary,
                data_path=data_path(cfg),
            )
        if member.name == plan.replica.name:
            out["zfs"] = member.get_fact(ZfsDatasetProperties, datasets=plan.replica_names())
        else:
            out["live"] = member.get_fact(plan.engine.live_fact)
        if member.name == plan.source.name:
            out["zfs"] = member.get_fact(ZfsDatasetProperties, datasets=plan.source_names())
        return out

    members = [inventory.get_host(name) for name in names]
    return dict(zip(names, runtime.on_every_host(members, read), strict=True))


def data_path(cfg: HostConfig) -> str:
    if cfg.engine == "postgresql":
        return render.postgresql_paths(cfg)["data_directory"]
    return render.mariadb_paths(cfg)["datadir"]


def wrapper_text(plan: Plan) -> str:
    names = [ops.q(d.seed) for d in plan.datasets]
    return render.render("seed-receive.sh.j2", {"host": plan.replica.name, "datasets": names})


# --- the report -----------------------------------------------------------------------------------


def report_lines(plan: Plan, full: list[str], catchup: list[str], start: list[str]) -> list[str]:
    r = plan.replica
    lines = [
        f"==> seeding done: {r.name} replicates from {plan.primary.name} ({r.engine}, {r.cluster}), "
        f"seeded from {plan.source.name}'s snapshots",
        transfer.describe_send("full send", full),
        transfer.describe_send("incremental send", catchup),
        f"    started from {transfer.position(start) or 'the position of the seed (see the start step)'}",
    ]
    if plan.wipe:
        lines.append(f"    {r.name}'s datasets from before the seed were destroyed (--data wipe=yes)")
    else:
        asides = " ".join(d.aside for d in plan.datasets)
        lines.append(f"    left for you: {r.name}'s datasets from before the seed, once not needed:")
        lines.append(f"      zfs destroy -r {asides}   (on {r.name})")
    return lines


class Report(transfer.Report):
    """Prints the report once the replica did the last step (steps "full", "catchup", "start",
    "last"); as every transfer's, removes the one-time key from a host that fails a step."""

    what = "seeding"

    def __init__(self, plan: Plan, steps: dict) -> None:
        super().__init__(plan.source, plan.replica, plan.marker, steps)
        self.plan = plan

    def step_ended(self, state_: object, step: str) -> None:
        source, replica = self.plan.source.name, self.plan.replica.name
        if step != "last" or not self.succeeded(state_, "last", replica):
            return  # a replica that failed a step was reported then
        lines = report_lines(
            self.plan,
            self.output(state_, "full", source),
            self.output(state_, "catchup", source),
            self.output(state_, "start", replica),
        )
        logger.info("\n".join(lines))


# --- the run ----------------------------------------------------------------------------------------


def checked(
    configs: dict[str, HostConfig], replica: str, source: str | None, wipe: bool
) -> tuple[Plan, dict]:
    """The plan and the members' facts, or stop the run before any change (once per run,
    whichever host's deploy gets here first: a --limit that leaves out a host the seeding needs
    is refused even when no host of the group takes part)."""

    def compute() -> tuple[Plan | None, list[Problem], dict]:
        plan, problems = plan_problems(configs, replica, source, wipe, kit.active())
        if problems:
            return None, problems, {}
        found = read_members(plan)
        return plan, live_problems(plan, found), found

    plan, problems, found = runtime.once_per_run(f"seed {replica}", compute)
    kit.refuse(problems, RUNBOOK.what)
    return plan, found


def run(args: dict) -> None:
    """The seeding's steps for this host (every host of the replica's group passes every step;
    hosts of other groups take no part). `args`: kit.start(RUNBOOK)."""
    cfg = engine.host_config()
    configs = {h.name: HostConfig.from_data(h.name, h.data) for h in inventory}
    replica = args.get("host")
    plan, found = checked(configs, replica, args.get("source"), bool(args.get("wipe")))
    if (cfg.engine, cfg.cluster) != (plan.replica.engine, plan.replica.cluster):
        return
    private_key, public_key = runtime.once_per_run(
        f"seed key {replica}", lambda: one_time_key(f"{plan.marker}{datetime.now(UTC):%Y%m%dT%H%M%SZ}")
    )
    blocks = received_blocks_compression(plan, found[plan.source.name]["zfs"])
    steps(cfg, plan, private_key, public_key, found[replica]["state"]["host_key"], blocks)


def received_blocks_compression(plan: Plan, source_zfs: dict[str, dict]) -> dict[str, str]:
    """The compression the replica's received blocks carry (transfer.received_blocks_compression)."""
    return transfer.received_blocks_compression(plan.datasets, source_zfs)


def steps(
    cfg: HostConfig,
    plan: Plan,
    private_key: HiddenValue,
    public_key: str,
    host_key: str,
    blocks_compression: dict[str, str] | None = None,
) -> None:
    r, s, p = plan.replica, plan.source, plan.primary
    ends = transfer.Ends(cfg.name, s, r, "the source", "the replica")
    is_replica, is_source = ends.receives, ends.sends
    not_replica, not_source = ends.not_receiver, ends.not_sender
    lives = [d.live for d in plan.datasets]

    # 1. The replica's server stops.
    engine.step(
        is_replica,
        not_replica,
        ops.server_stopped,
        name=f"{r.name}: stop {plan.engine.unit}",
        unit=plan.engine.unit,
    )
    # 2. The one-time key: authorized on the replica for the wrapper only; on the source in tmpfs.
    transfer.keys_in_place(ends, wrapper_text(plan), plan.marker, private_key, public_key, host_key)
    # 3. A consistent snapshot (PostgreSQL: the slot first, so the primary keeps every WAL record
    #    the replica will ask for after it).
    if r.engine == "postgresql":
        slot = pg.slot_name(r.name)
        engine.step(
            cfg.name == p.name,
            f"not the primary ({p.name})",
            pg.replication_slot,
            name=f"Replication slot {slot} on {p.name}, before the snapshot",
            slot=slot,
        )
    sources = [d.source for d in plan.datasets]
    seeded = f"{plan.data.live}@{plan.catchup}"  # the replica holds it once the seed is in place
    sends = [{"source": d.source, "seed": d.seed, "live": d.live} for d in plan.datasets]
    to = {"replica": r.name, "address": r.replication_address, "bind_address": s.replication_address}
    engine.step(
        is_source,
        not_source,
        ops.snapshot,
        name=f"Consistent snapshot @{plan.full} of {s.name}",
        engine_name=r.engine,
        datasets=sources,
        snapshot=plan.full,
        replica=r.name,
        seeded=seeded,
    )
    # 4. The full send.
    full = engine.step(
        is_source,
        not_source,
        ops.send,
        name=f"Full send of @{plan.full} to {r.name}",
        datasets=sends,
        snapshot=plan.full,
        **to,
    )
    # 5. Catch up.
    engine.step(
        is_source,
        not_source,
        ops.snapshot,
        name=f"Consistent snapshot @{plan.catchup} of {s.name}",
        engine_name=r.engine,
        datasets=sources,
        snapshot=plan.catchup,
        replica=r.name,
        seeded=seeded,
    )
    catchup = engine.step(
        is_source,
        not_source,
        ops.send,
        name=f"Incremental send of @{plan.catchup} to {r.name}",
        datasets=sends,
        snapshot=plan.catchup,
        base=plan.full,
        **to,
    )
    # 6. The seed in place, as the storage role declares its datasets.
    position_from = None
    if r.engine == "mariadb":
        snap = f"{plan.data.source}@{plan.catchup}"
        position_from = {"host": s.name, "snapshot": snap, "onto": plan.data.live}
    transfer.received_in_place(
        ends, plan.datasets, plan.catchup, "the received datasets", position_from, blocks_compression or {}
    )
    # 7 and 8. The server starts as a replica and is checked to replicate.
    if r.engine == "postgresql":
        start = start_postgresql(cfg, plan, seeded)
    else:
        start = start_mariadb(cfg, r, p, seeded)
    # 9. Cleanup (a host that failed a step gets its key removed by the report's error handler).
    transfer.keys_removed(ends, plan.marker)
    engine.step(
        is_source,
        not_source,
        ops.snapshots_destroyed,
        name=f"Seed snapshots of {s.name} destroyed",
        datasets=sources,
        snapshots=[plan.full, plan.catchup],
        needed_unless={"host": r.name, "snapshot": seeded},
    )
    engine.step(
        is_replica,
        not_replica,
        ops.snapshots_destroyed,
        name=f"Seed snapshots of {r.name} destroyed",
        datasets=lives,
        snapshots=[plan.full, plan.catchup],
    )
    last = transfer.asides_destroyed(ends, plan.datasets, "the seed", plan.wipe)
    snapshots.retaken(cfg, is_replica, not_replica)
    steps = {"full": full, "catchup": catchup, "start": start, "last": last}
    kit.report_once(f"seed report {r.name}", Report(plan, steps))


def start_postgresql(cfg: HostConfig, plan: Plan, seeded: str) -> OperationMeta:
    """Step 7 and 8 for PostgreSQL; returns the start step (its output holds the position)."""
    r, p = plan.replica, plan.primary
    is_replica, not_replica = cfg.name == r.name, f"not the replica ({r.name})"
    engine.step(
        is_replica,
        not_replica,
        files.directory,
        name=f"{postgresql.HOME} (postgres' home)",
        path=postgresql.HOME,
        user="postgres",
        group="postgres",
        mode="755",
    )
    engine.step(
        is_replica,
        not_replica,
        common.secret_file,
        name=f"{postgresql.PASSFILE} (replication password, 0600)",
        path=postgresql.PASSFILE,
        content=postgresql.passfile_content() if is_replica else None,
        user="postgres",
        group="postgres",
        mode="600",
    )
    conninfo = postgresql_topology.conninfo(
        p.replication_address, render.PG_PORT, postgresql.REPLICATION_USER, postgresql.PASSFILE, r.name
    )
    start = engine.step(
        is_replica,
        not_replica,
        ops.postgresql_standby,
        name=f"{r.name} starts as a standby of {p.name} from the seed",
        version=postgresql.cluster(r).version,
        cluster_name=postgresql.CLUSTER,
        data_directory=render.postgresql_paths(r)["data_directory"],
        seeded=seeded,
        primary_address=p.replication_address,
        conninfo=conninfo,
        slot=pg.slot_name(r.name),
    )
    engine.step(
        is_replica,
        not_replica,
        postgresql_topology.streams_from,
        name=f"{r.name} streams from {p.name}",
        primary_address=p.replication_address,
    )
    return start


def start_mariadb(cfg: HostConfig, r: HostConfig, p: HostConfig, seeded: str) -> OperationMeta:
    """Step 7 and 8 for MariaDB: transfer.start_mariadb."""
    return transfer.start_mariadb(cfg, r, p, seeded)
