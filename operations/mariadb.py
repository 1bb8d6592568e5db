"""
MariaDB accounts and GTID replication: what pyinfra's mysql operations cannot do without putting
a password on a command line.

Passwords arrive as pyinfra ``HiddenValue``s. SQL or option files that hold one are uploaded over
SFTP into a root-only directory on tmpfs, fed to the client through stdin / --defaults-extra-file
and removed in the same command; no password is ever part of a command, an operation argument's
repr, pyinfra's output or a process list. A client error is reduced to its code so that a
statement is never echoed back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Iterable, Iterator

from pyinfra import host, logger
from pyinfra.api import (
    FileUploadCommand,
    HiddenValue,
    OperationError,
    QuoteString,
    StringCommand,
    operation,
)

from facts.mariadb import (
    SYSTEM_SCHEMAS,
    MariadbGrants,
    MariadbReplicaStatus,
    MariadbSchemas,
    MariadbUsers,
    MariadbVariables,
    account,
    sql_string,
)
from operations.common import PRIVATE_DIR, private_upload, reveal

SECRET_DIR = PRIVATE_DIR  # tmpfs: uploaded secrets never reach a disk

# What a replica's account needs on its primary: the binlog stream, plus a consistent
# mariadb-dump --single-transaction --master-data --gtid --all-databases to seed from.
REPLICATION_PRIVILEGES = frozenset(
    {
        "REPLICATION SLAVE",
        "BINLOG MONITOR",  # stream; SHOW MASTER STATUS / gtid_binlog_pos
        "SELECT",
        "SHOW VIEW",
        "TRIGGER",
        "EVENT",
        "LOCK TABLES",  # read everything
        "RELOAD",  # FLUSH TABLES WITH READ LOCK for the consistent binlog position
    }
)

# What GRANT ALL ON db.* stands for at database level (information_schema lists these).
DATABASE_ALL = frozenset(
    {
        "SELECT",
        "INSERT",
        "UPDATE",
        "DELETE",
        "CREATE",
        "DROP",
        "REFERENCES",
        "INDEX",
        "ALTER",
        "CREATE TEMPORARY TABLES",
        "LOCK TABLES",
        "EXECUTE",
        "CREATE VIEW",
        "SHOW VIEW",
        "CREATE ROUTINE",
        "ALTER ROUTINE",
        "EVENT",
        "TRIGGER",
        "DELETE HISTORY",
    }
)


def native_password_hash(password: str) -> str:
    """What mysql_native_password stores: '*' + upper hex SHA1(SHA1(password))."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


def credential_digest(password: str) -> str:
    """The MariadbUsers fact's digest of the credential a password gives."""
    return hashlib.sha256(native_password_hash(password).encode()).hexdigest()


def normalise_privileges(privileges: str | Iterable[str]) -> frozenset[str]:
    if isinstance(privileges, str):
        privileges = privileges.split(",")
    names = {" ".join(p.upper().split()) for p in privileges if p.strip()}
    if names & {"ALL", "ALL PRIVILEGES"}:
        names = (names - {"ALL", "ALL PRIVILEGES"}) | DATABASE_ALL
    if "REPLICATION CLIENT" in names:  # the old name of BINLOG MONITOR
        names = (names - {"REPLICATION CLIENT"}) | {"BINLOG MONITOR"}
    return frozenset(names)


# How often a replica's IO thread tries its primary again after losing it. MariaDB's default, 60 s,
# leaves a replica up to a minute behind after every restart of its primary (a config change, a
# rolling converge, a reboot); 10 s costs a failed TCP connection every 10 s while it is down.
CONNECT_RETRY_SECONDS = 10


def change_master_sql(primary_address: str, port: int, user: str, password: str) -> str:
    """CHANGE MASTER TO the primary with GTID (slave_pos) and CONNECT_RETRY_SECONDS; the password
    is in the text: run it with run_secret_sql only."""
    return (
        f"CHANGE MASTER TO MASTER_HOST={sql_string(primary_address)}, MASTER_PORT={int(port)}, "
        f"MASTER_USER={sql_string(user)}, MASTER_PASSWORD={sql_string(password)}, "
        f"MASTER_CONNECT_RETRY={CONNECT_RETRY_SECONDS}, MASTER_USE_GTID=slave_pos;\n"
    )


