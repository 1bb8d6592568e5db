"""`./dbzfs status INVENTORY [--json]` (`python -m day2.status`): what the fleet is doing, read
from every host at once, as `patronictl list` answers it for Patroni.

Per replication group (an engine and its cluster, in inventory order), each host: its role as the
live server says it is (and the inventory's when they differ), whether it replicates and how far
behind (MariaDB: SHOW SLAVE STATUS's IO and SQL threads and Seconds_Behind_Master; PostgreSQL: the
standby's WAL receiver, its replay_lag as its primary's pg_stat_replication measures it, and the
WAL it received but has not replayed yet), its pool's health and capacity against the host's
zfs_capacity_threshold, the newest snapshot of the engine's datasets, and, when the inventory has
a backup host, the newest copy of the host's datasets there (<pool>/backup/<cluster>/<host>/);
per PostgreSQL group with a backup host, pgBackRest's newest backup of its stanza. Backup hosts:
their pool and how many copies they hold.

Read-only: the existing facts (facts/mariadb.py, facts/postgresql.py, facts/zfs.py,
facts/pgbackrest.py), read through pyinfra's API (the inventory loaded by pyinfra's own loader,
every host connected and read in parallel, no operation, nothing changed on any host). The
inventory's data is validated first, before any connection, as `./dbzfs validate` does.

Problems (each host's `problems`, each group's, and the flat list at the top): a host that cannot
be reached or read; a server that does not answer; a live role or source that disagrees with the
inventory (roles/topology.py's words); two live primaries in a group; a replica that does not
replicate, or lags more than replica_lag_alert_seconds; a pool not imported, not ONLINE, or fuller
than zfs_capacity_threshold (over it, as the ZpoolCapacityHigh alert); on a host that takes the
snapshots in its live role (snapshot_on), no snapshot or a newest one older than
snapshot_max_age_hours, and on the backup host no copy of it or a newest one older than the backup
host's backup_max_age_hours; pgBackRest not answering, a stanza not ok, or its newest backup older
than pgbackrest_backup_max_age_hours.

Exit status: 0 every host read and no problem; 1 a problem (an unreachable host included); 2
misuse (bad arguments, no such inventory, data the validator refuses: nothing is connected to).
`--help` prints the usage and reads nothing.

`--json` prints one object; its keys are always present (null when unknown or not applicable):

    {
      "inventory": "inventories/lab.py",
      "read_at": 1796450403,              # epoch seconds (this machine's clock): ages count from it
      "healthy": true,                    # no problem anywhere (the exit status 0)
      "problems": ["db2: ..."],           # every problem, "HOST: what" or "GROUP: what"
      "groups": {
        "mariadb": {                      # the cluster's name
          "engine": "mariadb",
          "pgbackrest": null,             # PostgreSQL with a backup host: see below
          "problems": [],                 # the group's own (two primaries, pgBackRest)
          "hosts": {
            "db2": {
              "reachable": true,          # connected to (ssh)
              "error": null,              # why it could not be connected to or read; the fields
                                          # below are then null
              "role": "replica",          # the live server's: "primary" | "replica" | "read-only"
                                          # (MariaDB read_only, replicating from nobody) | null
                                          # (the server does not answer, or the host is unreachable)
              "inventory_role": "replica",
              "server_answers": true,     # null: unreachable
              "replication": {            # null for a host that neither replicates nor is a
                                          # declared replica (a primary), or is unreachable/down
                "source": "db1",          # the host it replicates from (the address when it is
                                          # not in the inventory), null: from nobody
                "running": true,          # MariaDB: both threads run; PostgreSQL: streaming
                "io_running": "Yes",      # MariaDB's Slave_IO_Running (null: PostgreSQL)
                "sql_running": "Yes",     # MariaDB's Slave_SQL_Running (null: PostgreSQL)
                "state": null,            # PostgreSQL's WAL receiver status, "" without one
                                          # (null: MariaDB)
                "lag_seconds": 0,         # MariaDB's Seconds_Behind_Master, PostgreSQL's
                                          # replay_lag on its primary; null: unknown
                "unreplayed_bytes": null, # PostgreSQL: WAL received, not replayed yet
                "error": null             # MariaDB's Last_IO_Error / Last_SQL_Error
              },
              "pool": {"name": "dbpool", "health": "ONLINE", "capacity_percent": 4,
                       "threshold_percent": 80, "over_threshold": false},
                                          # health and capacity null: the pool is not imported
              "takes_snapshots": true,    # in its live role (snapshot_on); null: unknown
              "newest_snapshot": {"name": "dbpool/datastore/mysql@autosnap_...",
                                  "created": 1796449803, "age_seconds": 600},   # null: none
              "newest_backup": {"host": "backup1", "read": true,
                                "name": "backuppool/backup/mariadb/db2/data@autosnap_...",
                                "created": 1796449803, "age_seconds": 600},
                                          # null: the inventory has no backup host; "read" false:
                                          # the backup host could not be read; name null: no copy
              "problems": []
            }
          }
        }
      },
      "backup_hosts": {
        "backup1": {"reachable": true, "error": null, "pool": {...}, "copies": 84, "problems": []}
      }
    }

    "pgbackrest": {"host": "backup1", "read": true, "status": 0, "message": "ok",
                   "label": "20261205-010000F", "type": "full", "stopped": 1796432412,
                   "age_seconds": 18000}     # label... null: no backup yet
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from day2.status_render import (  # noqa: F401 (status.render_* for callers)
    ENGINE_NAMES,
    duration,
    render_json,
    render_text,
    seconds,
)
from facts.mariadb import MariadbLiveRole
from facts.pgbackrest import PgbackrestInfo
from facts.postgresql import PostgresqlLiveRole, PostgresqlStandbyPosition, PostgresqlStandbys
from facts.zfs import ZfsSnapshotPositions, ZpoolProperties
from model import secrets as secrets_mod
from model.hostdata import HostConfig
from model.problems import InventoryError, format_problems
from operations import runtime
from roles import backup_fleet, engine, pgbackrest, snapshots, topology
from validation import REPO_ROOT, load_inventory, validate

FACT_TIMEOUT = 60  # seconds one fact's command may take before its host counts as unreadable


@dataclass
class Reading:
    """What was read on one host, in the facts' own shapes. `error`: why the host could not be
    connected to (`connected` False) or, connected, one of its facts could not be read."""

    error: str | None = None
    connected: bool = False
    live: dict | None = None  # MariadbLiveRole / PostgresqlLiveRole; None: the server does not answer
    position: dict | None = None  # a PostgreSQL standby's PostgresqlStandbyPosition
    standbys: dict | None = None  # a PostgreSQL primary's PostgresqlStandbys
    pool: dict | None = None  # ZpoolProperties; None: the pool is not imported
    snapshots: list = field(default_factory=list)  # ZfsSnapshotPositions of the engine's datasets
    copies: list = field(default_factory=list)  # a backup host's ZfsSnapshotPositions of <pool>/backup
    pgbackrest: dict = field(default_factory=dict)  # a backup host's: stanza -> PgbackrestInfo or None


# --- the pure part: readings -> the report ------------------------------------------------------


def _role_of(live: dict | None) -> str | None:
    """The live server's role from topology.live_role's shape."""
    if live is None:
        return None
    if live["follower"]:
        return "replica"
    return "primary" if live["writable"] else "read-only"


def _age(now: float, created: float | None) -> int | None:
    return None if created is None else max(0, int(now - created))


def _newest(found: Sequence[dict], prefer: str | None = None) -> dict | None:
    """The newest snapshot of a list of {"name", "creation"}; of equals, the one of `prefer`."""
    if not found:
        return None
    return max(found, key=lambda s: (s["creation"], bool(prefer) and s["name"].startswith(f"{prefer}@")))


def _pool(cfg: HostConfig, reading: Reading) -> tuple[dict, list[str]]:
    """The pool's row (ZpoolProperties) and its problems."""
    name, threshold, props = cfg.pool.name, cfg.capacity_threshold, reading.pool
    health = capacity = over = None
    found = []
    if props is None:
        found.append(f"pool {name} is not imported")
    else:
        health = props.get("health", {}).get("value")
        raw = str(props.get("capacity", {}).get("value", ""))
        capacity = int(raw) if raw.isdigit() else None
        over = None if capacity is None else capacity > threshold  # as ZpoolCapacityHigh
        if health != "ONLINE":
            found.append(f"pool {name} is {health}, not ONLINE")
        if over:
            found.append(f"pool {name} is {capacity}% full, over zfs_capacity_threshold = {threshold}%")
    row = {"name": name, "health": health, "capacity_percent": capacity, "threshold_percent": threshold}
    return {**row, "over_threshold": over}, found


