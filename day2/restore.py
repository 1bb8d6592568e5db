"""Restoring a PostgreSQL host from the pgBackRest repository on the backup host
(runbooks/restore.py; the archive and the backups: roles/pgbackrest.py). A MariaDB host is
restored from the backup host's ZFS copies and binlogs: day2/restore_mariadb.py, which shares
the parameters, the modes and the moment's reading with this module.

Two ends, named by `mode`:
- "replica": the newest backup restored as a standby (Heap's node replacement): it replays the
  archive, then streams from the group's primary through its slot. The target must be declared a
  replica of that primary in the inventory.
- "standalone": a copy for inspection, recovered to `time` (point-in-time recovery: every
  transaction committed up to that moment and none after) or, without a time, to the end of
  `backup` (a label, default the newest), then promoted: a server of its own on a new timeline
  that archives nothing (archive_mode off in its postgresql.auto.conf). It stays outside its
  group: nothing replicates from or to it, and should it restart while the group's primary runs,
  the fence keeps it down. Put it back with mode=replica (or runbooks/seed.py).

Pre-checks, before any host is changed (all problems at once): the target is a PostgreSQL host of
an inventory with a backup host; the repository holds a backup of its group (the stanza), one
that ends before `time`, and `time` is not in the future; the target is not its group's live
primary (switch over first); its data directory holds no database unless `--data wipe=yes`;
--limit includes the target, the backup host and the group's primary.

Steps, on the target only (the backup host serves the repository): the server stops;
`pgbackrest restore --delta` into the declared data directory, pg_wal linked to the declared WAL
directory; for a replica, primary_conninfo and the slot; the server starts (the fence lets a
standby and a recovery to a target start); checked to stream, or to have reached its target
and promoted; a report of what was restored and the moment it reached.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from pyinfra import host, inventory, logger

from day2 import kit
from facts.pgbackrest import MISSING_STANZA_DATA, MISSING_STANZA_PATH, PgbackrestInfo
from facts.postgresql import PostgresqlWalReceiver
from facts.seeding import SeedHostState
from model.hostdata import HostConfig
from model.problems import Problem
from operations import pg_restore as ops, postgresql as pg, postgresql_topology, runtime
from roles import backup, postgresql, render

MODES = ("replica", "standalone")
RUNBOOK = kit.Runbook(
    "runbooks/restore.py",
    "the restore",
    (
        kit.Parameter(
            "host", "the host to restore", required=True, example="HOST", host=True, formerly=("target",)
        ),
        kit.Parameter(
            "mode",
            "replica (joins its group) or standalone (a copy for inspection)",
            required=True,
            example="replica",
            parse=kit.text,
        ),
        kit.Parameter(
            "time",
            "standalone: the moment to recover to, with its UTC offset",
            example="'2026-12-05 06:10:00+00'",
            parse=kit.text,
        ),
        kit.Parameter(
            "backup",
            "standalone: the backup to restore (PostgreSQL a pgBackRest label, MariaDB a copy's "
            "snapshot name; default the newest)",
            example="NAME",
            parse=kit.text,
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
TIME_EXAMPLE = "'2026-12-05 06:10:00+00' (ISO 8601, with its UTC offset)"


@dataclass(frozen=True)
class Plan:
    target: HostConfig
    repository: HostConfig  # the backup host whose repository is restored from (repo1)
    primary: HostConfig | None  # the group's declared primary (a replica streams from it)
    mode: str
    time: datetime | None
    backup: str | None  # a label; None: the newest (or, with a time, pgBackRest's choice)
    wipe: bool

    @property
    def stanza(self) -> str:
        return self.target.cluster

    @property
    def data_directory(self) -> str:
        return render.postgresql_paths(self.target)["data_directory"]

    @property
    def wal_directory(self) -> str:
        return render.postgresql_paths(self.target)["wal_directory"]

    def options(self) -> list[str]:
        """pgbackrest restore's options for this plan."""
        out = ["--delta", f"--link-map=pg_wal={self.wal_directory}"]
        if self.backup:
            out.append(f"--set={self.backup}")
        if self.mode == "replica":
            return [*out, "--type=standby"]
        # Promoted at its target, so that the transactions open there end (paused, a table dropped
        # after the target stays locked by the DROP's replayed lock); archives nothing.
        out += ["--archive-mode=off", "--target-action=promote"]
        if self.time:
            return [*out, "--type=time", f"--target={pg_time(self.time)}"]
        return [*out, "--type=immediate"]