def option_value(value: str) -> str:
    """A double-quoted value for a MariaDB option file."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def secret_file(name: str, text: str) -> Iterator[StringCommand | FileUploadCommand]:
    """Commands that place `text` in SECRET_DIR/name over SFTP (operations.common)."""
    commands, _ = private_upload(text, name)
    yield from commands


# The client's output on a failure cut down to its error code: near a syntax error the client
# would echo the statement, which may hold a secret.
ERROR_CODE_ONLY = ("printf", "'%s\\n'", '"$out"', "|", "grep", "-o", "'^ERROR [0-9]* ([0-9A-Z]*)'", ">&2;")


def run_secret_sql(name: str, sql: str) -> Iterator[StringCommand | FileUploadCommand]:
    """Upload `sql` and run it as root through stdin; the file is removed whatever happens and a
    failure shows the error code only (the client would echo the statement near a syntax
    error)."""
    path = f"{SECRET_DIR}/{name}"
    yield from secret_file(name, sql)
    yield StringCommand(
        "out=$(mariadb",
        "<",
        QuoteString(path),
        "2>&1);",
        "rc=$?;",
        "rm",
        "-f",
        QuoteString(path),
        ";",
        "if",
        "[",
        "$rc",
        "-ne",
        "0",
        "];",
        "then",
        *ERROR_CODE_ONLY,
        "exit",
        "$rc;",
        "fi",
    )


def run_sql(sql: str) -> StringCommand:
    """A statement without secrets, as root through the unix socket."""
    return StringCommand("mariadb", "-e", QuoteString(sql))


@operation()
def user(
    user: str, user_host: str, password: HiddenValue | str
) -> Generator[StringCommand | FileUploadCommand, None, None]:
    """
    An account identified by a password (mysql_native_password), created or its password set.

    + user: account name
    + user_host: host part ('localhost', an address or 'a.b.c.d/netmask')
    + password: a pyinfra HiddenValue; compared through a digest of the stored hash, never read
    """

    users = host.get_fact(MariadbUsers)
    current = (users or {}).get((user, user_host))
    secret = reveal(password)
    if (
        current
        and current["plugin"] == "mysql_native_password"
        and (current["credential"] == credential_digest(secret))
    ):
        host.noop(f"mariadb user {user}@{user_host} exists with its password")
        return
    who = account(user, user_host)
    sql = (
        f"CREATE USER IF NOT EXISTS {who} IDENTIFIED BY {sql_string(secret)};\n"
        f"ALTER USER {who} IDENTIFIED BY {sql_string(secret)};\n"
    )
    yield from run_secret_sql(f"user-{user}.sql", sql)


@operation()
def socket_user(user: str, user_host: str = "localhost") -> Generator[StringCommand, None, None]:
    """
    An account identified by the Unix user of the process that connects through the server's
    socket (unix_socket): no password exists for it. An account of that name with a password
    is switched to unix_socket.
    """
    current = (host.get_fact(MariadbUsers) or {}).get((user, user_host))
    if current and current["plugin"] == "unix_socket":
        host.noop(f"mariadb user {user}@{user_host} is identified by its Unix user")
        return
    who = account(user, user_host)
    yield run_sql(f"CREATE USER IF NOT EXISTS {who} IDENTIFIED VIA unix_socket")
    if current:
        yield run_sql(f"ALTER USER {who} IDENTIFIED VIA unix_socket")


@operation()
def grants(
    user: str, user_host: str, privileges: str | Iterable[str], database: str = "*"
) -> Generator[StringCommand, None, None]:
    """
    Exactly these privileges for an account at one level: global (``database="*"``) or one
    database; missing ones are granted, others at that level revoked (least privilege).

    + user, user_host: the account (it must exist)
    + privileges: "SELECT,INSERT" or an iterable; "ALL" means every database-level privilege
    + database: a database name, or "*" for global privileges
    """

    wanted = normalise_privileges(privileges)
    levels = host.get_fact(MariadbGrants, user=user, user_host=user_host) or {}
    current = levels.get(database, set())
    on = "*.*" if database == "*" else f"`{database}`.*"
    who = account(user, user_host)
    extra = sorted(set(current) - wanted)
    missing = sorted(wanted - set(current))
    if extra:
        yield run_sql(f"REVOKE {', '.join(extra)} ON {on} FROM {who}")
    if missing:
        yield run_sql(f"GRANT {', '.join(missing)} ON {on} TO {who}")
    if not extra and not missing:
        host.noop(f"mariadb grants of {user}@{user_host} on {on} are as declared")


@operation()
def no_insecure_accounts() -> Generator[StringCommand, None, None]:
    """Drop anonymous accounts (user '') and root accounts for any host but localhost (Debian's
    root@localhost authenticates through the unix socket only)."""

    users = host.get_fact(MariadbUsers) or {}
    insecure = sorted((u, h) for (u, h) in users if u == "" or (u == "root" and h != "localhost"))
    for u, h in insecure:
        yield run_sql(f"DROP USER {account(u, h)}")
    if not insecure:
        host.noop("no anonymous or remote root accounts")


@operation()
def only_from(user: str, user_hosts: Iterable[str]) -> Generator[StringCommand, None, None]:
    """Drop `user`'s accounts for any host not in user_hosts: a member that left its group, or
    whose address changed, keeps no way in.

    + user: the account name (e.g. the replication user)
    + user_hosts: the hosts it may connect from; none drops every account of that name
    """

    keep = set(user_hosts)
    users = host.get_fact(MariadbUsers) or {}
    stale = sorted(h for (u, h) in users if u == user and h not in keep)
    for user_host in stale:
        yield run_sql(f"DROP USER {account(user, user_host)}")
    if not stale:
        host.noop(f"mariadb has no {user} account for a host outside {sorted(keep)}")


@operation()
def read_only(on: bool) -> Generator[StringCommand, None, None]:
    """
    The live server's ``read_only`` (dynamic: no restart), as the host's role file says.

    + on: True on a replica (writes only through replication and by root), False on a primary
    """
    want = "ON" if on else "OFF"
    live = host.get_fact(MariadbVariables, names=["read_only"])
    # None: no server answers yet (a plan for a bare host, before the install); the server the
    # install starts reads the role file, and setting it again then changes nothing.
    if live is not None and live.get("read_only") == want:
        host.noop(f"read_only is {want}")
        return
    yield run_sql(f"SET GLOBAL read_only = {want}")


def replica_problems(status: dict, primary_address: str, port: int) -> tuple[list, list]:
    """(errors, warnings) about a configured replica's SHOW SLAVE STATUS."""
    errors, warnings = [], []
    if status.get("Master_Host") != primary_address or status.get("Master_Port") != str(port):
        errors.append(
            f"replicates from {status.get('Master_Host')}:{status.get('Master_Port')}, "
            f"declared primary is {primary_address}:{port}; re-point it by hand "
            "(STOP SLAVE; CHANGE MASTER TO ...) after checking why"
        )
    if status.get("Using_Gtid") != "Slave_Pos":
        errors.append(f"Using_Gtid is {status.get('Using_Gtid')}, not Slave_Pos")
    io_state, sql_state = status.get("Slave_IO_Running"), status.get("Slave_SQL_Running")
    if sql_state != "Yes":
        detail = status.get("Last_SQL_Error") or "no error recorded (stopped by hand?)"
        errors.append(
            f"replication SQL thread is not running (Slave_SQL_Running: {sql_state}, "
            f"Last_SQL_Errno {status.get('Last_SQL_Errno', '?')}): {detail}"
        )
    if io_state == "No":
        detail = status.get("Last_IO_Error") or "no error recorded (stopped by hand?)"
        errors.append(
            f"replication IO thread is not running (Last_IO_Errno "
            f"{status.get('Last_IO_Errno', '?')}): {detail}"
        )
    elif io_state != "Yes":
        warnings.append(
            f"replication IO thread is {io_state} (still connecting to "
            f"{primary_address}): {status.get('Last_IO_Error') or 'no error yet'}"
        )
    return errors, warnings