def _takes_snapshots(cfg: HostConfig, members: Sequence[HostConfig], role: str | None) -> bool | None:
    """Whether the host's snapshot job takes them in the server's live role (roles/snapshots.py)."""
    mode = snapshots.when(cfg, members)
    if mode is None or mode == "always":
        return mode == "always"
    return None if role is None else role == mode


def _name_of(address: str | None, members: Sequence[HostConfig]) -> str | None:
    if not address:
        return None
    return next((m.name for m in members if address in (m.replication_address, m.name)), address)


def _reading(readings: Mapping[str, Reading], name: str) -> Reading:
    return readings.get(name) or Reading(error="not read")


def _unread(reading: Reading) -> str:
    return reading.error if reading.connected else f"unreachable: {reading.error}"


def _replication(
    cfg: HostConfig,
    members: Sequence[HostConfig],
    reading: Reading,
    live: dict,
    readings: Mapping[str, Reading],
) -> dict:
    source = _name_of(live["source"], members)
    row = {
        "source": source,
        "running": False,
        "io_running": None,
        "sql_running": None,
        "state": None,
        "lag_seconds": None,
        "unreplayed_bytes": None,
        "error": None,
    }
    if cfg.engine == "mariadb":
        fact = reading.live or {}
        io, sql = fact.get("Slave_IO_Running"), fact.get("Slave_SQL_Running")
        behind = fact.get("Seconds_Behind_Master")
        errors = [fact.get(k) for k in ("Last_IO_Error", "Last_SQL_Error") if fact.get(k)]
        row.update(
            running=io == "Yes" and sql == "Yes",
            io_running=io,
            sql_running=sql,
            lag_seconds=int(behind) if behind and behind.isdigit() else None,
            error="; ".join(errors) or None,
        )
        return row
    position = reading.position or {}
    state = position.get("status") if reading.position is not None else None
    primary = readings.get(source or "")
    walsender = ((primary.standbys if primary else None) or {}).get(cfg.name)
    row.update(
        running=state == "streaming",
        state=state,
        lag_seconds=walsender["replay_lag"] if walsender else None,
        unreplayed_bytes=_lsn_bytes(position.get("received"), position.get("replayed")),
    )
    return row


