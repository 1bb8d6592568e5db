"""Restoring a MariaDB host from the backup host's copies and binlogs (runbooks/restore.py; the
copies: roles/backup.py, the binlogs: roles/binlogs.py). PostgreSQL's restore: day2/restore.py.

Two ends, named by `mode`, as PostgreSQL's:
- "replica": the newest copy of the group, then replication from the group's primary from the
  copy's GTID position (as a seeded replica, day2/seeding.py). The target must be declared a
  replica of that primary.
- "standalone": a copy for inspection, on its own: the newest copy taken at or before `time`,
  then the group's binlogs replayed over it up to `time` (point-in-time recovery: every
  transaction committed before that second, none from it on); without a time, the copy `backup`
  (a snapshot name, default the newest) as it is. No replication, read_only ON (the fence lets it
  start; root writes). Put it back with mode=replica wipe=yes.

The copy: among the snapshots of the group's copies on the backup host (any member's
<pool>/backup/<cluster>/<member>/{data,log}), one held on both datasets with its dbzfs:gtid.
The binlogs: the stream directory of the group's declared primary (roles.binlogs.sources), the
files in their order. After a switchover the new primary's directory holds its files only from
the switchover on; a moment before it, over a copy older than that, is not reached (the report
says what was).

Pre-checks, before any host is changed (all problems at once): the target is a MariaDB host of an
inventory with a backup host; the mode; the time parses, has its offset, is not in the future nor
before the oldest copy, and the binlogs reach it (the newest file written at or after it: else the
stream lags or stopped, BinlogStreamFailing); not both time and backup; wipe is yes or no; the
target is not its group's live primary nor its declared one; mode=replica needs it declared a
replica of the group's primary; its datadir holds no database of its own unless wipe; its pool has
room; nothing is in the way of the names used; --limit includes the target, the backup host and
(replica) the primary.

Steps, on the target and the backup host (the others take no part), the transfer being
day2/transfer.py's, as a seed's: the target's server stops; a one-time key lets the backup host's
replication address run the receive wrapper on the target for the restore's datasets only; for a
time, a snapshot of the backup host's
binlogs dataset; full sends of the copy's data and log (and the binlogs) into the target; the copy
put in place with its GTID position, the declared properties, mounted, owned; the server started
as a replica, or on its own with the binlogs replayed; the cleanup: the keys, the binlogs'
snapshot and the received binlogs, with wipe the datasets from before; a report.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime

from pyinfra import host, inventory, logger
from pyinfra.api.host import Host

from day2 import kit, restore, transfer
from facts.mariadb import BinlogFiles, MariadbLiveRole
from facts.seeding import HOST_KEY, SeedHostState
from facts.zfs import ZfsDatasetProperties, ZfsSnapshotPositions
from model.hostdata import HostConfig
from model.problems import Problem
from operations import mariadb_restore as ops, runtime, seeding as seed_ops
from roles import backup, binlogs, engine, mariadb, render, snapshots

RECEIVED_BINLOGS = "dbzfs-restore-binlogs"  # the binlogs' dataset on the target, under its pool
BINLOGS_MOUNT = "/var/lib/dbzfs-restore-binlogs"  # where it is mounted, read-only, during the replay


def utc(moment: datetime | float) -> str:
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class Copy:
    """A snapshot of a member's data and log copies on the backup host."""

    member: str
    snapshot: str  # after the @
    creation: int
    gtid: str
    data: str  # the copies' datasets on the backup host
    log: str


