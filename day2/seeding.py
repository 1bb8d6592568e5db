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
holds no database unless `--data wipe=REPLICA` names it, its pool has room for the source's
datasets, nothing is in the way of the names above; the service account has the same ids on both
hosts (received files keep their owner ids); --limit includes every host that takes part.

Steps (every host of the group passes every step; hosts of other groups take no part):
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
    aside destroyed when `wipe` named the replica. A host that fails a step has its key removed
    at once by the report's error handler; the snapshots stay for a re-run to resume from.
"""

from __future__ import annotations

import math
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyinfra import host, inventory, logger, state
from pyinfra.api import BaseStateCallback, HiddenValue
from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.host import Host
from pyinfra.operations import files

from facts.mariadb import MariadbLiveRole
from facts.postgresql import PostgresqlWalReceiver
from facts.seeding import HOST_KEY, SeedHostState
from facts.zfs import ZfsDatasetProperties
from model import secrets
from model.hostdata import HostConfig
from model.problems import Problem, format_problems
from model.zfs_properties import BLOCKS_COMPRESSION, blocks_record
from operations import (
    common,
    mariadb as mariadb_ops,
    postgresql as pg,
    postgresql_topology,
    runtime,
    seeding as ops,
    zfs as zfs_ops,
)
from roles import engine, mariadb, postgresql, render, snapshots
from roles.zfs import SERVICE_USERS

PARAMETERS = ("replica", "source", "wipe")
KEY_HOURS = 48  # the key line's expiry-time: a backstop should the cleanup never run
SPACE_MARGIN = 0.10  # over what the source's datasets reference: the catch-up, metadata
MIB = 1024**2
GIB = 1024**3


@dataclass(frozen=True)
class Engine:
    label: str
    unit: str
    server_binary: str
    live_fact: type


ENGINES = {
    "postgresql": Engine("PostgreSQL", postgresql.UNIT, postgresql.SERVER_BINARY, PostgresqlWalReceiver),
    "mariadb": Engine("MariaDB", mariadb.SERVICE, mariadb.SERVER_BINARY, MariadbLiveRole),
}
# Directories of a MariaDB datadir that are no database of its own.
MARIADB_SYSTEM_DIRECTORIES = frozenset({"mysql", "performance_schema", "sys", "lost+found"})


@dataclass(frozen=True)
class Dataset:
    """One of the datasets a seed replaces: its name on the source and on the replica."""

    relative: str  # the replica's zfs_datasets key
    source: str
    live: str

    @property
    def seed(self) -> str:
        return f"{self.live}-seed"

    @property
    def aside(self) -> str:
        return f"{self.live}-replaced"


@dataclass(frozen=True)
class Plan:
    replica: HostConfig
    source: HostConfig
    primary: HostConfig
    wipe: bool
    datasets: tuple[Dataset, ...]  # the data dataset first, then the log dataset

    @property
    def engine(self) -> Engine:
        return ENGINES[self.replica.engine]

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
    wipe: str | None,
    active: set[str],
) -> tuple[Plan | None, list[Problem]]:
    """The plan, or what stops the seeding before any host is read (pure)."""
    if not replica:
        return None, [Problem(None, "replica", None, "missing", "run with --data replica=HOST")]
    if replica not in configs:
        return None, [Problem(None, "replica", replica, "not a host of the inventory", "name a replica")]
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
    if wipe and wipe != replica:
        problems.append(
            Problem(
                None,
                "wipe",
                wipe,
                f"names {wipe}, not the replica {replica}",
                f"--data wipe={replica}, or leave it out",
            )
        )
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
    missing = sorted(taking_part - active)
    if missing:
        problems.append(
            Problem(
                None,
                "--limit",
                sorted(active),
                f"leaves out {', '.join(missing)}, which the seeding changes or reads",
                f"limit to {','.join(sorted(taking_part))} or more",
            )
        )
    plan = Plan(r, s, primary, wipe == replica, tuple(datasets))
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


def database_held(engine_name: str, server: dict) -> str:
    """What database the replica's data directory holds ("" for none)."""
    if engine_name == "postgresql":
        return f"a PostgreSQL {server['pg_version']} cluster" if server["pg_version"] else ""
    own = [d for d in server["directories"] if d not in MARIADB_SYSTEM_DIRECTORIES and not d.startswith("#")]
    return f"schemas of its own ({', '.join(own)})" if own else ""


def gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"


def space_needed(plan: Plan, source_zfs: dict, replica_zfs: dict) -> int:
    """Bytes the replica's pool must have free: what the source's datasets reference (a
    compressed send writes them as stored) plus SPACE_MARGIN, less what partial seeds hold."""
    referenced = sum(int(source_zfs[d.source]["referenced"]["value"]) for d in plan.datasets)
    held = sum(int(replica_zfs[d.seed]["used"]["value"]) for d in plan.datasets if d.seed in replica_zfs)
    return max(0, math.ceil(referenced * (1 + SPACE_MARGIN)) - held)


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
                f"re-run with --data wipe={r.name} to replace it (its datasets are destroyed once the seeded "
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


# --- the one-time key -----------------------------------------------------------------------------


def one_time_key(comment: str) -> tuple[HiddenValue, str]:
    """A new ed25519 key pair (private, public), made with ssh-keygen in a temporary directory
    that is removed before this returns: the keys live in this process's memory only."""
    with tempfile.TemporaryDirectory(prefix="dbzfs-seed-") as tmp:
        path = Path(tmp) / "key"
        try:
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                check=True,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except FileNotFoundError:
            raise PyinfraError("ssh-keygen is not installed here (Debian: openssh-client)") from None
        except subprocess.CalledProcessError as exc:
            raise PyinfraError(f"ssh-keygen failed: {exc.stderr.strip()}") from None
        return HiddenValue(path.read_text()), path.with_name("key.pub").read_text().strip()


def expiry(now: datetime, hours: int = KEY_HOURS) -> str:
    """An authorized_keys expiry-time, UTC."""
    return (now.astimezone(UTC) + timedelta(hours=hours)).strftime("%Y%m%d%H%MZ")


def wrapper_text(plan: Plan) -> str:
    names = [ops.q(d.seed) for d in plan.datasets]
    return render.render("seed-receive.sh.j2", {"host": plan.replica.name, "datasets": names})


# --- the report -----------------------------------------------------------------------------------


def sent(lines: list[str]) -> tuple[int, float, int]:
    """(bytes, seconds, datasets) from a send operation's REPORT lines."""
    total, ms, count = 0, 0, 0
    for line in lines:
        words = line.split()
        if line.startswith(f"{ops.REPORT} sent ") and len(words) == 8:
            total, ms, count = total + int(words[3]), ms + int(words[6]), count + 1
    return total, ms / 1000, count


def position(lines: list[str]) -> str | None:
    for line in lines:
        if line.startswith(f"{ops.REPORT} position "):
            return line.split(" position ", 1)[1]
    return None


def describe_send(what: str, lines: list[str]) -> str:
    size, seconds, count = sent(lines)
    if not count:
        return f"    {what}: nothing sent in this run (received in an earlier one)"
    return f"    {what}: {size} bytes ({size / MIB:.1f} MiB) in {seconds:.1f} s, {count} dataset(s)"


def report_lines(plan: Plan, full: list[str], catchup: list[str], start: list[str]) -> list[str]:
    r = plan.replica
    lines = [
        f"==> seeding done: {r.name} replicates from {plan.primary.name} ({r.engine}, {r.cluster}), "
        f"seeded from {plan.source.name}'s snapshots",
        describe_send("full send", full),
        describe_send("incremental send", catchup),
        f"    started from {position(start) or 'the position of the seed (see the start step)'}",
    ]
    if plan.wipe:
        lines.append(f"    {r.name}'s datasets from before the seed were destroyed (--data wipe={r.name})")
    else:
        asides = " ".join(d.aside for d in plan.datasets)
        lines.append(f"    left for you: {r.name}'s datasets from before the seed, once not needed:")
        lines.append(f"      zfs destroy -r {asides}   (on {r.name})")
    return lines