def _lsn(text: str | None) -> int | None:
    """A PostgreSQL LSN ("0/5000148") as a number of bytes."""
    high, sep, low = (text or "").partition("/")
    try:
        return (int(high, 16) << 32) + int(low, 16) if sep else None
    except ValueError:
        return None


def _lsn_bytes(received: str | None, replayed: str | None) -> int | None:
    a, b = _lsn(received), _lsn(replayed)
    return None if a is None or b is None else max(0, a - b)


def _replication_problems(cfg: HostConfig, row: dict) -> list[str]:
    if row["source"] is None:
        return ["replicates from nobody"]
    found = []
    if not row["running"]:
        if cfg.engine == "mariadb":
            why = f"IO thread {row['io_running']}, SQL thread {row['sql_running']}"
            why += f": {row['error']}" if row["error"] else ""
        else:
            why = (
                f"its WAL receiver is {row['state']!r}, not streaming" if row["state"] else "no WAL receiver"
            )
        found.append(f"replication from {row['source']} stopped ({why})")
    limit = cfg.monitoring.replica_lag_alert_seconds
    if row["lag_seconds"] is not None and row["lag_seconds"] > limit:
        found.append(f"{seconds(row['lag_seconds'])} behind, over replica_lag_alert_seconds = {limit}")
    return found