@dataclass(frozen=True)
class Plan:
    target: HostConfig
    backup: HostConfig  # the backup host: its copies and binlogs
    primary: HostConfig | None  # the group's declared primary (streamed from, replicated from)
    members: tuple[HostConfig, ...]  # the replication group, target included
    mode: str
    time: datetime | None
    backup_name: str | None  # a copy's snapshot name; None: the newest (or, with a time, the last before)
    wipe: bool
    copy: Copy | None = None  # chosen from the backup host's copies (live_problems)
    replayed: bool = False  # an earlier run of this restore replayed the binlogs

    @property
    def cluster(self) -> str:
        return self.target.cluster

    def copies_of(self, member: HostConfig) -> tuple[str, str]:
        return backup.copy_of(self.backup, member, "data"), backup.copy_of(self.backup, member, "log")

    @property
    def copies_root(self) -> str:
        return f"{backup.copies_root(self.backup)}/{self.cluster}"

    @property
    def stream_directory(self) -> str:
        return f"{binlogs.DIRECTORY}/{self.cluster}/{self.primary.name}"

    @property
    def binlogs_dataset(self) -> str:
        return f"{self.backup.pool.name}/{binlogs.DATASET}"

    @property
    def binlogs_snapshot(self) -> str:
        slug = "".join(c if c.isalnum() or c in "_.-" else "_" for c in self.target.name)
        return f"dbzfs-restore-{slug}"

    @property
    def received(self) -> str:
        return self.target.dataset_name(RECEIVED_BINLOGS)

    @property
    def received_directory(self) -> str:
        return f"{BINLOGS_MOUNT}/{self.cluster}/{self.primary.name}"

    @property
    def replays(self) -> bool:
        """Whether this run sends and replays binlogs."""
        return self.time is not None and not self.replayed

    @property
    def datasets(self) -> tuple[transfer.Dataset, ...]:
        """The data dataset, then the log's: the copy on the backup host, the live one on the target."""
        t = self.target
        sources = (self.copy.data, self.copy.log) if self.copy else ("", "")
        return tuple(
            transfer.Dataset(t.dataset_roles[role], source, t.dataset_name(t.dataset_roles[role]))
            for role, source in zip(("data", "log"), sources, strict=True)
        )

    @property
    def seeded(self) -> str:
        """The copy's snapshot on the target's live data dataset: the copy is in place."""
        return f"{self.datasets[0].live}@{self.copy.snapshot}"

    @property
    def marker(self) -> str:
        return f"dbzfs-restore:{self.target.name}:"

    @property
    def identity(self) -> str:
        """What RESTORE_PROPERTY records: which restore put the copy in place."""
        if self.mode == "replica":
            return "replica"
        return f"standalone to {utc(self.time)}" if self.time else "standalone"

    def target_names(self) -> list[str]:
        """What the pre-checks read on the target, their snapshots apart."""
        names = [self.target.dataset_name(self.target.parent_dataset), self.received]
        for d in self.datasets:
            names += [d.live, d.seed, d.aside]
        return names

    def snapshotted(self) -> list[str]:
        """The target's datasets whose snapshots the pre-checks read: the live data dataset's (a
        copy in place) and the seeds' (a copy received)."""
        return [self.datasets[0].live, *(d.seed for d in self.datasets)]


