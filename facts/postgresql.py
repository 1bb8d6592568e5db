"""
Facts about a Debian PostgreSQL cluster: where its files are, what the running server thinks of
its configuration files, roles, databases, replication slots and the standby's WAL receiver.

The SQL facts ask the server through ``psql`` as the ``postgres`` OS user over the local socket
and return ``None`` when the server does not accept connections, so a first run on a bare host
can plan its changes. No fact ever reads or prints a password; role facts return only a hash of
the stored SCRAM verifier and its salt.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

DOWN = "__dbzfs_postgresql_down__"
UP = "__dbzfs_postgresql_up__"  # pyinfra gives a fact with no output its default (None)
SEP = "|"


def psql(sql: str, database: str = "postgres") -> StringCommand:
    """Run read-only SQL as postgres, unaligned, one row a line, fields split by SEP, after an UP
    line; prints DOWN instead when the server does not accept connections (psql exits 2) or is
    not installed. An error in the SQL fails the fact. One runuser and one psql: a separate
    pg_isready costs a second process start and login, about a second under emulation."""
    return StringCommand(
        "cd / && if [ -x /usr/bin/psql ] && id -u postgres >/dev/null 2>&1; then",
        "out=$(runuser -u postgres -- psql -X -A -t -q -v ON_ERROR_STOP=1",
        "-F",
        QuoteString(SEP),
        "-d",
        QuoteString(database),
        "-c",
        QuoteString(sql),
        ");",
        "rc=$?;",
        "case $rc in 0) echo",
        UP + ";",
        "printf '%s\\n' \"$out\";;",
        "2) echo",
        DOWN + ";;",
        "*) exit $rc;;",
        "esac;",
        "else echo",
        DOWN + ";",
        "fi",
    )


def _rows(output: list[str]) -> list[list[str]] | None:
    lines = [line for line in output if line.strip()]
    if not lines or lines[0].strip() != UP:
        return None
    return [line.split(SEP) for line in lines[1:]]


def _bool(value: str) -> bool:
    return value.strip() == "t"


class PostgresqlCluster(FactBase):
    """
    Where a Debian cluster's files are (no server needed).

    .. code:: python

        {
            "config": True,            # /etc/postgresql/15/main/postgresql.conf exists
            "pg_version": "15",        # DATA/PG_VERSION, "" when the data directory is empty
            "data_entries": 0,         # entries in the data directory (-1: it does not exist)
            "pg_wal": "/datastore/postgresql-wal/15/main",  # DATA/pg_wal symlink target, "" if none
            "standby_signal": False,   # DATA/standby.signal exists
            "debian_default_dir": False,  # /var/lib/postgresql/15/main exists
        }
    """

    @override
    def command(self, version: str | int, cluster: str, data_directory: str) -> StringCommand:
        conf = f"/etc/postgresql/{version}/{cluster}/postgresql.conf"
        data = QuoteString(data_directory)

        def inside(name: str) -> QuoteString:
            return QuoteString(f"{data_directory}/{name}")

        default = f"/var/lib/postgresql/{version}/{cluster}"
        return StringCommand(
            "echo config=$(test -f",
            QuoteString(conf),
            "&& echo yes);",
            "echo pg_version=$(cat",
            inside("PG_VERSION"),
            "2>/dev/null);",
            "echo data_entries=$(test -d",
            data,
            "&& ls -A",
            data,
            "| wc -l || echo -1);",
            "echo pg_wal=$(readlink",
            inside("pg_wal"),
            ");",
            "echo standby_signal=$(test -f",
            inside("standby.signal"),
            "&& echo yes);",
            "echo debian_default_dir=$(test -e",
            QuoteString(default),
            "&& echo yes)",
        )

    @override
    def process(self, output: list[str]) -> dict[str, Any]:
        raw = dict(line.split("=", 1) for line in output if "=" in line)
        return {
            "config": raw.get("config") == "yes",
            "pg_version": raw.get("pg_version", "").strip(),
            "data_entries": int(raw.get("data_entries", "-1").strip() or -1),
            "pg_wal": raw.get("pg_wal", "").strip(),
            "standby_signal": raw.get("standby_signal") == "yes",
            "debian_default_dir": raw.get("debian_default_dir") == "yes",
        }


class PostgresqlFileSettings(FactBase):
    """
    What the running server would do with its configuration files as they are on disk now
    (``pg_file_settings``, which re-reads the files): ``None`` when the server is down, else

    .. code:: python

        {
            "restart": ["shared_buffers"],   # changed settings that need a restart
            "errors": [("work_mem", "invalid value ...", "/etc/.../postgresql.conf", 12)],
        }

    A changed ``postmaster``-context setting shows up as not applied with the error "setting
    could not be applied"; a setting overridden by a later line is not applied either, without an
    error, and is ignored here.
    """

    @override
    def command(self) -> StringCommand:
        return psql(
            "SELECT f.name, coalesce(s.context, ''), coalesce(f.error, ''),"
            " coalesce(f.sourcefile, ''), coalesce(f.sourceline, 0)"
            " FROM pg_file_settings f LEFT JOIN pg_settings s ON s.name = f.name"
            " WHERE f.error IS NOT NULL ORDER BY f.seqno"
        )

    @override
    def process(self, output: list[str]) -> dict[str, list] | None:
        rows = _rows(output)
        if rows is None:
            return None
        restart: list[str] = []
        errors: list[tuple[str, str, str, int]] = []
        for name, context, error, sourcefile, sourceline in rows:
            if context == "postmaster" and error == "setting could not be applied":
                restart.append(name)
            else:
                errors.append((name, error, sourcefile, int(sourceline or 0)))
        return {"restart": restart, "errors": errors}


class PostgresqlConfigAge(FactBase):
    """
    When the running server last read its configuration (``pg_conf_load_time()``, at start and
    at each reload) and when each of `paths` was last modified, as epoch seconds; ``None`` when
    the server is down. A file newer than the load time has changes the server has not read.

    .. code:: python

        {"loaded": 1764484017.93, "files": {"/etc/postgresql/15/main/postgresql.conf": 1764484011.2}}
    """

    @override
    def command(self, paths: Iterable[str]) -> StringCommand:
        mtimes = [
            StringCommand(
                "echo file $(date -r", QuoteString(p), "+%s.%N 2>/dev/null || echo 0)", QuoteString(p), ";"
            )
            for p in paths
        ]
        return StringCommand(psql("SELECT extract(epoch FROM pg_conf_load_time())"), ";", *mtimes)

    @override
    def process(self, output: list[str]) -> dict[str, Any] | None:
        files: dict[str, float] = {}
        rest: list[str] = []
        for line in output:
            if line.startswith("file "):
                _, mtime, path = line.split(" ", 2)
                files[path] = float(mtime)
            else:
                rest.append(line)
        rows = _rows(rest)
        if not rows:
            return None
        return {"loaded": float(rows[0][0]), "files": files}


class PostgresqlPendingRestart(FactBase):
    """Settings changed in the files that wait for a restart (``pg_settings.pending_restart``),
    ``None`` when the server is down."""

    @override
    def command(self) -> StringCommand:
        return psql("SELECT name FROM pg_settings WHERE pending_restart ORDER BY name")

    @override
    def process(self, output: list[str]) -> list[str] | None:
        rows = _rows(output)
        return None if rows is None else [row[0] for row in rows]


class PostgresqlRoles(FactBase):
    """
    Roles other than the built-in ``pg_*`` ones, ``None`` when the server is down. The password
    is never read out: ``scram`` is the verifier's ``iterations:salt`` and ``verifier_sha256``
    a hash of the whole verifier, enough to check a secret against it locally.

    .. code:: python

        {"replicator": {"login": True, "replication": True, "superuser": False,
                        "scram": "4096:VsAm...", "verifier_sha256": "9f2c...", "member_of": []}}
    """

    @override
    def command(self) -> StringCommand:
        return psql(
            "SELECT rolname, rolcanlogin, rolreplication, rolsuper,"
            " CASE WHEN rolpassword LIKE 'SCRAM-SHA-256$%'"
            " THEN split_part(split_part(rolpassword, '$', 2), '$', 1) ELSE '' END,"
            " coalesce(encode(sha256(convert_to(rolpassword, 'UTF8')), 'hex'), ''),"
            " array_to_string(ARRAY(SELECT g.rolname FROM pg_auth_members m"
            " JOIN pg_authid g ON g.oid = m.roleid WHERE m.member = a.oid ORDER BY 1), ',')"
            " FROM pg_authid a WHERE rolname !~ '^pg_' ORDER BY rolname"
        )

    @override
    def process(self, output: list[str]) -> dict[str, dict[str, Any]] | None:
        rows = _rows(output)
        if rows is None:
            return None
        return {
            name: {
                "login": _bool(login),
                "replication": _bool(repl),
                "superuser": _bool(su),
                "scram": scram,
                "verifier_sha256": digest,
                "member_of": sorted(filter(None, member_of.split(","))),
            }
            for name, login, repl, su, scram, digest, member_of in rows
        }


class PostgresqlDatabases(FactBase):
    """
    Databases (no templates), their owner and who holds which privilege on them, ``None`` when
    the server is down. ``PUBLIC`` stands for every role.

    .. code:: python

        {"app": {"owner": "app", "grants": {"app": {"CONNECT", "CREATE", "TEMPORARY"}}}}
    """

    @override
    def command(self) -> StringCommand:
        return psql(
            "SELECT d.datname, pg_get_userbyid(d.datdba),"
            " coalesce(string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC'"
            " ELSE pg_get_userbyid(a.grantee) END || ':' || a.privilege_type, ','), '')"
            " FROM pg_database d LEFT JOIN LATERAL"
            " aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a ON true"
            " WHERE NOT d.datistemplate GROUP BY d.datname, d.datdba ORDER BY d.datname"
        )

    @override
    def process(self, output: list[str]) -> dict[str, dict[str, Any]] | None:
        rows = _rows(output)
        if rows is None:
            return None
        databases: dict[str, dict[str, Any]] = {}
        for name, owner, grants in rows:
            held: dict[str, set[str]] = {}
            for grant in filter(None, grants.split(",")):
                grantee, _, privilege = grant.rpartition(":")
                held.setdefault(grantee, set()).add(privilege)
            databases[name] = {"owner": owner, "grants": held}
        return databases


class PostgresqlReplicationSlots(FactBase):
    """
    Physical and logical slots with the walsender using each, ``None`` when the server is down.

    .. code:: python

        {"pg2": {"type": "physical", "active": True, "restart_lsn": "0/3000148",
                 "state": "streaming", "client_addr": "10.99.0.22"}}
    """

    @override
    def command(self) -> StringCommand:
        return psql(
            "SELECT s.slot_name, s.slot_type, s.active, coalesce(s.restart_lsn::text, ''),"
            " coalesce(r.state, ''), coalesce(host(r.client_addr), '')"
            " FROM pg_replication_slots s"
            " LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid ORDER BY s.slot_name"
        )

    @override
    def process(self, output: list[str]) -> dict[str, dict[str, Any]] | None:
        rows = _rows(output)
        if rows is None:
            return None
        return {
            name: {
                "type": kind,
                "active": _bool(active),
                "restart_lsn": lsn,
                "state": state,
                "client_addr": addr,
            }
            for name, kind, active, lsn, state, addr in rows
        }


class PostgresqlWalReceiver(FactBase):
    """
    A standby's recovery state and WAL receiver, ``None`` when the server is down. With
    ``wait`` > 0 the command waits up to that many seconds for the receiver to be streaming
    (a standby that just started needs a moment to connect).

    .. code:: python

        {"in_recovery": True, "status": "streaming", "slot_name": "pg2",
         "sender_host": "10.99.0.21"}
    """

    @override
    def command(self, wait: int = 0) -> StringCommand:
        sql = (
            "SELECT pg_is_in_recovery(),"
            " coalesce((SELECT status FROM pg_stat_wal_receiver), ''),"
            " coalesce((SELECT slot_name FROM pg_stat_wal_receiver), ''),"
            " coalesce((SELECT sender_host FROM pg_stat_wal_receiver), '')"
        )
        once = psql(sql)
        if not wait:
            return once
        return StringCommand(
            f"for i in $(seq {int(wait)}); do",
            "out=$(",
            once,
            ");",
            'case "$out" in *"|streaming|"*) break;; esac; sleep 1; done; echo "$out"',
        )

    @override
    def process(self, output: list[str]) -> dict[str, Any] | None:
        rows = _rows(output)
        if not rows:
            return None
        in_recovery, status, slot_name, sender_host = rows[-1]
        return {
            "in_recovery": _bool(in_recovery),
            "status": status,
            "slot_name": slot_name,
            "sender_host": sender_host,
        }


class PostgresqlLiveRole(FactBase):
    """
    What the live server is in the replication topology: in recovery or not and, for a standby,
    the host its ``primary_conninfo`` names; None when the server does not answer.

    .. code:: python

        {"in_recovery": True, "sender": "10.99.0.21"}
        {"in_recovery": False, "sender": ""}  # a primary
    """

    @override
    def command(self) -> StringCommand:
        return psql("SELECT pg_is_in_recovery(), current_setting('primary_conninfo')")

    @override
    def process(self, output: list[str]) -> dict[str, Any] | None:
        rows = _rows(output)
        if not rows:
            return None
        in_recovery, conninfo = (rows[-1] + [""])[:2]
        return {"in_recovery": _bool(in_recovery), "sender": conninfo_host(conninfo)}


class PostgresqlStandbys(FactBase):
    """
    On a primary: every connected walsender by the standby's application_name, its state and how
    far its replay is behind (``replay_lag`` in seconds, 0 once caught up on an idle primary);
    ``None`` when the server is down.

    .. code:: python

        {"pg2": {"state": "streaming", "replay_lag": 0.012, "client_addr": "10.99.0.22"}}
    """

    @override
    def command(self) -> StringCommand:
        return psql(
            "SELECT application_name, coalesce(state, ''),"
            " coalesce(extract(epoch FROM replay_lag), 0), coalesce(host(client_addr), '')"
            " FROM pg_stat_replication ORDER BY application_name"
        )

    @override
    def process(self, output: list[str]) -> dict[str, dict[str, Any]] | None:
        rows = _rows(output)
        if rows is None:
            return None
        return {
            name: {"state": state, "replay_lag": float(lag or 0), "client_addr": addr}
            for name, state, lag, addr in rows
        }


class PostgresqlStandbyPosition(FactBase):
    """
    How far a standby has received and replayed WAL, and its WAL receiver's status; ``None``
    when the server does not answer. A failover promotes the standby that received the most.

    .. code:: python

        {"in_recovery": True, "received": "0/5000148", "replayed": "0/5000148", "status": ""}
    """

    @override
    def command(self) -> StringCommand:
        return psql(
            "SELECT pg_is_in_recovery(), coalesce(pg_last_wal_receive_lsn()::text, ''),"
            " coalesce(pg_last_wal_replay_lsn()::text, ''),"
            " coalesce((SELECT status FROM pg_stat_wal_receiver), '')"
        )

    @override
    def process(self, output: list[str]) -> dict[str, Any] | None:
        rows = _rows(output)
        if not rows:
            return None
        in_recovery, received, replayed, status = rows[-1]
        return {
            "in_recovery": _bool(in_recovery),
            "received": received,
            "replayed": replayed,
            "status": status,
        }


class PostgresqlControlData(FactBase):
    """
    What a cluster's control file says (``pg_controldata``; no server needed): its state and
    where its latest checkpoint is, ``None`` without a cluster. A primary that was shut down
    cleanly says "shut down"; its latest checkpoint is then its shutdown checkpoint, which a
    standby must have replayed before it may be promoted without losing a write.

    .. code:: python

        {"state": "shut down", "checkpoint": "0/3000028", "timeline": 1}
    """

    @override
    def command(self, version: str | int, data_directory: str) -> StringCommand:
        binary = f"/usr/lib/postgresql/{version}/bin/pg_controldata"
        return StringCommand(
            "if [ -x",
            QuoteString(binary),
            "] && [ -f",
            QuoteString(f"{data_directory}/global/pg_control"),
            "]; then LC_ALL=C",
            QuoteString(binary),
            "-D",
            QuoteString(data_directory),
            "; fi",
        )

    @override
    def process(self, output: list[str]) -> dict[str, Any] | None:
        raw = {}
        for line in output:
            key, sep, value = line.partition(":")
            if sep:
                raw[key.strip()] = value.strip()
        if "Database cluster state" not in raw:
            return None
        return {
            "state": raw["Database cluster state"],
            "checkpoint": raw.get("Latest checkpoint location", ""),
            "timeline": int(raw.get("Latest checkpoint's TimeLineID", "0") or 0),
        }


def conninfo_host(conninfo: str) -> str:
    """The host= of a libpq key/value connection string ("" without one)."""
    for token in shlex.split(conninfo) if conninfo else []:
        key, _, value = token.partition("=")
        if key.strip() == "host":
            return value.strip()
    return ""


class SystemdNeedsReload(FactBase):
    """Whether systemd's loaded copy of `unit` is older than its files on disk (unit file or
    drop-ins): ``systemctl show -p NeedDaemonReload``."""

    @override
    def command(self, unit: str) -> StringCommand:
        return StringCommand("systemctl show -p NeedDaemonReload --value", QuoteString(unit))

    @override
    def process(self, output: list[str]) -> bool:
        return any(line.strip() == "yes" for line in output)