def _copy_prefix(backup: HostConfig, cfg: HostConfig) -> str:
    return f"{backup_fleet.copies_root(backup)}/{cfg.cluster}/{cfg.name}/"


def _newest_backup(
    cfg: HostConfig, backups: Sequence[HostConfig], readings: Mapping[str, Reading], now: float
) -> dict | None:
    """The newest copy of the host's datasets on the backup hosts; None without a backup host."""
    if not backups:
        return None
    read = [b for b in backups if _reading(readings, b.name).error is None]
    copies = []
    for b in read:
        prefix = _copy_prefix(b, cfg)
        newest = _newest(
            [c for c in readings[b.name].copies if c["name"].startswith(prefix)], f"{prefix}data"
        )
        if newest is not None:
            copies.append((newest["creation"], b.name, newest))
    row = {"host": (read or backups)[0].name, "read": bool(read), "name": None, "created": None}
    row["age_seconds"] = None
    if copies:
        created, host, newest = max(copies, key=lambda c: c[0])
        row.update(host=host, name=newest["name"], created=created, age_seconds=_age(now, created))
    return row


def host_status(
    cfg: HostConfig,
    members: Sequence[HostConfig],
    readings: Mapping[str, Reading],
    backups: Sequence[HostConfig],
    now: float,
) -> dict:
    """One database host's row from its reading (and its primary's, its backup hosts')."""
    reading = _reading(readings, cfg.name)
    row: dict = {
        "reachable": reading.error is None or reading.connected,
        "error": reading.error,
        "role": None,
        "inventory_role": cfg.role,
        "server_answers": None,
        "replication": None,
        "pool": None,
        "takes_snapshots": None,
        "newest_snapshot": None,
        "newest_backup": _newest_backup(cfg, backups, readings, now),
        "problems": [],
    }
    problems: list[str] = row["problems"]
    backup = row["newest_backup"]
    if reading.error is not None:
        problems.append(_unread(reading))
        return row
    live = topology.live_role(cfg.engine, reading.live)
    role = _role_of(live)
    row.update(role=role, server_answers=live is not None)
    row["pool"], found = _pool(cfg, reading)
    if live is None:
        problems.append(f"the {ENGINE_NAMES.get(cfg.engine, cfg.engine)} server does not answer")
    else:
        problems += [p.message for p in topology.problems(cfg, engine.Group(cfg, tuple(members)), live)]
        if live["follower"] or (cfg.role == "replica" and not live["writable"]):
            row["replication"] = _replication(cfg, members, reading, live, readings)
            problems += _replication_problems(cfg, row["replication"])
    problems += found
    takes = row["takes_snapshots"] = _takes_snapshots(cfg, members, role)
    newest = _newest(reading.snapshots, prefer=cfg.dataset_name(cfg.data_dataset))
    if newest is not None:
        row["newest_snapshot"] = {
            "name": newest["name"],
            "created": newest["creation"],
            "age_seconds": _age(now, newest["creation"]),
        }
    if takes:
        limit = cfg.monitoring.snapshot_max_age_hours
        if newest is None:
            problems.append(f"takes the snapshots (snapshot_on = {cfg.snapshot_on!r}) but has none")
        elif row["newest_snapshot"]["age_seconds"] > limit * 3600:
            age = duration(row["newest_snapshot"]["age_seconds"])
            problems.append(f"newest snapshot {age} old, over snapshot_max_age_hours = {limit}")
        if backup is not None and backup["read"]:
            hours = next(b for b in backups if b.name == backup["host"]).backup_max_age_hours
            if backup["name"] is None:
                problems.append(f"no copy of its snapshots on {backup['host']}")
            elif backup["age_seconds"] > hours * 3600:
                problems.append(
                    f"newest copy on {backup['host']} {duration(backup['age_seconds'])} old, "
                    f"over backup_max_age_hours = {hours}"
                )
    return row


