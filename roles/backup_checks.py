"""The backup role's rules (roles/backup.py, roles/backup_fleet.py): a backup host's identity
and settings, and, with a backup host in the inventory, the addresses it pulls from and its key.
validation runs them (validation/checks.py) before any host is touched.
"""

from __future__ import annotations

from model import secrets as secrets_mod
from model.checking import ENGINES, Context, is_int
from model.hostdata import HostConfig
from roles import backup_fleet, snapshots_checks

TYPES = {"backup_retention": snapshots_checks.type_retention}


def identity(ctx: Context, c: HostConfig) -> None:
    """A backup host runs no database: none of a database host's identity keys."""
    for key, value in (("engine", c.engine), ("primary", c.primary), ("server_id", c.server_id)):
        if ctx.ok(c, key) and value is not None:
            ctx.add(
                c.name,
                key,
                value,
                'a backup host (role = "backup") runs no database',
                "remove it, or give the host a database role (primary or replica)",
            )


def host(ctx: Context, c: HostConfig) -> None:
    if ctx.ok(c, "backup_pull_minutes") and not 1 <= c.backup_pull_minutes <= 1440:
        ctx.add(c.name, "backup_pull_minutes", c.backup_pull_minutes, "out of range (1..1440)", "e.g. 15")
    if ctx.ok(c, "backup_max_age_hours") and c.backup_max_age_hours < 1:
        ctx.add(c.name, "backup_max_age_hours", c.backup_max_age_hours, "out of range (at least 1)", "e.g. 2")
    if not ctx.ok(c, "backup_retention"):
        return
    engines = sorted({d.engine for d in ctx.cfg.values() if d.engine in ENGINES})
    for name in engines:
        counts = c.backup_retention.get(name, {})
        if not any(is_int(n) and n > 0 for n in counts.values()):
            ctx.add(
                c.name,
                f"backup_retention[{name!r}]",
                counts or None,
                f"keeps no copy of the {name} hosts' snapshots",
                'a count for at least one kind, e.g. {"hourly": 48, "daily": 35}',
            )


def backup_hosts(ctx: Context) -> list[HostConfig]:
    return [c for c in ctx.cfg.values() if c.is_backup_host]


def fleet(ctx: Context) -> None:
    """With a backup host in the inventory: an address for every host it pulls from and for
    itself (the database hosts let its key in from there only), and its key."""
    backups = backup_hosts(ctx)
    if not backups:
        return
    for c in ctx.cfg.values():
        if (c.is_backup_host or c.engine in ENGINES) and not c.replication_address:
            if ctx.ok(c, "replication_address"):
                why = (
                    "the database hosts let its key in from that address only"
                    if c.is_backup_host
                    else f"the backup host ({', '.join(b.name for b in backups)}) pulls from it there"
                )
                ctx.add(
                    c.name,
                    "replication_address",
                    None,
                    f"none set; {why}",
                    "set its address on the private network",
                )
    ssh_key(ctx, backups[0].name, backup_fleet.SECRET, "a backup host pulls with this key")


def ssh_key(ctx: Context, name: str, secret: str, why: str) -> None:
    """A secret that is an OpenSSH private key (its text never printed)."""
    key = ctx.secrets.get(secret)
    fix = (
        f"export {secrets_mod.env_name(secret)} or add {secret} to the secrets file: "
        'the text of a key made by ssh-keygen -t ed25519 -N "" -f KEY'
    )
    if not key:
        ctx.add(name, f"secrets.{secret}", None, f"{why} (looked in: {ctx.secrets.source})", fix)
        return
    try:
        backup_fleet.public_key(key)
    except ValueError as exc:
        ctx.add(name, f"secrets.{secret}", "(hidden)", str(exc), fix)