def _completed(state_: object, name: str, op_hash: str) -> object | None:
    """The host's run of the operation (pyinfra's OperationMeta) once it succeeded, else None."""
    try:
        meta = state_.get_op_data_for_host(state_.inventory.get_host(name), op_hash).operation_meta
    except (KeyError, AttributeError):
        return None
    return meta if meta.is_complete() and meta.did_succeed() else None


def _stdout(state_: object, name: str, op_hash: str) -> list[str]:
    meta = _completed(state_, name, op_hash)
    return meta.stdout_lines if meta else []


class Report(BaseStateCallback):
    """Prints the report at the last step, and removes the one-time key from a host of the seed
    that fails a step (that host runs no further step, its cleanup included)."""

    def __init__(self, plan: Plan, hashes: dict[str, str]) -> None:
        self.plan, self.hashes = plan, hashes
        self.roles = {plan.source.name: "source", plan.replica.name: "replica"}
        self.cleaned: set[str] = set()

    def operation_host_error(self, state, host, op_hash, retry_count=0, max_retries=0) -> None:  # noqa: ANN001 - pyinfra's callback signature
        role = self.roles.get(host.name)
        if role is None or host.name in self.cleaned:
            return
        self.cleaned.add(host.name)
        arguments = state.get_op_data_for_host(host, op_hash).global_arguments
        connector = {k: v for k, v in arguments.items() if k in CONNECTOR_ARGUMENT_KEYS}
        done = True
        for command in ops.key_cleanup(role, self.plan.marker):
            try:
                ok, _ = host.run_shell_command(command, print_output=False, **connector)
            except Exception:  # a cleanup must not hide the failure it follows
                ok = False
            done = done and ok
        step = ", ".join(state.get_op_meta(op_hash).names) or "a step"
        removed = (
            "the one-time key was removed from it"
            if done
            else f"the one-time key could NOT be removed from it: {self._by_hand(role)}"
        )
        logger.warning(
            f"==> seeding of {self.plan.replica.name} stopped on {host.name} at {step!r}; {removed}. "
            f"The seed snapshots are kept: re-run the same command to resume."
        )

    def _by_hand(self, role: str) -> str:
        if role == "source":
            return f"rm -f {ops.KEY} {ops.KNOWN_HOSTS}"
        return f"remove the line with {self.plan.marker} from {ops.AUTHORIZED_KEYS}"

    def operation_end(self, state, op_hash) -> None:  # noqa: ANN001 - pyinfra's callback signature
        source, replica = self.plan.source.name, self.plan.replica.name
        if op_hash != self.hashes["last"] or _completed(state, replica, op_hash) is None:
            return  # a replica that failed a step was reported then
        lines = report_lines(
            self.plan,
            _stdout(state, source, self.hashes["full"]),
            _stdout(state, source, self.hashes["catchup"]),
            _stdout(state, replica, self.hashes["start"]),
        )
        logger.info("\n".join(lines))


_reported: set[tuple[int, str]] = set()


def report_once(report: Report) -> None:
    key = (id(state), f"seed report {report.plan.replica.name}")
    if key not in _reported:
        _reported.add(key)
        state.add_callback_handler(report)


# --- the run ----------------------------------------------------------------------------------------