def _pgbackrest(
    stanza: str, backups: Sequence[HostConfig], readings: Mapping[str, Reading], now: float
) -> tuple[dict, list[str]]:
    """pgBackRest's newest backup of a stanza on the backup hosts (each holds a repository)."""
    answers = []
    for b in backups:
        reading = _reading(readings, b.name)
        if reading.error is None:
            answers.append((b, reading.pgbackrest.get(stanza)))
    row = {"host": backups[0].name, "read": False, "status": None, "message": None}
    row.update(label=None, type=None, stopped=None, age_seconds=None)
    if not answers:
        return row, []  # the backup host's own row says why
    found: list[str] = []
    best = None
    for b, info in answers:
        if info is None:
            found.append(f"pgBackRest does not answer on {b.name}")
            continue
        if info["status"] != 0:
            found.append(
                f"pgBackRest on {b.name}: stanza {stanza}: {info['message']} (status {info['status']})"
            )
        newest = max(info["backups"], key=lambda x: x["stop"], default=None)
        key = newest["stop"] if newest else -1
        if best is None or key > best[0]:
            best = (key, b, info, newest)
    if best is None:
        return row, found
    _, b, info, newest = best
    row.update(host=b.name, read=True, status=info["status"], message=info["message"])
    if newest is not None:
        age = _age(now, newest["stop"])
        row.update(label=newest["label"], type=newest["type"], stopped=newest["stop"], age_seconds=age)
        hours = b.pgbackrest_backup_max_age_hours
        if age > hours * 3600:
            found.append(
                f"pgBackRest's newest backup ({newest['label']}) {duration(age)} old, over "
                f"pgbackrest_backup_max_age_hours = {hours}"
            )
    return row, found


def _group_key(cfg: HostConfig, engines: dict[str, str]) -> str:
    """The group's name: its cluster's, with the engine when another engine has the same."""
    taken = engines.setdefault(cfg.cluster, cfg.engine)
    return cfg.cluster if taken == cfg.engine else f"{cfg.cluster} ({cfg.engine})"


def status(
    configs: Sequence[HostConfig], readings: Mapping[str, Reading], now: float, inventory: str = ""
) -> dict:
    """The report (the module docstring's JSON shape) from every host's reading."""
    databases = backup_fleet.database_hosts(configs)
    backups = backup_fleet.backup_hosts(configs)
    archiving = pgbackrest.enabled(configs)
    members: dict[tuple[str, str], list[HostConfig]] = {}
    for cfg in databases:
        members.setdefault((cfg.engine, cfg.cluster), []).append(cfg)
    engines: dict[str, str] = {}
    groups: dict[str, dict] = {}
    for (engine_name, cluster), group in members.items():
        key = _group_key(group[0], engines)
        hosts = {c.name: host_status(c, group, readings, backups, now) for c in group}
        problems: list[str] = []
        primaries = [name for name, h in hosts.items() if h["role"] == "primary"]
        if len(primaries) > 1:
            problems.append(f"{len(primaries)} live primaries: {', '.join(primaries)}")
        archive = None
        if archiving and engine_name == "postgresql":
            archive, found = _pgbackrest(cluster, backups, readings, now)
            problems += found
        groups[key] = {"engine": engine_name, "pgbackrest": archive, "problems": problems, "hosts": hosts}
    backup_rows = {b.name: _backup_host(b, readings, databases) for b in backups}
    flat = [f"{key}: {p}" for key, g in groups.items() for p in g["problems"]]
    flat += [f"{name}: {p}" for g in groups.values() for name, h in g["hosts"].items() for p in h["problems"]]
    flat += [f"{name}: {p}" for name, h in backup_rows.items() for p in h["problems"]]
    return {
        "inventory": inventory,
        "read_at": int(now),
        "healthy": not flat,
        "problems": flat,
        "groups": groups,
        "backup_hosts": backup_rows,
    }