def pg_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")


def parse_time(text: str) -> datetime:
    """An ISO 8601 moment with its offset ("Z" or +HH[:MM]); a moment without one is refused
    (whose clock would it be?)."""
    value = text.strip().replace(" ", "T", 1)
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    if len(value) >= 3 and value[-3] in "+-" and value[-2:].isdigit():
        value += ":00"
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError("no UTC offset")
    return moment


Bad = Callable[[str, object, str, str], None]  # (key, value, message, fix): one problem


def mode_checked(mode: object, bad: Bad) -> None:
    if mode not in MODES:
        bad(
            "mode",
            mode,
            "not a way to restore",
            '"replica" (joins its group) or "standalone" (for inspection)',
        )


def time_checked(
    params: dict, now: datetime, bad: Bad, replica_why: str, shown: Callable[[datetime], str]
) -> datetime | None:
    """The `time` parameter (both engines' runbooks): a past moment with its offset, for a
    stand-alone restore only; None when absent or not a moment."""
    if params.get("time") is None:
        return None
    try:
        moment = parse_time(str(params["time"]))
    except ValueError as exc:
        bad("time", params["time"], f"not a moment ({exc})", f"e.g. {TIME_EXAMPLE}")
        return None
    if params.get("mode") == "replica":
        bad("time", params["time"], replica_why, "drop time, or mode=standalone")
    if moment > now:
        bad("time", params["time"], f"is in the future (now {shown(now)})", "a moment already past")
    return moment


def wipe_checked(params: dict) -> bool:
    """Whether the target may be wiped (`wipe`, parsed by the kit: yes or no)."""
    return params.get("wipe") is True or str(params.get("wipe")).lower() in kit.YES


def plan_problems(
    configs: dict[str, HostConfig], params: dict, active: set[str], now: datetime
) -> tuple[Plan | None, list[Problem]]:
    """The plan from the runbook's parameters and the inventory alone (pure)."""
    problems: list[Problem] = []
    name = params.get("host")

    def bad(key: str, value: object, message: str, fix: str) -> None:
        problems.append(Problem(name if name in configs else None, key, value, message, fix))

    if not name:
        bad("host", None, "missing", "run with --data host=HOST")
        return None, problems
    if name not in configs:
        bad("host", name, "not a host of the inventory", "name a PostgreSQL host of the inventory")
        return None, problems
    target = configs[name]
    if target.engine != "postgresql":
        fix = "name a PostgreSQL or MariaDB host"
        bad("host", name, f"not a PostgreSQL host ({target.engine or target.role})", fix)
        return None, problems
    mode = params.get("mode")
    mode_checked(mode, bad)
    repositories = backup.backup_hosts(list(configs.values()))
    if not repositories:
        bad(
            "inventory", None, "has no backup host, so no repository", 'add the backup host (role = "backup")'
        )
    primaries = [c for c in configs.values() if c.cluster == target.cluster and c.role == "primary"]
    primary = primaries[0] if primaries else None
    if mode == "replica" and (target.role != "replica" or primary is None or target.primary != primary.name):
        bad(
            "role",
            target.role,
            "a restore as a replica needs the target declared a replica of its group's primary",
            "declare it so in the inventory, or restore with mode=standalone",
        )
    if mode == "replica" and target.name == (primary.name if primary else None):
        bad("host", name, "is the group's declared primary", "switch over first (runbooks/switchover.py)")
    moment = time_checked(params, now, bad, "a replica replays to the newest WAL", pg_time)
    if params.get("time") is not None and params.get("backup"):
        bad(
            "backup",
            params["backup"],
            "given with a time",
            "one of them: pgBackRest picks the backup for a time",
        )
    wipe = wipe_checked(params)
    needed = [name] + ([repositories[0].name] if repositories else []) + ([primary.name] if primary else [])
    problems += kit.left_out(
        needed, active, fix="include the target, the backup host and the primary", host=name
    )
    if problems:
        return None, problems
    plan = Plan(target, repositories[0], primary, mode, moment, params.get("backup"), wipe)
    return plan, []


