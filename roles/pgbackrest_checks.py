"""The pgBackRest role's rules (roles/pgbackrest.py): the archive and backup settings, and the
PostgreSQL hosts' key to the repository when the inventory has a backup host. validation runs
them (validation/checks.py) before any host is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model import keys
from model.checking import Context, is_int
from model.hostdata import HostConfig
from roles import backup_checks, pgbackrest, snapshots_checks


def type_repository_snapshots(ctx: Context, name: str, key: str, value: Mapping[Any, Any]) -> bool:
    return snapshots_checks.kind_counts(ctx, name, key, value)


TYPES = {"pgbackrest_repository_snapshots": type_repository_snapshots}


def host(ctx: Context, c: HostConfig) -> None:
    """A PostgreSQL host's archive settings, a backup host's backup settings."""
    if ctx.ok(c, "pitr_archive_timeout") and not 1 <= c.pitr_archive_timeout <= 3600:
        ctx.add(
            c.name,
            "pitr_archive_timeout",
            c.pitr_archive_timeout,
            "out of range (1..3600 seconds)",
            "e.g. 60: at most that much committed work waits to be archived",
        )
    if ctx.ok(c, "pgbackrest_retention_full") and not 1 <= c.pgbackrest_retention_full <= 99:
        ctx.add(
            c.name, "pgbackrest_retention_full", c.pgbackrest_retention_full, "out of range (1..99)", "e.g. 2"
        )
    key = "pgbackrest_backup_max_age_hours"
    if ctx.ok(c, key) and not 1 <= c.pgbackrest_backup_max_age_hours <= 8760:
        ctx.add(
            c.name,
            key,
            c.pgbackrest_backup_max_age_hours,
            "out of range (1..8760 hours)",
            "e.g. 26: the daily backup plus slack",
        )
    for key in ("pgbackrest_full_calendar", "pgbackrest_incr_calendar"):
        value = getattr(c, key)
        if ctx.ok(c, key) and (not value.strip() or "\n" in value or "%" in value):
            ctx.add(
                c.name, key, value, "not a systemd OnCalendar expression", f"e.g. {keys.KEYS[key].example}"
            )
    key = "pgbackrest_repository_snapshots"
    archives = c.is_backup_host and any(d.engine == "postgresql" for d in ctx.cfg.values())
    if archives and ctx.ok(c, key) and not any(is_int(n) and n > 0 for n in getattr(c, key).values()):
        ctx.add(
            c.name,
            key,
            getattr(c, key),
            "no snapshot of the repository would be kept: every PostgreSQL host can write and "
            "delete files in it, and only these undo that",
            f"keep some, e.g. {keys.KEYS[key].example}",
        )


def fleet(ctx: Context) -> None:
    """With a backup host: the PostgreSQL hosts' key to the repository on it."""
    if not backup_checks.backup_hosts(ctx):
        return
    postgresql = [c for c in ctx.cfg.values() if c.engine == "postgresql"]
    if postgresql:
        backup_checks.ssh_key(
            ctx,
            postgresql[0].name,
            pgbackrest.SECRET,
            "the PostgreSQL hosts archive their WAL to the backup host with this key",
        )
