"""The engine roles' rules (roles/engine.py, roles/mariadb.py, roles/postgresql.py): a database
host's identity (engine, role, workload, server_id, its address, hardware, max_connections, client
networks) and its application databases, users and db_settings, checked before any host is
touched. validation runs them (validation/checks.py); db_settings' own names and values are
engines/db_settings.py's. Pure: no pyinfra (operations.mariadb's privilege names are read when a
MariaDB user names privileges).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engines import db_settings, db_settings_check
from model import keys, secrets as secrets_mod
from model.checking import Context, close, is_int, is_number, kind_of
from model.hostdata import HostConfig
from roles import render

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# What a db_users entry may say, per engine. PostgreSQL users get CONNECT on their database (or own
# it); table privileges are the application's migrations' business there.
USER_KEYS = {
    "mariadb": {"name", "password_secret", "database", "privileges"},
    "postgresql": {"name", "password_secret", "database", "owner"},
}
_STR = keys.STRING


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_privileges(value: object) -> bool:
    """MariaDB privileges: "SELECT,INSERT" or a list of names."""
    return isinstance(value, str) or (
        isinstance(value, (list, tuple)) and all(isinstance(p, str) for p in value)
    )


# --- nested types ------------------------------------------------------------------------------


def type_db_client_networks(ctx: Context, name: str, key: str, value: Sequence[object]) -> bool:
    return ctx.type_items(name, key, value, _STR, '"10.1.0.0/16"')


def type_hardware(ctx: Context, name: str, key: str, value: Mapping[Any, Any]) -> bool:
    good = True
    for field in sorted(set(value) - {"ram_bytes", "cpus"}, key=str):
        ctx.add(
            name, f"{key}[{field!r}]", value[field], "unknown hardware key", "use only ram_bytes and cpus"
        )
        good = False
    missing = [field for field in ("ram_bytes", "cpus") if field not in value]
    if missing:
        ctx.add(
            name,
            key,
            value,
            f"misses {' and '.join(missing)}",
            'give both, e.g. {"ram_bytes": 4 * 1024**3, "cpus": 2}',
        )
        good = False
    for field in ("ram_bytes", "cpus"):
        if field in missing:
            continue
        elif not is_int(value[field]):
            ctx.add(
                name,
                f"{key}[{field!r}]",
                value[field],
                f"must be an integer, not {kind_of(value[field])}",
                "bytes as an integer, e.g. 4 * 1024**3" if field == "ram_bytes" else "a count, e.g. 2",
            )
            good = False
    return good


def type_db_settings(ctx: Context, name: str, key: str, value: Mapping[Any, Any]) -> bool:
    good = True
    for setting, setting_value in value.items():
        where = f"{key}[{setting!r}]"
        if not isinstance(setting, str) or not setting:
            ctx.add(
                name,
                where,
                setting_value,
                "a setting name must be a non-empty string",
                'e.g. "innodb_io_capacity" or "work_mem"',
            )
            good = False
        elif not (isinstance(setting_value, (str, bool)) or is_number(setting_value)):
            ctx.add(
                name,
                where,
                setting_value,
                f"must be a single value (string, number or boolean), not {kind_of(setting_value)}",
                'write it as the server\'s config file takes it, e.g. 2000 or "8MB"; '
                "remove the key for the sized default",
            )
            good = False
    return good


def type_entries(
    ctx: Context, name: str, key: str, entries: Sequence[Any], fields: Mapping[str, tuple]
) -> bool:
    """A list of mappings; fields: field -> (check, what it must be, example); "name" is required."""
    good = True
    example = keys.KEYS[key].example[1:-1]
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        if not isinstance(entry, Mapping):
            ctx.add(name, where, entry, f"must be a mapping, not {kind_of(entry)}", f"e.g. {example}")
            good = False
            continue
        for field in sorted(set(entry) - set(fields), key=str):
            ctx.add(
                name,
                f"{where}.{field}",
                entry[field],
                f"not a {key} setting",
                f"use only {', '.join(fields)}",
            )
            good = False
        if "name" not in entry:
            ctx.add(name, f"{where}.name", None, "missing", f"e.g. {example}")
            good = False
        for field, (check, must, field_example) in fields.items():
            if field in entry and not check(entry[field]):
                ctx.add(
                    name,
                    f"{where}.{field}",
                    entry[field],
                    f"must be {must}, not {kind_of(entry[field])}",
                    f"e.g. {field_example}",
                )
                good = False
    return good


def type_databases(ctx: Context, name: str, key: str, value: Sequence[object]) -> bool:
    return type_entries(
        ctx,
        name,
        key,
        value,
        {"name": (_is_str, "a string", '"app"'), "owner": (_is_str, "a user's name (a string)", '"app"')},
    )


def type_db_users(ctx: Context, name: str, key: str, value: Sequence[object]) -> bool:
    return type_entries(
        ctx,
        name,
        key,
        value,
        {
            "name": (_is_str, "a string", '"app"'),
            "password_secret": (_is_str, "a secret's name (a string)", '"app_password"'),
            "database": (_is_str, "a database's name (a string)", '"app"'),
            "privileges": (_is_privileges, "a string or a list of strings", '"SELECT,INSERT"'),
            "owner": (_is_bool, "true or false", "True"),
        },
    )


TYPES: dict[str, Callable[..., bool]] = {
    "db_client_networks": type_db_client_networks,
    "hardware": type_hardware,
    "db_settings": type_db_settings,
    "databases": type_databases,
    "db_users": type_db_users,
}


# --- per host ----------------------------------------------------------------------------------


def identity(ctx: Context, c: HostConfig) -> None:
    """A database host's (a backup host's: roles/backup_checks.py)."""
    ctx.choice(c, "engine", c.engine)
    ctx.choice(c, "role", c.role)
    ctx.choice(c, "workload", c.workload)
    if not ctx.ok(c, "engine", "server_id"):
        pass
    elif c.engine == "mariadb" and not (is_int(c.server_id) and 1 <= c.server_id < 2**32):
        ctx.add(
            c.name,
            "server_id",
            c.server_id,
            "MariaDB needs a unique server_id",
            "set an integer 1..4294967295, unique within the replication group",
        )
    elif c.engine == "postgresql" and c.server_id is not None:
        ctx.add(
            c.name, "server_id", c.server_id, "PostgreSQL has no server_id (it would be ignored)", "remove it"
        )
    if ctx.ok(c, "replication_address") and c.replication_address is not None:
        try:
            address = ipaddress.ip_address(c.replication_address)
        except ValueError:
            ctx.add(
                c.name,
                "replication_address",
                c.replication_address,
                "not an IP address",
                "set the host's address on the replication network",
            )
        else:
            if address.is_unspecified or address.is_loopback or address.is_multicast:
                ctx.add(
                    c.name,
                    "replication_address",
                    c.replication_address,
                    "other hosts cannot reach this host at that address",
                    "set the host's own address on the replication network",
                )
    hw = c.hardware
    if ctx.ok(c, "hardware") and hw is not None and not (hw["ram_bytes"] >= 2 * 1024**3 and hw["cpus"] >= 1):
        ctx.add(
            c.name,
            "hardware",
            hw,
            "needs ram_bytes >= 2 GiB and cpus >= 1",
            'e.g. {"ram_bytes": 4 * 1024**3, "cpus": 2}',
        )
    if (
        ctx.ok(c, "max_connections")
        and c.max_connections is not None
        and not (1 <= c.max_connections <= 100000)
    ):
        ctx.add(
            c.name,
            "max_connections",
            c.max_connections,
            "out of range",
            "an integer 1..100000, or None for the sized default",
        )
    for net in c.client_networks:
        try:
            network = ipaddress.ip_network(net)
        except ValueError:
            ctx.add(
                c.name, "db_client_networks", net, "not a network", 'use CIDR notation, e.g. "10.1.0.0/16"'
            )
            continue
        if c.engine == "mariadb" and network.version == 6 and network.num_addresses > 1:
            ctx.add(
                c.name,
                "db_client_networks",
                net,
                "MariaDB accounts cannot match an IPv6 network (netmasks are IPv4 only)",
                "list IPv4 networks, or single IPv6 addresses (/128)",
            )


def database(ctx: Context, c: HostConfig) -> None:
    """db_settings (engines/db_settings.py, and against the data dataset's recordsize), the
    application databases and users."""
    ctx.problems += db_settings_check.check(c)
    if c.engine == "postgresql" and c.name in ctx.named and ctx.ok(c, "db_settings"):
        fpw = db_settings.as_bool("postgresql", c.db_settings.get("full_page_writes"))
        size = recordsize_or_none(c, c.data_dataset)
        if fpw is False and size is not None and size < 8192:
            ctx.add(
                c.name,
                "db_settings['full_page_writes']",
                c.db_settings["full_page_writes"],
                f"unsafe with recordsize {size} < 8k on "
                f"{c.data_dataset}: a page could be torn across records",
                "set the data dataset's recordsize to >= 8k or drop the override",
            )
    if c.engine == "mariadb" and c.name in ctx.named and ctx.ok(c, "db_settings"):
        doublewrite = db_settings.as_bool("mariadb", c.db_settings.get("innodb_doublewrite"))
        size = recordsize_or_none(c, c.data_dataset)
        if doublewrite is False and size is not None and size < render.INNODB_PAGE:
            ctx.add(
                c.name,
                "db_settings['innodb_doublewrite']",
                c.db_settings["innodb_doublewrite"],
                f"unsafe with recordsize {size} < 16k on {c.data_dataset}: an InnoDB page could "
                "be torn across records",
                "set the data dataset's recordsize to 16k or more, or drop the override",
            )
    users_ok = ctx.ok(c, "db_users")
    user_names = {u["name"] for u in c.db_users} if users_ok else set()
    if ctx.ok(c, "databases"):
        seen = set()
        for i, db in enumerate(c.databases):
            if not NAME_RE.match(db["name"]):
                ctx.add(
                    c.name,
                    f"databases[{i}].name",
                    db["name"],
                    "not a valid name",
                    'a letter or _, then letters, digits, _ (at most 64), e.g. "app"',
                )
            elif db["name"] in seen:
                ctx.add(
                    c.name, f"databases[{i}].name", db["name"], "declared twice", "declare each database once"
                )
            seen.add(db["name"])
            owner = db.get("owner")
            if users_ok and owner is not None and owner not in user_names:
                ctx.add(
                    c.name,
                    f"databases[{i}].owner",
                    owner,
                    "no such user in db_users",
                    f"declare the user, or use one of {sorted(user_names)}",
                )
    declared = {db["name"] for db in c.databases}
    if users_ok:
        users(ctx, c, declared)


def users(ctx: Context, c: HostConfig, declared: set[str]) -> None:
    seen = set()
    for i, user in enumerate(c.db_users):
        if not NAME_RE.match(user["name"]):
            ctx.add(
                c.name,
                f"db_users[{i}].name",
                user["name"],
                "not a valid name",
                'a letter or _, then letters, digits, _ (at most 64), e.g. "app"',
            )
            continue
        if user["name"] in seen:
            ctx.add(c.name, f"db_users[{i}].name", user["name"], "declared twice", "declare each user once")
        seen.add(user["name"])
        allowed = USER_KEYS[c.engine] if c.engine in USER_KEYS else set(user)
        for key in sorted(set(user) - allowed):
            ctx.add(
                c.name,
                f"db_users[{i}].{key}",
                user[key],
                f"not a {c.engine} user setting (would be ignored)",
                f"use only {', '.join(sorted(allowed))}",
            )
        target = user.get("database") or (user["name"] if c.engine == "postgresql" else None)
        if target and target not in declared and ctx.ok(c, "databases"):
            ctx.add(
                c.name,
                f"db_users[{i}].database",
                target,
                f"user {user['name']} connects to database {target!r}, which is not in databases",
                f'declare it: databases = [{{"name": "{target}"}}]',
            )
        if c.engine == "mariadb" and user.get("privileges"):
            privileges(ctx, c, i, user["privileges"])
        secret = user.get("password_secret")
        if not secret:
            ctx.add(
                c.name,
                f"db_users[{i}].password_secret",
                secret,
                f"user {user['name']} has no password_secret",
                "name the secret holding its password",
            )
        elif c.role == "primary" and secret not in ctx.secrets:
            ctx.add(
                c.name,
                f"db_users[{i}].password_secret",
                secret,
                f"secret {secret!r} for user {user['name']} is missing (looked in: {ctx.secrets.source})",
                f"export {secrets_mod.env_name(secret)} or add it to the secrets file",
            )


def privileges(ctx: Context, c: HostConfig, i: int, privileges: str | Sequence[str]) -> None:
    from operations.mariadb import DATABASE_ALL

    names = privileges.split(",") if isinstance(privileges, str) else privileges
    for name in names:
        normal = " ".join(name.upper().split())
        if normal not in DATABASE_ALL | {"ALL", "ALL PRIVILEGES"}:
            hint = close(normal, DATABASE_ALL)
            ctx.add(
                c.name,
                f"db_users[{i}].privileges",
                privileges,
                f"{name.strip()!r} is not a database-level privilege",
                f"did you mean one of {hint}?"
                if hint
                else f"use ALL or some of {', '.join(sorted(DATABASE_ALL))}",
            )


def recordsize_or_none(c: HostConfig, ds: str) -> int | None:
    try:
        return c.recordsize(ds)
    except (ValueError, KeyError):
        return None  # reported with the dataset