def live_problems(
    plan: Plan, info: dict | None, target_state: dict, live: dict | None, primary_live: dict | None = None
) -> list[Problem]:
    """What the repository, the target and the group's declared primary (`primary_live`, when it
    is another host) say against the restore (pure)."""
    t, problems = plan.target.name, []
    repo = plan.repository.name
    if info is None or info["status"] in (MISSING_STANZA_PATH, MISSING_STANZA_DATA):
        problems.append(
            Problem(
                repo,
                f"stanza {plan.stanza}",
                None,
                "not in the repository",
                "converge with the backup host first",
            )
        )
    elif not info["backups"]:
        problems.append(
            Problem(
                repo,
                f"stanza {plan.stanza}",
                info["message"],
                "holds no backup",
                "converge (it takes the first)",
            )
        )
    else:
        labels = [b["label"] for b in info["backups"]]
        if plan.backup and plan.backup not in labels:
            problems.append(
                Problem(
                    repo, "backup", plan.backup, "not a backup of the stanza", f"one of {', '.join(labels)}"
                )
            )
        if plan.time and plan.time.timestamp() < min(b["stop"] for b in info["backups"]):
            oldest = datetime.fromtimestamp(min(b["stop"] for b in info["backups"]), UTC)
            problems.append(
                Problem(
                    repo,
                    "time",
                    pg_time(plan.time),
                    f"is before the end of the oldest backup ({pg_time(oldest)})",
                    "a later moment: the WAL before it was expired with its backup",
                )
            )
    if not target_state["installed"]:
        problems.append(Problem(t, "server", None, "PostgreSQL is not installed", "converge the host first"))
    declared = plan.primary.name if plan.primary else None
    # A primary that is not its group's: a stand-alone copy restored here before (wipe replaces
    # it). The group's own primary, declared or after a failover, is never restored over.
    copy = declared not in (None, t) and primary_live is not None and not primary_live["in_recovery"]
    if live is not None and not live["in_recovery"] and not copy:
        why = "is its group's declared primary" if declared == t else f"is a primary, and {declared} is not"
        fix = "switch over first (runbooks/switchover.py)" if declared == t else "update the inventory first"
        problems.append(Problem(t, "server", "primary", why, fix))
    elif target_state["pg_version"] and not plan.wipe:
        problems.append(
            Problem(
                t,
                "data directory",
                plan.data_directory,
                f"holds a PostgreSQL {target_state['pg_version']} database "
                f"({'running' if live else 'stopped'})",
                "--data wipe=yes to replace it",
            )
        )
    return problems


def checked(configs: dict[str, HostConfig], params: dict) -> Plan:
    """The plan, or stop the run before any change (once per run)."""

    def compute() -> tuple[Plan | None, list[Problem]]:
        active = {h.name for h in inventory.get_active_hosts()}
        plan, problems = plan_problems(configs, params, active, datetime.now(UTC))
        if problems:
            return None, problems
        repository, target = inventory.get_host(plan.repository.name), inventory.get_host(plan.target.name)

        def read(h: object) -> dict:
            if h is repository:
                return {"info": h.get_fact(PgbackrestInfo, stanza=plan.stanza)}
            if h is not target:
                return {"live": h.get_fact(PostgresqlWalReceiver)}
            return {
                "state": h.get_fact(
                    SeedHostState,
                    unit=postgresql.cluster(plan.target).unit,
                    account="postgres",
                    server_binary=postgresql.cluster(plan.target).server_binary,
                    data_path=plan.data_directory,
                ),
                "live": h.get_fact(PostgresqlWalReceiver),
            }

        hosts = [repository, target]
        if plan.primary and plan.primary.name != plan.target.name:
            hosts.append(inventory.get_host(plan.primary.name))
        found = runtime.on_every_host(hosts, read)
        primary_live = found[2]["live"] if len(found) > 2 else None
        return plan, live_problems(plan, found[0]["info"], found[1]["state"], found[1]["live"], primary_live)

    plan, problems = runtime.once_per_run(f"restore {params.get('host')}", compute)
    kit.refuse(problems, RUNBOOK.what)
    return plan