def checked(
    configs: dict[str, HostConfig], replica: str, source: str | None, wipe: str | None
) -> tuple[Plan, dict]:
    """The plan and the members' facts, or stop the run before any change (once per run)."""

    def compute() -> tuple[Plan | None, list[Problem], dict]:
        active = {h.name for h in inventory.get_active_hosts()}
        plan, problems = plan_problems(configs, replica, source, wipe, active)
        if problems:
            return None, problems, {}
        found = read_members(plan)
        return plan, live_problems(plan, found), found

    plan, problems, found = runtime.once_per_run(f"seed {replica}", compute)
    if problems:
        raise PyinfraError("\n" + format_problems(problems, what="before the seeding"))
    return plan, found


def run() -> None:
    """The seeding's steps for this host (every host of the replica's group passes every step;
    hosts of other groups take no part)."""
    cfg = engine.host_config()
    replica = host.data.get("replica")
    configs = {h.name: HostConfig.from_data(h.name, h.data) for h in inventory}
    if replica not in configs:
        problem = Problem(None, "replica", replica, "not a host of the inventory", "name a replica")
        if not replica:
            problem = Problem(None, "replica", None, "missing", "run with --data replica=HOST")
        raise PyinfraError("\n" + format_problems([problem], what="before the seeding"))
    target = configs[replica]
    if (cfg.engine, cfg.cluster) != (target.engine, target.cluster):
        return
    plan, found = checked(configs, replica, host.data.get("source"), host.data.get("wipe"))
    private_key, public_key = runtime.once_per_run(
        f"seed key {replica}", lambda: one_time_key(f"{plan.marker}{datetime.now(UTC):%Y%m%dT%H%M%SZ}")
    )
    blocks = received_blocks_compression(plan, found[plan.source.name]["zfs"])
    steps(cfg, plan, private_key, public_key, found[replica]["state"]["host_key"], blocks)


def received_blocks_compression(plan: Plan, source_zfs: dict[str, dict]) -> dict[str, str]:
    """{replica dataset key: the compression its received blocks carry}: our sends (-c, or -w)
    keep the source's blocks as they are, so the seed records what the source recorded, and a
    later change of compression is rewritten on the replica too (day2.compression_rewrite).
    A source without the record leaves the replica without one."""
    recorded = {
        d.relative: blocks_record(source_zfs.get(d.source, {}).get(BLOCKS_COMPRESSION, {}).get("value"))
        for d in plan.datasets
    }
    return {relative: value for relative, value in recorded.items() if value is not None}