def plan_problems(
    configs: dict[str, HostConfig], params: dict, active: set[str], now: datetime
) -> tuple[Plan | None, list[Problem]]:
    """The plan from the runbook's parameters and the inventory alone (pure)."""
    problems: list[Problem] = []
    name = params.get("host")
    target = configs.get(name)

    def bad(key: str, value: object, message: str, fix: str) -> None:
        problems.append(Problem(name, key, value, message, fix))

    if target is None or target.engine != "mariadb":  # day2/restore.py dispatches only MariaDB hosts here
        return None, [Problem(None, "host", name, "not a MariaDB host of the inventory", "")]
    mode = params.get("mode")
    restore.mode_checked(mode, bad)
    backups = backup.backup_hosts(list(configs.values()))
    if not backups:
        bad("inventory", None, "has no backup host, so no copy", 'add the backup host (role = "backup")')
    members = tuple(c for c in configs.values() if (c.engine, c.cluster) == ("mariadb", target.cluster))
    primary = binlogs.sources(list(members)).get(target.cluster)
    if primary is not None and target.name == primary.name:
        bad(
            "host",
            name,
            "is the group's declared primary (its role file sets read_only OFF, which the fence refuses "
            "while a member takes writes)",
            "switch over first (runbooks/switchover.py), or restore onto a replica",
        )
    elif mode == "replica" and (
        primary is None or target.role != "replica" or target.primary != primary.name
    ):
        bad(
            "role",
            target.role,
            "a restore as a replica needs the target declared a replica of its group's primary",
            "declare it so in the inventory, or restore with mode=standalone",
        )
    moment = restore.time_checked(params, now, bad, "a replica replicates to now", utc)
    if moment is not None and primary is None:
        bad("time", params["time"], "the group has no declared primary: no binlogs are streamed", "")
    if params.get("time") is not None and params.get("backup"):
        bad("backup", params["backup"], "given with a time", "one of them: the time picks the copy")
    wipe = restore.wipe_checked(params)
    for member in [target, *backups[:1]]:
        if not member.replication_address:
            bad(
                "replication_address",
                member.name,
                "the copy travels over the replication network",
                "declare it",
            )
    needed = [name, *(b.name for b in backups[:1])]
    if mode == "replica" and primary is not None:
        needed.append(primary.name)
    fix = "include the target, the backup host" + (" and the primary" if mode == "replica" else "")
    problems += kit.left_out(needed, active, fix=fix, host=name)
    if problems:
        return None, problems
    plan = Plan(target, backups[0], primary, members, mode, moment, params.get("backup"), wipe)
    return plan, []


# --- the copy ---------------------------------------------------------------------------------


def copies(plan: Plan, snapshots_found: list[dict]) -> list[Copy]:
    """The group's copies on the backup host, oldest first: a member's data snapshot with its
    GTID position whose log dataset holds the same snapshot."""
    names = {s["name"] for s in snapshots_found}
    out = []
    for member in plan.members:
        data, log = plan.copies_of(member)
        for s in snapshots_found:
            dataset, _, snapshot = s["name"].partition("@")
            if dataset == data and s["gtid"] and f"{log}@{snapshot}" in names:
                out.append(Copy(member.name, snapshot, s["creation"], s["gtid"], data, log))
    return sorted(out, key=lambda c: (c.creation, c.member, c.snapshot))


def chosen(plan: Plan, found: list[Copy], target_zfs: dict) -> Copy | None:
    """With a time: the newest copy taken at or before it; with a name: that one; else the one an
    earlier run of this restore put in place, or the newest."""
    if plan.time is not None:
        before = [c for c in found if c.creation <= plan.time.timestamp()]
        return before[-1] if before else None
    if plan.backup_name:
        named = [c for c in found if c.snapshot == plan.backup_name]
        return named[-1] if named else None
    for c in reversed(found):
        in_place = target_zfs.get(dataclasses.replace(plan, copy=c).seeded, {})
        if in_place.get(ops.RESTORE_PROPERTY, {}).get("value") == plan.identity:
            return c
    return found[-1] if found else None