def _backup_host(cfg: HostConfig, readings: Mapping[str, Reading], databases: Sequence[HostConfig]) -> dict:
    reading = _reading(readings, cfg.name)
    reachable = reading.error is None or reading.connected
    row: dict = {"reachable": reachable, "error": reading.error, "pool": None, "copies": None}
    row["problems"] = problems = []
    if reading.error is not None:
        problems.append(_unread(reading))
        return row
    row["pool"], found = _pool(cfg, reading)
    problems += found
    prefixes = tuple(_copy_prefix(cfg, d) for d in databases)
    row["copies"] = sum(1 for c in reading.copies if c["name"].startswith(prefixes))
    return row


# --- the pure part: the report -> text or JSON -------------------------------------------------


class Unreadable(Exception):
    """A host's fact could not be read (pyinfra failed the host)."""


def _plan(cfg: HostConfig, configs: Sequence[HostConfig]) -> Callable[[Callable], Reading]:
    """What to read on a host, given `get(fact_cls, *args, optional=False)`."""

    def database(get: Callable) -> Reading:
        reading = Reading()
        if cfg.engine == "mariadb":
            reading.live = get(MariadbLiveRole)
        elif cfg.engine == "postgresql":
            reading.live = get(PostgresqlLiveRole)
            if reading.live is not None and reading.live["in_recovery"]:
                reading.position = get(PostgresqlStandbyPosition)
            elif reading.live is not None:
                reading.standbys = get(PostgresqlStandbys)
        reading.pool = get(ZpoolProperties, cfg.pool.name)
        if cfg.dataset_roles:
            reading.snapshots = get(ZfsSnapshotPositions, snapshots.datasets(cfg))
        return reading

    def backup(get: Callable) -> Reading:
        reading = Reading(pool=get(ZpoolProperties, cfg.pool.name))
        reading.copies = get(ZfsSnapshotPositions, [backup_fleet.copies_root(cfg)])
        if pgbackrest.enabled(configs):
            for stanza in pgbackrest.stanzas(configs):
                reading.pgbackrest[stanza] = get(PgbackrestInfo, stanza, optional=True)
        return reading

    return backup if cfg.is_backup_host else database


