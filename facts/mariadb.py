"""
Facts about a live MariaDB server, read as root through the unix socket with the `mariadb` CLI.

Every fact returns None when the server cannot be reached (not installed yet, or stopped), so a
first run on a bare host can plan its changes; callers decide whether that is an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

UNREACHABLE = "__DBZFS_MARIADB_UNREACHABLE__"
START = "__DBZFS_MARIADB__"
# A binlog file, as the server names them (not its .index): BASE.NNNNNN.
BINLOG_NAME = re.compile(r"^[A-Za-z0-9_.-]+\.(\d{6,})$")
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def sql_string(value: str) -> str:
    """A MariaDB string literal (default sql_mode: backslash escapes)."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def account(user: str, host: str) -> str:
    """'user'@'host' for SQL statements."""
    return f"{sql_string(user)}@{sql_string(host)}"


def query(sql: str, *flags: str) -> StringCommand:
    """`mariadb -NB -e SQL` after a start marker (pyinfra skips process() on empty output, and
    an empty answer is an answer), printing the UNREACHABLE marker instead of failing."""
    return StringCommand(
        "echo",
        START,
        ";",
        "mariadb",
        *(flags or ("-NB",)),
        "-e",
        QuoteString(sql),
        "2>/dev/null",
        "||",
        "echo",
        UNREACHABLE,
    )


def rows(output: list[str]) -> list[str] | None:
    """The answer's lines, or None when the server could not be reached."""
    lines = [line for line in output if line.strip() != START]
    if any(line.strip() == UNREACHABLE for line in lines):
        return None
    return lines


class MariadbFact(FactBase):
    abstract = True

    @staticmethod
    def default() -> None:
        return None


class MariadbVariables(MariadbFact):
    """
    Global server variables (SHOW GLOBAL VARIABLES), optionally only the named ones.

    .. code:: python

        {"innodb_doublewrite": "OFF", "read_only": "ON", ...}
    """

    @override
    def command(self, names: Iterable[str] | None = None) -> StringCommand:
        sql = "SHOW GLOBAL VARIABLES"
        if names:
            sql += " WHERE Variable_name IN (" + ", ".join(sql_string(n) for n in names) + ")"
        return query(sql)

    @override
    def process(self, output: list[str]) -> dict[str, str] | None:
        lines = rows(output)
        if lines is None:
            return None
        values: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition("\t")
            if name:
                values[name] = value
        return values


class MariadbReplicaStatus(MariadbFact):
    """
    SHOW SLAVE STATUS as a dict of its fields; ``{}`` when the server replicates from nobody.

    .. code:: python

        {"Master_Host": "10.99.0.11", "Slave_IO_Running": "Yes", "Slave_SQL_Running": "Yes",
         "Using_Gtid": "Slave_Pos", "Seconds_Behind_Master": "0", "Last_SQL_Error": "", ...}
    """

    @override
    def command(self) -> StringCommand:
        return query("SHOW SLAVE STATUS", "-E")

    @override
    def process(self, output: list[str]) -> dict[str, str] | None:
        lines = rows(output)
        if lines is None:
            return None
        status: dict[str, str] = {}
        for line in lines:
            if line.startswith("***"):
                continue
            key, sep, value = line.partition(":")
            if sep:
                status[key.strip()] = value.strip()
        return status


class MariadbUsers(MariadbFact):
    """
    Accounts: (user, host) -> plugin and a digest of the stored credential. The credential itself
    (a password hash) never leaves the host: only its SHA-256 is read, or "empty" / "invalid"
    (Debian's root: mysql_native_password USING 'invalid' OR unix_socket, i.e. no password login).

    .. code:: python

        {("root", "localhost"): {"plugin": "mysql_native_password", "credential": "invalid"},
         ("replicator", "10.99.0.12"): {"plugin": "mysql_native_password",
                                        "credential": "9f86d0..."}}
    """

    @override
    def command(self) -> StringCommand:
        return query(
            "SELECT User, Host, plugin, CASE authentication_string WHEN '' THEN 'empty' "
            "WHEN 'invalid' THEN 'invalid' ELSE SHA2(authentication_string, 256) END "
            "FROM mysql.user"
        )

    @override
    def process(self, output: list[str]) -> dict[tuple[str, str], dict[str, str]] | None:
        lines = rows(output)
        if lines is None:
            return None
        users: dict[tuple[str, str], dict[str, str]] = {}
        for line in lines:
            fields = line.split("\t")
            if len(fields) == 4:
                user, host, plugin, credential = fields
                users[(user, host)] = {"plugin": plugin, "credential": credential}
        return users