def copy_problems(plan: Plan, found: list[Copy], binlog_files: list[dict]) -> list[Problem]:
    b = plan.backup.name
    problems = []
    if not found:
        return [
            Problem(
                b,
                "copies",
                plan.copies_root,
                f"holds no copy of {plan.cluster} with its GTID position",
                "converge with the backup host, and let it pull (dbzfs-backup-pull.timer)",
            )
        ]
    if plan.backup_name and plan.backup_name not in {c.snapshot for c in found}:
        newest = ", ".join(c.snapshot for c in found[-3:])
        problems.append(
            Problem(
                b, "backup", plan.backup_name, "not a copy of the group", f"one of the copies, e.g. {newest}"
            )
        )
    if plan.time is not None:
        if plan.time.timestamp() < found[0].creation:
            problems.append(
                Problem(
                    b,
                    "time",
                    utc(plan.time),
                    f"is before the oldest copy ({found[0].member}@{found[0].snapshot}, "
                    f"{utc(found[0].creation)})",
                    "a later moment",
                )
            )
        directory = plan.stream_directory
        if not binlog_files:
            problems.append(
                Problem(
                    b,
                    "binlogs",
                    directory,
                    "holds no binlog file of the group",
                    "converge with the backup host (roles/binlogs.py) and check its stream "
                    f"({binlogs.unit_name(plan.cluster)})",
                )
            )
        elif binlog_files[-1]["mtime"] < plan.time.timestamp():
            newest = binlog_files[-1]
            problems.append(
                Problem(
                    b,
                    "binlogs",
                    directory,
                    f"the newest file, {newest['name']}, was last written {utc(newest['mtime'])}, before the "
                    "moment: the stream lags or stopped (BinlogStreamFailing)",
                    f"repair {binlogs.unit_name(plan.cluster)}, or a moment before {utc(newest['mtime'])}",
                )
            )
    return problems


# --- the target -------------------------------------------------------------------------------


def live_primary(live: dict | None) -> bool:
    """A server that answers, replicates from no one, and takes writes."""
    return live is not None and not live.get("Master_Host") and live.get("read_only") == "0"


def target_problems(
    plan: Plan, server: dict, zfs: dict, live: dict | None, backup_zfs: dict
) -> list[Problem]:
    t = plan.target.name
    converge = "converge deploy.py on it first (the restore replaces its datasets, not its packages)"
    problems = []
    if not server["installed"]:
        problems.append(Problem(t, "host", t, "MariaDB is not installed", converge))
    if not server["host_key"].startswith("ssh-ed25519 "):
        problems.append(
            Problem(
                t,
                "host key",
                HOST_KEY,
                "missing: the backup host pins the target's ed25519 host key",
                "ssh-keygen -A",
            )
        )
    if live_primary(live):
        problems.append(
            Problem(
                t,
                "server",
                "primary",
                "is a live primary (read_only OFF, replicating from no one)",
                "switch over first (runbooks/switchover.py), or update the inventory to what runs",
            )
        )
    if plan.copy is None:
        return problems
    # The copy's snapshot on the target's live dataset is this restore's, in place, only with its
    # mark: unmarked, it is the target's own from before; marked otherwise, an earlier restore's.
    # Either is a database to replace.
    marked = zfs.get(plan.seeded, {}).get(ops.RESTORE_PROPERTY, {}).get("value")
    in_place = marked == plan.identity
    held = transfer.database_held("mariadb", server)
    if held and not plan.wipe and not in_place:
        running = "running" if server["active"] in seed_ops.RUNNING else "stopped"
        problems.append(
            Problem(
                t,
                "wipe",
                None,
                f"its datadir holds {held} (MariaDB {running})",
                "--data wipe=yes to replace it (its datasets are destroyed once the restore is done)",
            )
        )
    member = next(m for m in plan.members if m.name == plan.copy.member)
    for role in ("data", "log"):
        theirs, mine = (
            member.mountpoint(member.dataset_roles[role]),
            plan.target.mountpoint(plan.target.dataset_roles[role]),
        )
        if theirs != mine:
            problems.append(
                Problem(
                    t,
                    "mountpoint",
                    mine,
                    f"the {role} dataset of the copy's host, {member.name}, is mounted at {theirs}: the "
                    "received files name their paths (the binlog index)",
                    "declare the same mountpoints on both, or restore a copy of another member (backup=)",
                )
            )
    parent = plan.target.dataset_name(plan.target.parent_dataset)
    if parent not in zfs:
        problems.append(Problem(t, "zfs_datasets", parent, "does not exist", converge))
    elif not in_place:
        sources = [d.source for d in plan.datasets] + ([plan.binlogs_dataset] if plan.replays else [])
        referenced = sum(int(backup_zfs.get(s, {}).get("referenced", {}).get("value", 0)) for s in sources)
        held_seeds = sum(int(zfs[d.seed]["used"]["value"]) for d in plan.datasets if d.seed in zfs)
        needed = transfer.space_needed(referenced, held_seeds)
        available = int(zfs[parent]["available"]["value"])
        if available < needed:
            problems.append(
                Problem(
                    t,
                    "zpool_name",
                    plan.target.pool.name,
                    f"{transfer.gib(available)} available under {parent}, "
                    f"the copy needs {transfer.gib(needed)}",
                    "free space on the pool (old snapshots, other datasets) or add mirrors",
                )
            )
    for d in plan.datasets:
        token = zfs.get(d.seed, {}).get("receive_resume_token", {}).get("value", "-")
        if d.seed in zfs and token == "-" and f"{d.seed}@{plan.copy.snapshot}" not in zfs:
            problems.append(
                Problem(
                    t,
                    "dataset",
                    d.seed,
                    "exists, and is no receive this run can resume",
                    f"zfs destroy -r {d.seed} (on {t})",
                )
            )
        if d.aside in zfs and not in_place:
            problems.append(
                Problem(
                    t,
                    "dataset",
                    d.aside,
                    f"exists (an earlier seed's or restore's?): {d.live} cannot be renamed aside",
                    f"zfs destroy -r {d.aside} once it is not needed, or rename it",
                )
            )
    if (
        plan.replays
        and plan.received in zfs
        and f"{plan.binlogs_dataset}@{plan.binlogs_snapshot}" not in backup_zfs
    ):
        problems.append(
            Problem(
                t,
                "dataset",
                plan.received,
                "exists, from an earlier restore",
                f"zfs destroy -r {plan.received} (on {t})",
            )
        )
    return problems


