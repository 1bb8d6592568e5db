"""Operations of the pgBackRest role (roles/pgbackrest.py), on the repository's host."""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from facts.pgbackrest import MISSING_STANZA_DATA, MISSING_STANZA_PATH, PgbackrestInfo


def command(stanza: str, *args: str) -> StringCommand:
    """pgBackRest as its user, for one stanza."""
    return StringCommand(
        "runuser -u postgres -- pgbackrest",
        QuoteString(f"--stanza={stanza}"),
        *[QuoteString(a) for a in args],
    )


@operation()
def stanza(stanza: str) -> Generator[StringCommand, None, None]:
    """
    A stanza in the repository (``pgbackrest stanza-create``: reads the group's primary, writes
    its system identifier and version); nothing when it exists.

    + stanza: the replication group's name
    """
    info = host.get_fact(PgbackrestInfo, stanza=stanza)
    if info is not None and info["status"] not in (MISSING_STANZA_PATH, MISSING_STANZA_DATA):
        host.noop(f"stanza {stanza} exists ({info['message']})")
        return
    yield command(stanza, "stanza-create")


@operation()
def first_backup(stanza: str) -> Generator[StringCommand, None, None]:
    """
    A full backup of a stanza that has none (its archive checked on the way: pgBackRest waits
    for the backup's last WAL segment to arrive); nothing once it has one, the timers take the
    others.

    + stanza: the replication group's name
    """
    info = host.get_fact(PgbackrestInfo, stanza=stanza)
    if info is not None and info["backups"]:
        host.noop(
            f"stanza {stanza} has {len(info['backups'])} backup(s), the newest {info['backups'][-1]['label']}"
        )
        return
    yield command(stanza, "--type=full", "backup")
    yield command(stanza, "--output=text", "info")
