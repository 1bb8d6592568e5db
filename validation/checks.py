"""Every rule over an inventory's data, in one run: the type pass (model/keys.py's types, then each
owner's nested checks), unknown keys, then each owner's rules per host and across hosts.

The rules live with the code that owns the keys they check:
    roles/zfs_checks.py          drives, pool, datasets, a drive on two hosts
    roles/zfs_packages.py        zfs_install, zfs_module_repository
    roles/zfs_module_params.py   zfs_module_params
    roles/engine_checks.py       a database host's identity, db_settings, databases, db_users
    roles/topology_checks.py     the replication groups
    roles/snapshots_checks.py    snapshot_on, snapshot_retention
    roles/backup_checks.py       a backup host's identity and settings, its addresses and key
    roles/pgbackrest_checks.py   the archive and backup settings, the PostgreSQL hosts' key
    roles/monitoring_checks.py   ports, durations, thresholds, alert_for, scraped addresses
    roles/release_checks.py      debian_release, postgresql_version (the live host's side:
                                 roles/release.py)
    roles/firewall_checks.py     firewall_admin_networks (the live side: roles/firewall.py)
    roles/tls_checks.py          tls, the certificates' days, a group that agrees on tls
    model/keys.py                the keys with a fixed set of values (their choices)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from model import keys, secrets as secrets_mod
from model.checking import KIND_WORDS, Context, close, has_kind, kind_of
from model.hostdata import HostConfig
from model.problems import Problem, ValidationError
from roles import (
    backup_checks,
    engine_checks,
    firewall_checks,
    monitoring_checks,
    pgbackrest_checks,
    release_checks,
    snapshots_checks,
    tls_checks,
    topology_checks,
    zfs_checks,
    zfs_module_params,
    zfs_packages,
)

# What each key holds: (type, None allowed, an example), from its definition (model/keys.py).
# Checked before any rule reads the data: a key of the wrong type gets one message, and every
# rule that depends on it is skipped. The nested values of lists and mappings are checked by
# their owners' TYPES (NESTED).
KEY_TYPES: dict[str, tuple[str, bool, str]] = {
    name: (KIND_WORDS[k.kind], k.nullable, k.example) for name, k in keys.KEYS.items()
}
# Keys the toolkit reads (model/keys.py defines each); a misspelt one is an error, not a silent
# default.
KNOWN_KEYS = set(KEY_TYPES)
# Keys the toolkit once documented and nothing reads any more: setting one is a mistake.
RETIRED_KEYS = {
    "db_port": "nothing reads it: the servers listen on their default port (MariaDB 3306, "
    "PostgreSQL 5432); remove it",
}
OUR_PREFIXES = ("zpool_", "zfs_", "db_", "drive", "wipe_")
# key -> check(ctx, host, key, value) -> good: the owners' checks of nested values.
NESTED: dict[str, Callable[..., bool]] = {
    **zfs_checks.TYPES,
    **zfs_module_params.TYPES,
    **engine_checks.TYPES,
    **snapshots_checks.TYPES,
    **backup_checks.TYPES,
    **pgbackrest_checks.TYPES,
    **firewall_checks.TYPES,
}


def validate(hosts: Mapping[str, Mapping], secrets: secrets_mod.Secrets | None = None) -> list[Problem]:
    """All problems in the hosts' data (name -> host data mapping)."""
    ctx = Context(secrets if secrets is not None else secrets_mod.load())
    for name, data in hosts.items():
        if not isinstance(data, Mapping):
            ctx.add(
                str(name),
                "host data",
                data,
                f"is {kind_of(data)}, not a mapping",
                'list the host as ("name", {"engine": ..., ...})',
            )
            continue
        ctx.data[name] = types(ctx, name, data)
    ctx.cfg = {name: HostConfig.from_data(name, data) for name, data in ctx.data.items()}
    for name, c in ctx.cfg.items():
        unknown_keys(ctx, name)
        per_host(ctx, c)
    zfs_checks.fleet(ctx)
    topology_checks.fleet(ctx)
    backup_checks.fleet(ctx)
    pgbackrest_checks.fleet(ctx)
    monitoring_checks.fleet(ctx)
    tls_checks.fleet(ctx)
    return ctx.problems


def check(hosts: Mapping[str, Mapping], secrets: secrets_mod.Secrets | None = None) -> None:
    problems = validate(hosts, secrets)
    if problems:
        raise ValidationError(problems)


def per_host(ctx: Context, c: HostConfig) -> None:
    """One host's rules, in the order their problems are reported."""
    release_checks.host(ctx, c)
    firewall_checks.host(ctx, c)
    tls_checks.host(ctx, c)
    if c.is_backup_host:
        backup_checks.identity(ctx, c)
    else:
        engine_checks.identity(ctx, c)
    zfs_checks.drives(ctx, c)
    zfs_checks.pool(ctx, c)
    if c.is_backup_host:
        zfs_packages.check(ctx, c)
        backup_checks.host(ctx, c)
        pgbackrest_checks.host(ctx, c)
        monitoring_checks.host(ctx, c)
        return
    zfs_checks.datasets(ctx, c)
    zfs_module_params.check(ctx, c)
    zfs_packages.check(ctx, c)
    ctx.choice(c, "roll_primary", c.roll_primary)  # day2/rolling.py's: its choices are the rule
    ctx.choice(c, "reboot_method", c.reboot_method)  # day2/upgrade_release.py's: its choices
    snapshots_checks.host(ctx, c)
    monitoring_checks.host(ctx, c)
    engine_checks.database(ctx, c)
    if c.engine == "postgresql":
        pgbackrest_checks.host(ctx, c)


def types(ctx: Context, name: str, data: Mapping) -> dict:
    """The host's data with every key of the wrong type (at any depth) reported and left out:
    HostConfig.from_data then falls back to its defaults for it."""
    clean = dict(data)
    bad = ctx.bad.setdefault(name, set())
    for key, k in keys.KEYS.items():
        if key not in data:
            continue
        value = data[key]
        if value is None and k.nullable:
            continue
        kind = KIND_WORDS[k.kind]
        if not has_kind(value, k.kind):
            expected = f"{kind} or None" if k.nullable else kind
            fix = f"e.g. {k.example}"
            if value is None:
                fix = f"set {kind} ({fix}), or remove the key for the default"
            ctx.add(name, key, value, f"must be {expected}, not {kind_of(value)}", fix)
            ok = False
        else:
            nested = NESTED.get(key)
            ok = nested(ctx, name, key, value) if nested else True
        if not ok:
            bad.add(key)
            del clean[key]
    return clean


def unknown_keys(ctx: Context, name: str) -> None:
    for key in ctx.data[name]:
        value = ctx.data[name][key]
        if not isinstance(key, str):
            ctx.add(name, repr(key), value, "a setting's name must be a string", 'e.g. "zpool_ashift": 13')
            continue
        if key in KNOWN_KEYS:
            continue
        if key in RETIRED_KEYS:
            ctx.add(name, key, value, "unknown key", RETIRED_KEYS[key])
        elif key.startswith(OUR_PREFIXES):
            hint = close(key, KNOWN_KEYS) or sorted(k for k in KNOWN_KEYS if k.startswith(key[:5]))
            ctx.add(name, key, value, "unknown key", f"did you mean one of {hint}?" if hint else "remove it")
        elif close(key, KNOWN_KEYS):  # e.g. "replication_adress": a silent default
            ctx.add(name, key, value, "unknown key", f"did you mean one of {close(key, KNOWN_KEYS)}?")