def primary_problems(plan: Plan, live: dict | None) -> list[Problem]:
    """mode=replica: the group's primary answers as one."""
    p = plan.primary
    if live is None:
        return [Problem(p.name, "host", p.name, "MariaDB does not answer", "start it first")]
    if live.get("Master_Host"):
        return [
            Problem(
                p.name,
                "role",
                "primary",
                "declared the primary, but the live server replicates",
                "update the inventory to what runs (a failover?) first",
            )
        ]
    return []


def live_problems(plan: Plan, found: dict) -> tuple[Plan, list[Problem]]:
    """The plan with its copy, and what the backup host's copies and binlogs, the target and (a
    replica's) primary say against the restore (pure; `found`: read_hosts)."""
    b, t = found["backup"], found["target"]
    listed = copies(plan, b["snapshots"])
    problems = copy_problems(plan, listed, b["binlogs"])
    copy = None if problems else chosen(plan, listed, t["zfs"])
    if copy is None and not problems:
        problems.append(Problem(plan.backup.name, "copies", plan.copies_root, "holds no copy to restore", ""))
    plan = dataclasses.replace(plan, copy=copy)
    if copy is not None:
        props = t["zfs"].get(plan.seeded, {})
        ours = props.get(ops.RESTORE_PROPERTY, {}).get("value") == plan.identity
        replayed = props.get(ops.REPLAYED_PROPERTY, {}).get("value")
        plan = dataclasses.replace(plan, replayed=ours and replayed not in (None, ops.STARTED))
    problems += target_problems(plan, t["state"], t["zfs"], t["live"], b["zfs"])
    if plan.mode == "replica" and plan.primary.name != plan.target.name:
        problems += primary_problems(plan, found["primary"]["live"])
    return plan, problems


