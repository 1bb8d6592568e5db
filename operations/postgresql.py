"""
PostgreSQL operations pyinfra lacks: a Debian cluster created in place on its datasets, a
reload-or-restart decision, login roles whose passwords never leave a root-only file, databases
with least privilege, physical replication slots, standbys built with pg_basebackup and their
health.

Secrets: SQL that sets a password carries a SCRAM-SHA-256 verifier computed here (never the
password itself) and reaches psql on stdin from a file uploaded over SFTP into a root-only
directory, then removed (operations.common). No password is ever on a command line.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Collection, Generator, Iterable

from pyinfra import host, logger, state
from pyinfra.api import FileUploadCommand, HiddenValue, OperationError, QuoteString, StringCommand, operation

from facts.postgresql import (
    PostgresqlCluster,
    PostgresqlConfigAge,
    PostgresqlDatabases,
    PostgresqlFileSettings,
    PostgresqlPendingRestart,
    PostgresqlReplicationSlots,
    PostgresqlRoles,
    PostgresqlWalReceiver,
)
from operations.common import private_upload, reveal

SCRAM_ITERATIONS = 4096


# --- helpers (pure) -------------------------------------------------------------------------


def unit(version: int | str, cluster: str) -> str:
    return f"postgresql@{version}-{cluster}.service"


def slot_name(standby: str) -> str:
    """A physical slot name for a standby host: lowercase letters, digits and '_' only."""
    return re.sub(r"[^a-z0-9_]", "_", standby.lower())[:63]


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def scram_verifier(password: str, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802/7677, as in
    PostgreSQL's scram_build_secret). ASCII passwords only: PostgreSQL SASLprep-normalises
    others, which is not reproduced here."""
    if not password.isascii():
        raise ValueError("only ASCII passwords are supported")
    salt = os.urandom(16) if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return f"SCRAM-SHA-256${iterations}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


def password_matches(password: str, role: dict) -> bool:
    """Whether a role (from PostgresqlRoles) has `password` as its SCRAM verifier."""
    iterations, _, salt = (role.get("scram") or "").partition(":")
    if not iterations.isdigit() or not salt:
        return False
    verifier = scram_verifier(password, base64.b64decode(salt), int(iterations))
    return hashlib.sha256(verifier.encode()).hexdigest() == role.get("verifier_sha256")


def pgpass_line(
    password: str, user: str, host_: str = "*", port: int | str = "*", database: str = "replication"
) -> str:
    def esc(v: object) -> str:
        return str(v).replace("\\", "\\\\").replace(":", "\\:")

    return ":".join([esc(host_), esc(port), esc(database), esc(user), esc(password)]) + "\n"


def _psql_script(sql: str, name: str) -> list[StringCommand | FileUploadCommand]:
    """Commands that run `sql` through psql's stdin as postgres, from a root-only file that is
    removed whatever happens. Statement logging is off for the session so a failing statement
    cannot land in the server log."""
    script = (
        "SET log_statement = 'none';\nSET log_min_error_statement = 'panic';\n"
        "SET log_min_duration_statement = -1;\n" + sql
    )
    commands, path = private_upload(script, name)
    commands.append(
        StringCommand(
            "runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -d postgres <",
            QuoteString(path),
            "; rc=$?; rm -f",
            QuoteString(path),
            "; exit $rc",
        )
    )
    return commands


def psql_command(sql: str) -> StringCommand:
    """One statement (no secret in it: it is logged) run by psql as postgres."""
    return StringCommand(
        "runuser -u postgres -- psql -X -q -A -t -v ON_ERROR_STOP=1 -d postgres -c", QuoteString(sql)
    )


# --- cluster and configuration ----------------------------------------------------------------