class _Log(logging.Handler):
    """pyinfra's warnings and errors, kept to explain a host that could not be read."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def about(self, name: str) -> str:
        prefix = f"[{name}]"
        said = [line[len(prefix) :].strip() for line in self.lines if line.startswith(prefix)]
        return "; ".join(said)[-500:]


def read(path: str, configs: Sequence[HostConfig], timeout: int = FACT_TIMEOUT) -> dict[str, Reading]:
    """Every host of the inventory connected and read at once, through pyinfra's API (no
    operation): host name -> Reading, with the reason for one that could not be."""
    import gevent
    from pyinfra.api import Config, State
    from pyinfra.api.connect import disconnect_all
    from pyinfra.api.exceptions import PyinfraError
    from pyinfra.api.facts import get_fact
    from pyinfra.api.host import Host
    from pyinfra.api.state import BaseStateCallback, StateStage
    from pyinfra.context import ctx_config, ctx_inventory, ctx_state

    # pyinfra's own loader (its import monkey-patches the interpreter for gevent, as pyinfra does)
    from pyinfra_cli.inventory import make_inventory

    errors: dict[str, str] = {}

    class ConnectErrors(BaseStateCallback):
        def host_connect_error(self, state: State, host: Host, error: Exception) -> None:
            errors[host.name] = str(error.args[0] if error.args else error) or type(error).__name__

    def connect(h: Host) -> None:
        try:
            h.connect(show_errors=False)
        except Exception as exc:  # noqa: BLE001 - one host's failure is its row, not a crash
            errors[h.name] = f"{type(exc).__name__}: {exc}"

    by_name = {c.name: c for c in configs}
    log = _Log()
    pyinfra_logger = logging.getLogger("pyinfra")
    saved = pyinfra_logger.handlers[:], pyinfra_logger.propagate
    pyinfra_logger.handlers, pyinfra_logger.propagate = [log], False
    state = State()
    state.cwd = str(REPO_ROOT)
    found: dict[str, Reading] = {}
    try:
        with ctx_state.use(state):
            inventory = make_inventory(path, cwd=str(REPO_ROOT))
        config = Config(PARALLEL=max(1, len(inventory)))
        hosts = list(inventory)
        with ctx_state.use(state), ctx_config.use(config), ctx_inventory.use(inventory):
            state.init(inventory, config)
            state.add_callback_handler(ConnectErrors())
            state.set_stage(StateStage.Connect)
            gevent.joinall([gevent.spawn(connect, h) for h in hosts])
            connected = [h for h in hosts if h.connected]
            for h in connected:
                state.activate_host(h)
            state.set_stage(StateStage.Prepare)  # a fact whose command is missing: its default

            def one(h: Host) -> Reading:
                def get(cls: type, *args: object, optional: bool = False) -> object:
                    kwargs = {"_timeout": timeout, **({"_ignore_errors": True} if optional else {})}
                    try:
                        value = get_fact(state, h, cls, args=args, kwargs=kwargs)
                    except PyinfraError:  # pyinfra's "No hosts remaining!" once every host failed
                        value = None
                    if h in state.failed_hosts:
                        raise Unreadable(cls.__name__)
                    return value

                try:
                    return _plan(by_name[h.name], configs)(get)
                except Unreadable as exc:
                    said = log.about(h.name)
                    error = f"could not read {exc}" + (f": {said}" if said else "")
                    return Reading(error=error, connected=True)
                except Exception as exc:  # noqa: BLE001 - one host's failure is its row, not a crash
                    return Reading(error=f"could not read it ({type(exc).__name__}: {exc})", connected=True)

            found.update(zip([h.name for h in connected], runtime.on_every_host(connected, one), strict=True))
            disconnect_all(state)
    finally:
        pyinfra_logger.handlers, pyinfra_logger.propagate = saved
    for name in by_name:
        if name not in found:
            found[name] = Reading(error=errors.get(name) or log.about(name) or "could not connect")
    return found


USAGE_EPILOG = """exit status: 0 every host read and healthy, 1 a problem (an unreachable host
included), 2 misuse or an inventory refused (nothing connected to). --json: one object, its keys
described in day2/status.py's docstring."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="./dbzfs status",
        description="What the fleet is doing: per replication group each host's live role, its "
        "replication and lag, its pool's health and capacity, its newest snapshot and its newest "
        "backup. Read-only: no host is changed.",
        epilog=USAGE_EPILOG,
    )
    parser.add_argument("inventory", metavar="INVENTORY", help="an inventory file, e.g. inventories/prod.py")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help: 0; misuse: 2 (argparse's own)
        return int(exc.code or 0)
    try:
        hosts = load_inventory(args.inventory)
        found = validate(hosts, secrets_mod.load())
    except InventoryError as exc:
        print(exc, file=sys.stderr)
        return 2
    except (OSError, secrets_mod.SecretsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if found:
        print(format_problems(found, args.inventory), file=sys.stderr)
        return 2
    configs = [HostConfig.from_data(name, data) for name, data in hosts.items()]
    readings = read(args.inventory, configs)
    report = status(configs, readings, time.time(), args.inventory)
    print(render_json(report) if args.json else render_text(report))
    return 0 if report["healthy"] else 1


if __name__ == "__main__":
    sys.exit(main())