def read_hosts(plan: Plan) -> dict:
    """The facts the pre-checks need, on the backup host, the target and (replica) the primary."""
    names = {"backup": plan.backup.name, "target": plan.target.name}
    if plan.mode == "replica":
        names["primary"] = plan.primary.name

    def read(h: Host) -> dict:
        if h.name == plan.backup.name:
            datasets = [n for m in plan.members for n in plan.copies_of(m)] + [plan.binlogs_dataset]
            return {
                "snapshots": h.get_fact(ZfsSnapshotPositions, datasets=[plan.copies_root]),
                "zfs": h.get_fact(
                    ZfsDatasetProperties,
                    datasets=[*datasets, f"{plan.binlogs_dataset}@{plan.binlogs_snapshot}"],
                ),
                "binlogs": h.get_fact(BinlogFiles, directory=plan.stream_directory) if plan.primary else [],
            }
        if h.name == plan.target.name:
            return {
                "state": h.get_fact(
                    SeedHostState,
                    unit=mariadb.SERVICE,
                    account="mysql",
                    server_binary=mariadb.SERVER_BINARY,
                    data_path=render.mariadb_paths(plan.target)["datadir"],
                ),
                "zfs": {
                    **h.get_fact(ZfsDatasetProperties, datasets=plan.target_names()),
                    # The snapshots in place and received too: which copy is not known yet.
                    **h.get_fact(ZfsDatasetProperties, datasets=plan.snapshotted(), recursive=True),
                },
                "live": h.get_fact(MariadbLiveRole),
            }
        return {"live": h.get_fact(MariadbLiveRole)}

    hosts = [inventory.get_host(n) for n in names.values()]
    return dict(zip(names, runtime.on_every_host(hosts, read), strict=True))


def checked(configs: dict[str, HostConfig], params: dict) -> tuple[Plan, dict]:
    """The plan with its copy and the facts read, or stop the run before any change (once per
    run)."""

    def compute() -> tuple[Plan | None, list[Problem], dict]:
        active = {h.name for h in inventory.get_active_hosts()}
        plan, problems = plan_problems(configs, params, active, datetime.now(UTC))
        if problems:
            return None, problems, {}
        found = read_hosts(plan)
        plan, problems = live_problems(plan, found)
        return plan, problems, found

    plan, problems, found = runtime.once_per_run(f"restore {params.get('host')}", compute)
    kit.refuse(problems, restore.RUNBOOK.what)
    return plan, found


# --- the report -------------------------------------------------------------------------------


def reached(lines: list[str]) -> str | None:
    for line in lines:
        if line.startswith(f"{ops.REPORT} "):
            return line[len(ops.REPORT) + 1 :]
    return None


def report_lines(plan: Plan, sent: list[str], replay: list[str] | None, took: object) -> list[str]:
    t, c = plan.target.name, plan.copy
    what = (
        f"to {utc(plan.time)}"
        if plan.time
        else ("then replication" if plan.mode == "replica" else "as it is")
    )
    lines = [
        f"==> restore of {t} ({plan.mode}) from {plan.backup.name}'s copies of {plan.cluster}: {what}",
        f"    copy: {c.member}@{c.snapshot}, taken {utc(c.creation)}, at GTID {c.gtid}",
        transfer.describe_send("sent", sent),
    ]
    if plan.time is not None:
        if replay is None:
            lines.append("    binlogs replayed in an earlier run")
        else:
            lines.append(f"    binlogs replayed: {reached(replay) or 'see the replay step'}")
    lines.append(f"    took {took}")
    if plan.mode == "standalone":
        lines.append(
            f"    {t} runs on its own (read_only ON, replicating from no one), outside its group; "
            "to put it back:"
        )
        lines.append(
            f"      pyinfra INVENTORY runbooks/restore.py --data host={t} --data mode=replica --data wipe=yes"
        )
    return lines