@operation()
def cluster(
    version: int | str, cluster_name: str, data_directory: str, wal_directory: str, locale: str = "C.UTF-8"
) -> Generator[StringCommand, None, None]:
    """
    Create a Debian cluster with its data directory and WAL where they are declared (on their
    ZFS datasets), never in /var/lib/postgresql; verify an existing one is where declared.

    + version, cluster_name: e.g. ``15``, ``main``
    + data_directory / wal_directory: absolute paths (pg_wal becomes a symlink to the latter)
    + locale: cluster locale; UTF8 encoding

    With data checksums (``initdb --data-checksums``): ZFS already checksums every record and
    repairs it from the mirror, but the server's own page checksums catch what happens above ZFS
    (memory, software) and let ``pg_checksums --check`` and ``pg_amcheck`` prove a cluster intact
    after a crash. An existing cluster keeps what it was created with.
    """
    facts = host.get_fact(
        PostgresqlCluster, version=version, cluster=cluster_name, data_directory=data_directory
    )
    if facts["pg_version"]:
        if facts["pg_version"] != str(version):
            raise OperationError(
                f"{data_directory} holds a PostgreSQL {facts['pg_version']} "
                f"cluster, {version} is declared; upgrade it by hand"
            )
        if facts["pg_wal"] != wal_directory:
            raise OperationError(
                f"{data_directory}/pg_wal points to {facts['pg_wal'] or 'nothing'}"
                f" (a directory), declared {wal_directory}; move the WAL by hand"
            )
        if not facts["config"]:
            raise OperationError(
                f"{data_directory} holds a cluster but "
                f"/etc/postgresql/{version}/{cluster_name} has no postgresql.conf"
            )
        host.noop(f"cluster {version}/{cluster_name} exists in {data_directory}, WAL in {wal_directory}")
        return
    if facts["data_entries"] > 0:
        raise OperationError(
            f"{data_directory} is not empty but holds no cluster; look at it and empty it by hand"
        )
    yield StringCommand(
        "pg_createcluster",
        "--locale",
        QuoteString(locale),
        "--encoding",
        "UTF8",
        "-d",
        QuoteString(data_directory),
        str(version),
        QuoteString(cluster_name),
        "--",
        QuoteString(f"--waldir={wal_directory}"),
        "--data-checksums",
    )


@operation()
def apply_config(
    version: int | str, cluster_name: str, config_files: Iterable[str]
) -> Generator[StringCommand, None, None]:
    """
    Make the running server use its configuration files: a restart when a changed setting needs
    one (a ``postmaster`` setting per ``pg_file_settings``, or ``pending_restart`` after the
    reload), a reload when a file is newer than the server's last read of them, else nothing. A
    stopped server is left alone: it reads the files when it starts. Deciding from the live
    server (not from "did the template change") also finishes the job after an interrupted run.
    """
    name = unit(version, cluster_name)
    pending = host.get_fact(PostgresqlFileSettings)
    if pending is None:
        host.noop(f"{name} is not running: it reads its files when it starts")
        return
    if pending["errors"]:
        shown = "; ".join(f"{n}: {e} ({f}:{line})" for n, e, f, line in pending["errors"])
        raise OperationError(
            f"the server rejects its configuration files: {shown}; nothing reloaded or restarted"
        )
    if pending["restart"]:
        logger.info(f"{host.print_prefix}restart needed for: {', '.join(pending['restart'])}")
        yield StringCommand("systemctl restart", name)
        return
    age = host.get_fact(PostgresqlConfigAge, paths=list(config_files))
    newer = [p for p, mtime in (age or {}).get("files", {}).items() if mtime > age["loaded"]]
    if not newer:
        host.noop(f"{name} runs with its files as they are")
        return
    # Reload, then wait until the postmaster has re-read the files (pg_conf_load_time moves).
    psql = "runuser -u postgres -- psql -X -A -t -c 'SELECT pg_conf_load_time()'"
    yield StringCommand(
        f"cd / && before=$({psql}); systemctl reload {name};",
        f'for i in $(seq 50); do [ "$({psql})" != "$before" ] && exit 0; sleep 0.2; done;',
        "echo 'the server did not re-read its configuration within 10 s' >&2; exit 1",
    )
    still = host.get_fact(PostgresqlPendingRestart)
    if still:
        logger.info(f"{host.print_prefix}restart needed for: {', '.join(still)}")
        yield StringCommand("systemctl restart", name)


# --- roles, databases, slots ------------------------------------------------------------------


def _live(found: dict | None, what: str) -> dict:
    """What the running server holds of `what`. A `--dry` plan for a host whose server is not
    installed or started yet (a first converge) proposes every object as new; a real run needs
    the server, which the steps before start."""
    if found is not None:
        return found
    if state.is_executing:
        raise OperationError(f"PostgreSQL is not running: cannot manage {what}")
    return {}