@operation()
def replica(
    primary_address: str, replication_user: str, password: HiddenValue | str, port: int = 3306
) -> Generator[StringCommand | FileUploadCommand, None, None]:
    """
    Replicate from a primary with GTID (MASTER_USE_GTID=slave_pos).

    A server that replicates from nobody and holds no databases of its own is seeded from the
    primary with a consistent dump (mariadb-dump --single-transaction --master-data --gtid over
    the replication account, credentials in a root-only option file), pointed at it and started.
    A configured replica is only checked: healthy -> no change; broken (a thread stopped, an
    error, another primary) -> OperationError naming the error. It is never re-seeded.

    + primary_address: the primary's address on the replication network
    + replication_user: the account on the primary (REPLICATION_PRIVILEGES)
    + password: its password, a pyinfra HiddenValue
    + port: the primary's port
    """

    status = host.get_fact(MariadbReplicaStatus)
    if status:
        errors, warnings = replica_problems(status, primary_address, port)
        for warning in warnings:
            logger.warning(f"{host.print_prefix}{warning}")
        if errors:
            raise OperationError(
                f"{host.name}: MariaDB replica of {primary_address} is broken; it is left as it "
                "is (never re-seeded by the deploy). Fix it by hand, e.g. after checking the "
                "error, or re-seed it deliberately (RESET SLAVE ALL + drop its databases):\n  - "
                + "\n  - ".join(errors)
            )
        lag = status.get("Seconds_Behind_Master")
        if status.get("Connect_Retry") != str(CONNECT_RETRY_SECONDS):
            # A replica set up before the retry was set, or by hand: only the retry changes (the
            # GTID position, the primary and the account stay as they are).
            yield run_sql(
                f"STOP SLAVE; CHANGE MASTER TO MASTER_CONNECT_RETRY={CONNECT_RETRY_SECONDS}; START SLAVE"
            )
            return
        host.noop(f"replicating from {primary_address} with GTID, {lag} s behind")
        return

    own = sorted(set(host.get_fact(MariadbSchemas) or []) - SYSTEM_SCHEMAS)
    if status is not None and own:
        raise OperationError(
            f"{host.name}: replicates from nobody but holds databases of its own "
            f"({', '.join(own)}); refusing to seed it from {primary_address} over them. Drop "
            "them (after checking) or set it up by hand."
        )

    secret = reveal(password)
    cnf = f"{SECRET_DIR}/seed.cnf"
    change = f"{SECRET_DIR}/change-master.sql"
    yield from secret_file(
        "seed.cnf",
        (
            "[client]\n"
            f"host = {primary_address}\n"
            f"port = {port}\n"
            f"user = {replication_user}\n"
            f"password = {option_value(secret)}\n"
        ),
    )
    yield from secret_file(
        "change-master.sql",
        (change_master_sql(primary_address, port, replication_user, secret) + "START SLAVE;\n"),
    )
    # The replica's own binlog is meaningless before it is seeded; local GTIDs in it would
    # collide with the primary's under gtid_strict_mode.
    yield run_sql("STOP SLAVE; RESET MASTER")
    yield StringCommand(
        "set -o pipefail; rc=0;",
        "{",
        "echo",
        QuoteString("SET SESSION sql_log_bin=0;"),
        ";",
        "mariadb-dump",
        f"--defaults-extra-file={cnf}",
        "--single-transaction",
        "--master-data=1",
        "--gtid",
        "--all-databases",
        "--routines",
        "--events",
        "--triggers",
        "--flush-privileges",
        "--ignore-table=mysql.gtid_slave_pos",
        ";",
        "}",
        "|",
        "mariadb",
        "||",
        "rc=$?;",
        "if",
        "[",
        "$rc",
        "-eq",
        "0",
        "];",
        "then",
        "out=$(mariadb",
        "<",
        change,
        "2>&1)",
        "||",
        "{",
        "rc=$?;",
        *ERROR_CODE_ONLY,
        "}",
        ";",
        "fi;",
        "rm",
        "-f",
        cnf,
        change,
        ";",
        "exit",
        "$rc",
        _shell_executable="bash",
    )