class Report(transfer.Report):
    """The report, after the target's last step (steps "copy", "binlogs", "replay", "last"); as
    every transfer's, removes the one-time key from a host that fails a step."""

    what = "restore"

    def __init__(self, plan: Plan, steps: dict, started: datetime) -> None:
        super().__init__(plan.backup, plan.target, plan.marker, steps)
        self.plan, self.started = plan, started

    def step_ended(self, state_: object, step: str) -> None:
        t, b = self.plan.target.name, self.plan.backup.name
        if step != "last" or not self.succeeded(state_, "last", t):
            return
        sent = [line for s in ("copy", "binlogs") if s in self.ids for line in self.output(state_, s, b)]
        replay = self.output(state_, "replay", t) if "replay" in self.ids else None
        took = datetime.now(UTC) - self.started
        logger.info("\n".join(report_lines(self.plan, sent, replay, took)))


# --- the run ----------------------------------------------------------------------------------


def run(configs: dict[str, HostConfig], params: dict) -> None:
    """The restore's steps for this host: the target and the backup host pass every step, the
    other hosts take no part."""
    plan, found = checked(configs, params)
    if host.name not in (plan.target.name, plan.backup.name):
        return
    private_key, public_key = runtime.once_per_run(
        f"restore key {plan.target.name}",
        lambda: transfer.one_time_key(f"{plan.marker}{datetime.now(UTC):%Y%m%dT%H%M%SZ}"),
    )
    blocks = transfer.received_blocks_compression(plan.datasets, found["backup"]["zfs"])
    steps(configs[host.name], plan, private_key, public_key, found["target"]["state"]["host_key"], blocks)


def wrapper_text(plan: Plan) -> str:
    names = [d.seed for d in plan.datasets] + ([plan.received] if plan.time else [])
    return render.render(
        "seed-receive.sh.j2", {"host": plan.target.name, "datasets": [seed_ops.q(n) for n in names]}
    )