@operation()
def login_role(
    role_name: str, password: HiddenValue | str, replication: bool = False
) -> Generator[StringCommand | FileUploadCommand, None, None]:
    """
    A LOGIN role (REPLICATION when asked, never SUPERUSER) whose password is `password`. The
    password is checked against the stored SCRAM verifier; only a verifier goes to the server.
    """
    if not password:
        raise OperationError(f"role {role_name}: no password given (check the secrets)")
    password = reveal(password)
    roles = _live(host.get_fact(PostgresqlRoles), "roles")
    current = roles.get(role_name)
    attrs = "LOGIN " + ("REPLICATION" if replication else "NOREPLICATION")
    if current is None:
        verb = "CREATE"
    elif (
        current["login"]
        and current["replication"] == replication
        and not current["superuser"]
        and password_matches(password, current)
    ):
        host.noop(f"role {role_name} exists with its password")
        return
    else:
        verb = "ALTER"
    sql = (
        f"{verb} ROLE {quote_ident(role_name)} WITH {attrs} NOSUPERUSER "
        f"PASSWORD {quote_literal(scram_verifier(password))};\n"
    )
    yield from _psql_script(sql, f"role-{slot_name(role_name)}.sql")


@operation()
def monitoring_role(role_name: str, member_of: str = "pg_monitor") -> Generator[StringCommand, None, None]:
    """
    A LOGIN role without a password (it logs in through the local socket with peer
    authentication, as the Unix user of the same name), never SUPERUSER or REPLICATION, member of
    `member_of` (pg_monitor: read the statistics views and settings, nothing else).
    """
    roles = _live(host.get_fact(PostgresqlRoles), "roles")
    current = roles.get(role_name)
    who = quote_ident(role_name)
    attrs = "LOGIN NOSUPERUSER NOREPLICATION PASSWORD NULL"
    statements = []
    if current is None:
        statements.append(f"CREATE ROLE {who} WITH {attrs}")
    elif not current["login"] or current["superuser"] or current["replication"] or current["verifier_sha256"]:
        statements.append(f"ALTER ROLE {who} WITH {attrs}")
    if current is None or member_of not in current["member_of"]:
        statements.append(f"GRANT {quote_ident(member_of)} TO {who}")
    if not statements:
        host.noop(f"role {role_name} logs in without a password, member of {member_of}")
    for sql in statements:
        yield psql_command(sql)


@operation()
def database(
    database_name: str, owner: str | None = None, connect: Collection[str] = ()
) -> Generator[StringCommand, None, None]:
    """
    A database owned by `owner` (postgres when None) that only `connect` (and its owner and
    superusers) may connect to: CONNECT is revoked from PUBLIC.
    """
    databases = _live(host.get_fact(PostgresqlDatabases), "databases")
    owner = owner or "postgres"
    db = quote_ident(database_name)
    statements = []
    current = databases.get(database_name)
    if current is None:
        statements.append(f"CREATE DATABASE {db} OWNER {quote_ident(owner)};")
        grants = {}
    else:
        if current["owner"] != owner:
            statements.append(f"ALTER DATABASE {db} OWNER TO {quote_ident(owner)};")
        grants = current["grants"]
    if current is None or "CONNECT" in grants.get("PUBLIC", set()):
        statements.append(f"REVOKE CONNECT, TEMPORARY ON DATABASE {db} FROM PUBLIC;")
    for user in connect:
        if current is None or "CONNECT" not in grants.get(user, set()):
            statements.append(f"GRANT CONNECT ON DATABASE {db} TO {quote_ident(user)};")
    if not statements:
        host.noop(
            f"database {database_name} exists, owner {owner}, CONNECT for "
            f"{', '.join(connect) or 'its owner only'}"
        )
        return
    # One -c per statement: each runs on its own (CREATE DATABASE refuses a transaction block).
    args = [part for statement in statements for part in ("-c", QuoteString(statement))]
    yield StringCommand("runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -d postgres", *args)


@operation()
def replication_slot(slot: str) -> Generator[StringCommand, None, None]:
    """A physical replication slot that reserves WAL from the moment it is created."""
    slots = _live(host.get_fact(PostgresqlReplicationSlots), "replication slots")
    if slot in slots:
        if slots[slot]["type"] != "physical":
            raise OperationError(f"slot {slot} exists but is {slots[slot]['type']}")
        host.noop(f"physical replication slot {slot} exists")
        return
    yield psql_command(f"SELECT pg_create_physical_replication_slot({quote_literal(slot)}, true)")


# --- standbys ---------------------------------------------------------------------------------