class Report(kit.Report):
    """The report, after the last step on the target (step "last")."""

    def __init__(self, plan: Plan, last: object, started: datetime) -> None:
        super().__init__({"last": last})
        self.plan, self.started = plan, started

    def step_ended(self, state_: object, step: str) -> None:
        t = self.plan.target.name
        if not self.succeeded(state_, step, t):
            return
        took = datetime.now(UTC) - self.started
        logger.info("\n".join(report_lines(self.plan, self.output(state_, step, t), took)))


def report_lines(plan: Plan, reached: list[str], took: object) -> list[str]:
    t = plan.target.name
    what = (
        f"to {pg_time(plan.time)}"
        if plan.time
        else (
            "the newest backup, then the archive"
            if plan.mode == "replica"
            else f"backup {plan.backup or 'newest'}"
        )
    )
    lines = [
        f"==> restore of {t} ({plan.mode}) from {plan.repository.name}'s repository, "
        f"stanza {plan.stanza}: {what}"
    ]
    lines += [f"    {line}" for line in reached if line.strip()]
    lines.append(f"    took {took}")
    if plan.mode == "standalone":
        lines.append(
            f"    {t} runs on its own (promoted, archiving nothing), outside its group; to put it back:"
        )
        lines.append(
            f"      pyinfra INVENTORY runbooks/restore.py --data host={t} --data mode=replica --data wipe=yes"
        )
    return lines


def run(configs: dict[str, HostConfig], params: dict) -> None:
    """A PostgreSQL restore's steps on the target; nothing on the other hosts (the dispatcher:
    day2/restore_run.py)."""
    plan = checked(configs, params)
    if host.name != plan.target.name:
        return
    started = datetime.now(UTC)
    steps(plan, started)


def steps(plan: Plan, started: datetime) -> None:
    t = plan.target.name
    c = postgresql.cluster(plan.target)
    ops.server_stopped(name=f"{t}: stop {c.unit}", unit=c.unit)
    ops.restored(
        name=f"{t}: pgbackrest restore ({plan.mode})",
        stanza=plan.stanza,
        options=plan.options(),
        data_directory=plan.data_directory,
    )
    ops.registered(
        name=f"{t}: registered as PostgreSQL {c.version}/{c.name}",
        version=c.version,
        cluster_name=c.name,
        data_directory=plan.data_directory,
    )
    if plan.mode == "replica":
        p = plan.primary
        conninfo = postgresql_topology.conninfo(
            p.replication_address, render.PG_PORT, postgresql.REPLICATION_USER, postgresql.PASSFILE, t
        )
        ops.standby_of(
            name=f"{t}: a standby of {p.name} through its slot",
            data_directory=plan.data_directory,
            conninfo=conninfo,
            slot=pg.slot_name(t),
        )
    ops.started(name=f"{t}: start {c.unit}", unit=c.unit)
    if plan.mode == "replica":
        postgresql_topology.streams_from(
            name=f"{t} streams from {plan.primary.name}",
            primary_address=plan.primary.replication_address,
            wait=600,
        )
        last = ops.replayed(name=f"{t}: where it is", promoted=False, unit=c.unit, log=c.log)
    else:
        last = ops.replayed(
            name=f"{t}: recovered to its target, promoted", promoted=True, unit=c.unit, log=c.log
        )
    kit.report_once(f"restore report {t}", Report(plan, last, started))