def steps(
    cfg: HostConfig,
    plan: Plan,
    private_key: object,
    public_key: str,
    host_key: str,
    blocks: dict[str, str] | None = None,
) -> None:
    t, b = plan.target, plan.backup
    ends = transfer.Ends(cfg.name, b, t, "the backup host", "the target")
    is_target, is_backup = ends.receives, ends.sends
    not_target, not_backup = ends.not_receiver, ends.not_sender
    started = datetime.now(UTC)

    # 1. The target's server stops.
    engine.step(
        is_target,
        not_target,
        seed_ops.server_stopped,
        name=f"{t.name}: stop {mariadb.SERVICE}",
        unit=mariadb.SERVICE,
    )
    # 2. The one-time key: authorized on the target for the wrapper only; on the backup host in tmpfs.
    transfer.keys_in_place(ends, wrapper_text(plan), plan.marker, private_key, public_key, host_key)
    # 3. The binlogs, consistent while the streams write.
    received = f"{plan.received}@{plan.binlogs_snapshot}"
    if plan.replays:
        engine.step(
            is_backup,
            not_backup,
            ops.binlogs_snapshot,
            name=f"Snapshot @{plan.binlogs_snapshot} of {plan.binlogs_dataset}",
            dataset=plan.binlogs_dataset,
            snapshot=plan.binlogs_snapshot,
            target=t.name,
            received=received,
        )
    # 4. Full sends, the copy held meanwhile.
    to = {"replica": t.name, "address": t.replication_address, "bind_address": b.replication_address}
    c = plan.copy
    # The copy may be of the target itself, whose live datasets still hold its snapshot: that is
    # the copy in place only once this restore marked it.
    mark = {"snapshot": plan.seeded, "property": ops.RESTORE_PROPERTY, "value": plan.identity}
    copy_snapshots = [f"{c.data}@{c.snapshot}", f"{c.log}@{c.snapshot}"]
    engine.step(
        is_backup,
        not_backup,
        ops.held,
        name=f"{c.member}'s copy @{c.snapshot} held ({plan.binlogs_snapshot}) while it is sent",
        snapshots=copy_snapshots,
        tag=plan.binlogs_snapshot,
    )
    sent = engine.step(
        is_backup,
        not_backup,
        seed_ops.send,
        name=f"Full send of {c.member}'s copy @{c.snapshot} to {t.name}",
        datasets=[{"source": d.source, "seed": d.seed, "live": d.live} for d in plan.datasets],
        snapshot=c.snapshot,
        mark=mark,
        **to,
    )
    reported = {"copy": sent}
    if plan.replays:
        reported["binlogs"] = engine.step(
            is_backup,
            not_backup,
            seed_ops.send,
            name=f"Full send of the binlogs @{plan.binlogs_snapshot} to {t.name}",
            datasets=[{"source": plan.binlogs_dataset, "seed": plan.received, "live": plan.received}],
            snapshot=plan.binlogs_snapshot,
            **to,
        )
    # 5. The copy in place, marked, as the storage role declares its datasets.
    position_from = {"host": b.name, "snapshot": f"{c.data}@{c.snapshot}", "onto": plan.datasets[0].live}
    # Held on the target until the end: its sanoid prunes by name what its retention does not keep.
    transfer.received_in_place(
        ends, plan.datasets, c.snapshot, "the copy", position_from, blocks or {}, mark, plan.binlogs_snapshot
    )
    # 6. The server starts: a replica, or on its own with the binlogs replayed.
    if plan.mode == "replica":
        transfer.start_mariadb(cfg, t, plan.primary, plan.seeded, what="the copy")
    else:
        if is_target:
            mariadb.role_config(t)  # a declared replica's: read_only ON, so the fence lets it start
        paths = render.mariadb_paths(t)
        engine.step(
            is_target,
            not_target,
            ops.standalone,
            name=f"{t.name} starts on its own, replicating from no one",
            datadir=paths["datadir"],
            relay_log=paths["relay_log"],
            seeded=plan.seeded,
            service=mariadb.SERVICE,
        )
    if plan.replays:
        engine.step(
            is_target,
            not_target,
            ops.binlogs_mounted,
            name=f"{plan.received} mounted read-only at {BINLOGS_MOUNT}",
            dataset=plan.received,
            mountpoint=BINLOGS_MOUNT,
        )
        reported["replay"] = engine.step(
            is_target,
            not_target,
            ops.replayed,
            name=f"{plan.primary.name}'s binlogs replayed from GTID {c.gtid} to {utc(plan.time)}",
            directory=plan.received_directory,
            seeded=plan.seeded,
            moment=plan.time,
        )
    # 7. Cleanup.
    transfer.keys_removed(ends, plan.marker)
    engine.step(
        is_target,
        not_target,
        ops.released,
        name=f"The copy @{c.snapshot} released on {t.name}",
        snapshots=[f"{d.live}@{c.snapshot}" for d in plan.datasets],
        tag=plan.binlogs_snapshot,
    )
    engine.step(
        is_backup,
        not_backup,
        ops.released,
        name=f"{c.member}'s copy @{c.snapshot} released",
        snapshots=copy_snapshots,
        tag=plan.binlogs_snapshot,
    )
    if plan.time is not None:
        engine.step(
            is_backup,
            not_backup,
            seed_ops.snapshots_destroyed,
            name=f"Snapshot @{plan.binlogs_snapshot} of {plan.binlogs_dataset} destroyed",
            datasets=[plan.binlogs_dataset],
            snapshots=[plan.binlogs_snapshot],
            needed_unless={"host": t.name, "snapshot": received},
        )
        engine.step(
            is_target,
            not_target,
            ops.dataset_destroyed,
            name=f"{plan.received} destroyed",
            dataset=plan.received,
        )
    reported["last"] = transfer.asides_destroyed(ends, plan.datasets, "the restore", plan.wipe)
    if plan.mode == "replica":
        snapshots.retaken(t, is_target, not_target)  # the backup host has no data dataset to name
    kit.report_once(f"restore report {t.name}", Report(plan, reported, started))