class MariadbGrants(MariadbFact):
    """
    Privileges of one account, per level: ``"*"`` (global) and one key per database. USAGE (no
    privilege) is left out; WITH GRANT OPTION shows as "GRANT OPTION".

    .. code:: python

        {"*": {"REPLICATION SLAVE", "SELECT"}, "app": {"SELECT", "INSERT"}}
    """

    @override
    def command(self, user: str, user_host: str) -> StringCommand:
        grantee = sql_string(f"'{user}'@'{user_host}'")
        return query(
            f"SELECT '*', PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema.USER_PRIVILEGES "
            f"WHERE GRANTEE = {grantee} UNION ALL "
            f"SELECT TABLE_SCHEMA, PRIVILEGE_TYPE, IS_GRANTABLE "
            f"FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = {grantee}"
        )

    @override
    def process(self, output: list[str]) -> dict[str, set[str]] | None:
        lines = rows(output)
        if lines is None:
            return None
        grants: dict[str, set[str]] = {}
        for line in lines:
            fields = line.split("\t")
            if len(fields) != 3:
                continue
            level, privilege, grantable = fields
            if privilege != "USAGE":
                grants.setdefault(level, set()).add(privilege)
            if grantable == "YES":
                grants.setdefault(level, set()).add("GRANT OPTION")
        return grants


class MariadbSchemas(MariadbFact):
    """Databases on the server (SHOW DATABASES), system schemas included: a sorted list."""

    @override
    def command(self) -> StringCommand:
        return query("SHOW DATABASES")

    @override
    def process(self, output: list[str]) -> list[str] | None:
        lines = rows(output)
        if lines is None:
            return None
        return sorted(line.strip() for line in lines if line.strip())


class MariadbLiveRole(MariadbReplicaStatus):
    """
    What the live server is in the replication topology: ``read_only`` ("1"/"0") and, when it
    replicates, SHOW SLAVE STATUS's fields, in one command; None when the server does not answer.

    .. code:: python

        {"read_only": "1", "Master_Host": "10.99.0.11", "Slave_IO_Running": "Yes", ...}
        {"read_only": "0"}  # a primary
    """

    @override
    def command(self) -> StringCommand:
        return query("SELECT @@global.read_only AS read_only; SHOW SLAVE STATUS", "-E")


class BinlogFiles(FactBase):
    """
    The binlog files in a directory (the backup host's stream of a group: roles/binlogs.py),
    oldest first by their number, with their size and last write; [] when there is none. No
    server needed.

    .. code:: python

        [{"name": "mysql-bin.000007", "size": 1048576, "mtime": 1796450403.25}]
    """

    default = list

    @override
    def command(self, directory: str) -> StringCommand:
        return StringCommand(
            "find",
            QuoteString(directory),
            "-maxdepth 1 -type f -printf '%f\\t%s\\t%T@\\n' 2>/dev/null || true",
        )

    @override
    def process(self, output: list[str]) -> list[dict[str, object]]:
        found = []
        for line in output:
            fields = line.split("\t")
            if len(fields) != 3 or not (match := BINLOG_NAME.match(fields[0])):
                continue
            try:
                size, mtime = int(fields[1]), float(fields[2])
            except ValueError:
                continue
            found.append((int(match.group(1)), {"name": fields[0], "size": size, "mtime": mtime}))
        return [entry for _, entry in sorted(found, key=lambda item: item[0])]