def steps(
    cfg: HostConfig,
    plan: Plan,
    private_key: HiddenValue,
    public_key: str,
    host_key: str,
    blocks_compression: dict[str, str] | None = None,
) -> None:
    r, s, p = plan.replica, plan.source, plan.primary
    is_replica, is_source = cfg.name == r.name, cfg.name == s.name
    not_replica, not_source = f"not the replica ({r.name})", f"not the source ({s.name})"
    lives = [d.live for d in plan.datasets]
    blocks = blocks_compression or {}

    # 1. The replica's server stops.
    engine.step(
        is_replica,
        not_replica,
        ops.server_stopped,
        name=f"{r.name}: stop {plan.engine.unit}",
        unit=plan.engine.unit,
    )
    # 2. The one-time key: authorized on the replica for the wrapper only; on the source in tmpfs.
    engine.step(
        is_replica,
        not_replica,
        common.config_file,
        name=f"{ops.WRAPPER} (the one-time key's forced command)",
        path=ops.WRAPPER,
        content=wrapper_text(plan),
        mode="755",
    )
    engine.step(
        is_replica,
        not_replica,
        ops.authorized_key,
        name=f"One-time key from {s.name} ({s.replication_address}) authorized for {ops.WRAPPER}",
        line=ops.authorized_key_line(public_key, s.replication_address, expiry(datetime.now(UTC))),
        marker=plan.marker,
    )
    engine.step(
        is_source,
        not_source,
        ops.source_key,
        name=f"One-time key and {r.name}'s pinned host key in {common.PRIVATE_DIR}",
        private_key=private_key,
        known_hosts=ops.known_hosts_line(r.replication_address, host_key),
    )
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
    engine.step(
        is_replica,
        not_replica,
        ops.put_in_place,
        name=f"{', '.join(lives)}: the received datasets in place, the old ones renamed aside",
        datasets=[{"live": d.live, "seed": d.seed, "aside": d.aside} for d in plan.datasets],
        snapshot=plan.catchup,
        position_from=position_from,
    )
    for d in plan.datasets:
        engine.step(
            is_replica,
            not_replica,
            zfs_ops.dataset,
            name=f"Dataset {d.live}",
            dataset_name=d.live,
            properties={
                **r.datasets[d.relative],
                **({BLOCKS_COMPRESSION: blocks[d.relative]} if d.relative in blocks else {}),
            },
        )
    engine.step(is_replica, not_replica, ops.mounted, name=f"Mounted: {', '.join(lives)}", datasets=lives)
    account = SERVICE_USERS[r.engine]
    for d in plan.datasets:
        engine.step(
            is_replica,
            not_replica,
            files.directory,
            name=f"Owner of {r.mountpoint(d.relative)}",
            path=r.mountpoint(d.relative),
            user=account["user"],
            group=account["user"],
            mode=account["mode"],
        )
    # 7 and 8. The server starts as a replica and is checked to replicate.
    if r.engine == "postgresql":
        start = start_postgresql(cfg, plan, seeded)
    else:
        start = start_mariadb(cfg, r, p, seeded)
    # 9. Cleanup (a host that failed a step gets its key removed by the report's error handler).
    engine.step(
        is_replica, not_replica, ops.authorized_key_removed, name="One-time key removed", marker=plan.marker
    )
    engine.step(
        is_source, not_source, ops.source_key_removed, name="One-time key and pinned host key removed"
    )
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
    last = engine.step(
        is_replica,
        not_replica,
        ops.replaced_destroyed,
        name=f"{r.name}'s datasets from before the seed: destroyed with --data wipe={r.name}, else kept",
        datasets=[d.aside for d in plan.datasets],
        wipe=plan.wipe,
    )
    snapshots.retaken(cfg, is_replica, not_replica)
    hashes = {"full": full._hash, "catchup": catchup._hash, "start": start._hash, "last": last._hash}
    report_once(Report(plan, hashes))


def start_postgresql(cfg: HostConfig, plan: Plan, seeded: str) -> object:
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
        version=postgresql.VERSION,
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


def start_mariadb(
    cfg: HostConfig, r: HostConfig, p: HostConfig, seeded: str, what: str = "the seed"
) -> object:
    """Step 7 and 8 for MariaDB (and a restore's replica, day2/restore_mariadb.py): `r` starts
    as a replica of `p` from the position on `seeded`; returns the start step (its output holds
    the position)."""
    is_replica, not_replica = cfg.name == r.name, f"not the replica ({r.name})"
    paths = render.mariadb_paths(r)
    to_primary = {
        "primary_address": p.replication_address,
        "replication_user": render.REPLICATION_USER["mariadb"],
        "password": engine.secret(secrets.REPLICATION_PASSWORD) if is_replica else None,
        "port": render.MARIADB_PORT,
    }
    if is_replica:
        mariadb.role_config(r)  # read_only in the role file before the server starts
    start = engine.step(
        is_replica,
        not_replica,
        ops.mariadb_replica,
        name=f"{r.name} starts as a replica of {p.name} from {what}'s GTID position",
        datadir=paths["datadir"],
        relay_log=paths["relay_log"],
        seeded=seeded,
        **to_primary,
    )
    engine.step(is_replica, not_replica, mariadb_ops.read_only, name="read_only ON (live)", on=True)
    engine.step(
        is_replica,
        not_replica,
        mariadb_ops.replica,
        name=f"{r.name} replicates from {p.name}",
        **to_primary,
    )
    return start