@operation()
def standby(
    version: int | str,
    cluster_name: str,
    data_directory: str,
    wal_directory: str,
    primary_address: str,
    slot: str,
    application_name: str,
    passfile: str,
    port: int = 5432,
    replication_user: str = "replicator",
) -> Generator[StringCommand, None, None]:
    """
    Build a hot standby with pg_basebackup from the primary through its physical slot, into the
    declared data and WAL directories, with ``-R`` (primary_conninfo naming the passfile, and
    standby.signal), then register it as a Debian cluster. Only an empty data directory is ever
    filled: an existing cluster is never rebuilt (one that is not a standby is reported).
    """
    facts = host.get_fact(
        PostgresqlCluster, version=version, cluster=cluster_name, data_directory=data_directory
    )
    if facts["pg_version"]:
        if facts["config"] and facts["standby_signal"]:
            host.noop(f"standby {version}/{cluster_name} exists in {data_directory}")
            return
        if not facts["standby_signal"]:
            message = (
                f"{host.name}: {data_directory} holds a cluster without standby.signal: "
                "it is not a standby (promoted?). Left as it is, never rebuilt; rebuild it "
                "by hand if it should follow the primary"
            )
            logger.warning(f"{host.print_prefix}{message}")
            host.noop(message)
            return
        # A backup without its Debian registration: an earlier run stopped in between.
    else:
        if facts["data_entries"] > 0:
            raise OperationError(
                f"{data_directory} is not empty but holds no cluster; look at it and empty it by hand"
            )
        yield StringCommand(
            "runuser -u postgres -- env",
            QuoteString(f"PGPASSFILE={passfile}"),
            "pg_basebackup",
            "-h",
            QuoteString(primary_address),
            "-p",
            str(port),
            "-U",
            QuoteString(replication_user),
            "-w",
            "-d",
            QuoteString(f"application_name={application_name}"),
            "-S",
            QuoteString(slot),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "-D",
            QuoteString(data_directory),
            QuoteString(f"--waldir={wal_directory}"),
        )
    # pg_createcluster registers an existing data directory and moves these three files from it
    # to /etc/postgresql/VERSION/CLUSTER; the primary's live in /etc, so the backup has none.
    yield StringCommand(
        "runuser -u postgres -- touch",
        *[QuoteString(f"{data_directory}/{f}") for f in ("postgresql.conf", "pg_hba.conf", "pg_ident.conf")],
    )
    yield StringCommand(
        "pg_createcluster -d", QuoteString(data_directory), str(version), QuoteString(cluster_name)
    )


@operation()
def standby_health(primary: str, wait: int = 30) -> Generator[StringCommand, None, None]:
    """Report a standby that is not in recovery or not streaming from the primary (a warning
    naming the host; never a rebuild)."""
    state = host.get_fact(PostgresqlWalReceiver, wait=wait)
    if state is None:
        problem = "PostgreSQL does not accept connections"
    elif not state["in_recovery"]:
        problem = "it is not in recovery (promoted?)"
    elif state["status"] != "streaming":
        problem = (
            f"its WAL receiver is {state['status'] or 'not running'} (see the server log "
            "and pg_stat_wal_receiver)"
        )
    else:
        host.noop(f"streaming from {state['sender_host']} through slot {state['slot_name']}")
        return
    message = f"standby {host.name} is not streaming from {primary}: {problem}"
    logger.warning(f"{host.print_prefix}{message}")
    host.noop(message)
    yield from ()  # an operation is a generator even when it only reports


@operation()
def replication_health(standbys: Collection[str]) -> Generator[StringCommand, None, None]:
    """On the primary: report every declared standby whose slot is missing or not in use by a
    streaming walsender (warnings naming the standby)."""
    slots = host.get_fact(PostgresqlReplicationSlots)
    if slots is None:
        problems = {s: "the primary does not accept connections" for s in standbys}
    else:
        problems = {}
        for name in standbys:
            slot = slots.get(slot_name(name))
            if slot is None:
                problems[name] = f"slot {slot_name(name)} is missing"
            elif not slot["active"]:
                problems[name] = (
                    f"slot {slot_name(name)} is inactive (standby down or not "
                    f"connecting; WAL is held from {slot['restart_lsn']})"
                )
            elif slot["state"] != "streaming":
                problems[name] = f"its walsender is {slot['state'] or 'gone'}"
    for name, problem in problems.items():
        message = f"standby {name} is not streaming from {host.name}: {problem}"
        logger.warning(f"{host.print_prefix}{message}")
        host.noop(message)
    if not problems:
        host.noop(f"every standby streams: {', '.join(standbys) or 'none declared'}")
    yield from ()
