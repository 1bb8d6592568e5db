"""
Operations that move a PostgreSQL replication group's primary (runbooks/switchover.py): shut the
old primary down cleanly, promote the standby that has replayed its shutdown checkpoint, point
standbys at the new primary, and bring the old primary back as a standby without a rewind.

Why no rewind is needed: a fast shutdown writes a shutdown checkpoint and the walsenders send it
to every connected standby before they exit. A standby that has replayed that record holds every
WAL record the old primary ever wrote; promoted, it starts its new timeline after it, so the old
primary's WAL is a prefix of the new primary's history and it can follow it as it is. (pg_rewind
would be needed otherwise, and it needs full_page_writes or wal_log_hints, which the ZFS tuning
turns off.)
"""

from __future__ import annotations

from collections.abc import Generator, Iterable

from pyinfra import host, inventory, state
from pyinfra.api import OperationError, QuoteString, StringCommand, operation

from facts.postgresql import (
    PostgresqlControlData,
    PostgresqlLiveRole,
    PostgresqlReplicationSlots,
    PostgresqlWalReceiver,
)
from operations.postgresql import psql_command, quote_literal, unit

CONTROLDATA = "/usr/lib/postgresql/{version}/bin/pg_controldata"


def conninfo(address: str, port: int, user: str, passfile: str, application_name: str) -> str:
    """primary_conninfo as pg_basebackup -R writes it, with the password in the passfile."""
    return (
        f"user={user} passfile={passfile} host={address} port={int(port)} application_name={application_name}"
    )


@operation()
def shut_down(
    version: int | str, cluster_name: str, data_directory: str
) -> Generator[StringCommand, None, None]:
    """
    Stop the primary with a fast shutdown (clients disconnected, a shutdown checkpoint written and
    sent to every connected standby), then check its control file says "shut down".

    + version, cluster_name: the Debian cluster (e.g. 15, main)
    + data_directory: its data directory
    """
    control = host.get_fact(PostgresqlControlData, version=version, data_directory=data_directory)
    if control is None:
        raise OperationError(f"{host.name}: no PostgreSQL cluster in {data_directory}")
    if control["state"] == "shut down":
        host.noop(f"shut down cleanly, shutdown checkpoint at {control['checkpoint']}")
        return
    if control["state"] != "in production":
        raise OperationError(
            f"{host.name}: the cluster is {control['state']!r}, not a running primary; nothing was stopped"
        )
    binary = CONTROLDATA.format(version=version)
    yield StringCommand("systemctl stop", unit(version, cluster_name))
    yield StringCommand(
        f"LC_ALL=C {binary} -D",
        QuoteString(data_directory),
        "| grep -q '^Database cluster state: *shut down$' ||",
        "{ echo 'the server did not shut down cleanly (pg_controldata); look at its log' >&2; exit 1; }",
    )


@operation()
def promote(
    old_primary: str,
    old_data_directory: str,
    version: int | str,
    timeout: int = 60,
) -> Generator[StringCommand, None, None]:
    """
    Promote this standby once it has replayed the old primary's shutdown checkpoint (read from
    the old primary's control file), waiting at most `timeout` seconds for it; then it forgets
    its old primary_conninfo.

    + old_primary: the inventory name of the old primary, shut down cleanly before this step
    + old_data_directory: the old primary's data directory
    + version: PostgreSQL major version
    + timeout: seconds to wait for the shutdown checkpoint to be replayed; past it nothing changes
    """
    live = host.get_fact(PostgresqlLiveRole)
    if live is None:
        raise OperationError(f"{host.name}: PostgreSQL does not answer; nothing was promoted")
    if not live["in_recovery"]:
        host.noop("already the primary: not in recovery")
        return
    control = inventory.get_host(old_primary).get_fact(
        PostgresqlControlData, version=version, data_directory=old_data_directory
    )
    if control is None:
        raise OperationError(f"{old_primary}: no PostgreSQL cluster in {old_data_directory}")
    if control["state"] == "shut down":
        checkpoint = control["checkpoint"]
    elif not state.is_executing and control["state"] == "in production":
        checkpoint = "<its shutdown checkpoint>"  # --dry: the old primary is shut down first
    else:
        raise OperationError(
            f"{old_primary} is {control['state']!r}, not shut down cleanly: {host.name} cannot "
            "be known to hold every write; nothing was promoted"
        )
    replayed = f"SELECT pg_last_wal_replay_lsn() > {quote_literal(checkpoint)}::pg_lsn"
    message = (
        f"{host.name} did not replay {old_primary}'s shutdown checkpoint ({checkpoint}) within "
        f"{int(timeout)} s; nothing was promoted"
    )
    yield StringCommand(
        wait_until_true(replayed, timeout, message),
        "; echo",
        QuoteString(f"replayed {old_primary}'s shutdown checkpoint {checkpoint}"),
    )
    yield from _promote()


def wait_until_true(sql: str, timeout: int, message: str) -> StringCommand:
    """A shell loop: `sql` asked once a second until it returns true; `message` and exit 1 after
    `timeout` seconds."""
    return StringCommand(
        f"for i in $(seq {int(timeout)}); do",
        '[ "$(',
        psql_command(sql),
        ')" = t ] && break;',
        f"[ $i = {int(timeout)} ] &&",
        "{ echo",
        QuoteString(message),
        ">&2; exit 1; };",
        "sleep 1; done",
    )


def _promote() -> Generator[StringCommand, None, None]:
    """pg_promote, then the standby forgets its old primary_conninfo."""
    yield StringCommand(
        '[ "$(',
        psql_command("SELECT pg_promote(true, 60)"),
        ')" = t ] ||',
        "{ echo 'pg_promote did not finish within 60 s; look at the server log' >&2; exit 1; }",
    )
    yield StringCommand(
        "runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -d postgres",
        "-c 'ALTER SYSTEM RESET primary_conninfo'",
        "-c 'ALTER SYSTEM RESET primary_slot_name'",
        "-c 'SELECT pg_reload_conf()'",
    )


@operation()
def take_over(timeout: int = 60) -> Generator[StringCommand, None, None]:
    """
    Promote this standby after its primary is gone (a failover): replay everything it received
    (at most `timeout` seconds), then promote. The runbook has checked that the primary does not
    answer (a WAL receiver may show "streaming" until wal_receiver_timeout after it died).
    """
    state_now = host.get_fact(PostgresqlWalReceiver)
    if state_now is None:
        raise OperationError(f"{host.name}: PostgreSQL does not answer; nothing was promoted")
    if not state_now["in_recovery"]:
        host.noop("already the primary: not in recovery")
        return
    replayed = (
        "SELECT pg_last_wal_receive_lsn() IS NULL OR pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()"
    )
    message = f"{host.name} did not replay what it received within {int(timeout)} s; nothing was promoted"
    yield wait_until_true(replayed, timeout, message)
    yield from _promote()


@operation()
def follow(
    version: int | str,
    cluster_name: str,
    data_directory: str,
    primary_address: str,
    slot: str,
    application_name: str,
    passfile: str,
    port: int = 5432,
    replication_user: str = "replicator",
    stale_slots: Iterable[str] = (),
) -> Generator[StringCommand, None, None]:
    """
    Stream from a new primary through this host's slot on it: a running standby changes its
    ``primary_conninfo`` and reloads; a former primary that was shut down cleanly gets
    ``standby.signal`` and the connection settings in ``postgresql.auto.conf`` (the file
    pg_basebackup -R writes) and starts as a standby, then drops the slots it held for its
    former standbys (`stale_slots`), which would keep WAL on it for nobody.

    + primary_address, port: the new primary
    + slot, application_name: this host's slot on it and the name it streams under
    + passfile, replication_user: the replication account (password in the passfile)
    """
    wanted = conninfo(primary_address, port, replication_user, passfile, application_name)
    planning = not state.is_executing
    live = host.get_fact(PostgresqlLiveRole)
    if planning and live is not None and not live["in_recovery"]:
        live = None  # --dry: the runbook's earlier step shuts this primary down first
    if live is not None:
        if not live["in_recovery"]:
            raise OperationError(
                f"{host.name}: a running primary (not in recovery); it was not re-pointed. Shut it "
                "down cleanly first, or re-seed it"
            )
        if live["sender"] == primary_address:
            host.noop(f"a standby of {primary_address}")
        else:
            yield StringCommand(
                "runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -d postgres",
                "-c",
                QuoteString(f"ALTER SYSTEM SET primary_conninfo = {quote_literal(wanted)}"),
                "-c",
                QuoteString(f"ALTER SYSTEM SET primary_slot_name = {quote_literal(slot)}"),
                "-c 'SELECT pg_reload_conf()'",
            )
        yield from _drop_slots(stale_slots)
        return
    control = host.get_fact(PostgresqlControlData, version=version, data_directory=data_directory)
    if control is None or control["state"] not in ("shut down", "shut down in recovery"):
        if not (planning and control and control["state"] == "in production"):
            found = control["state"] if control else "no cluster"
            raise OperationError(
                f"{host.name}: PostgreSQL does not answer and its cluster is {found!r}, not shut "
                "down cleanly; it was not re-pointed (re-seed it)"
            )
    yield standby_settings(data_directory, wanted, slot)
    yield StringCommand("systemctl start", unit(version, cluster_name))
    yield from _drop_slots(stale_slots)


def standby_settings(data_directory: str, conninfo: str, slot: str) -> StringCommand:
    """primary_conninfo and primary_slot_name in postgresql.auto.conf (where pg_basebackup -R
    writes them) and standby.signal, for a stopped server (a former primary, a seeded copy)."""
    auto = f"{data_directory}/postgresql.auto.conf"
    settings = f"primary_conninfo = {quote_literal(conninfo)}\nprimary_slot_name = {quote_literal(slot)}\n"
    return StringCommand(
        "set -e; tmp=$(mktemp);",
        "grep -v -E '^[[:space:]]*(primary_conninfo|primary_slot_name)[[:space:]]*='",
        QuoteString(auto),
        "> $tmp || true;",
        "printf '%s'",
        QuoteString(settings),
        ">> $tmp;",
        "install -o postgres -g postgres -m 600 $tmp",
        QuoteString(auto),
        "; rm -f $tmp;",
        "runuser -u postgres -- touch",
        QuoteString(f"{data_directory}/standby.signal"),
    )


def _drop_slots(slots: Iterable[str]) -> Generator[StringCommand, None, None]:
    slots = list(slots)
    if not slots:
        return
    held = host.get_fact(PostgresqlReplicationSlots) if state.is_executing else None
    if held is not None:
        slots = [s for s in slots if s in held]
    if not slots:
        return
    names = ", ".join(quote_literal(s) for s in slots)
    yield psql_command(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
        f" WHERE NOT active AND slot_name IN ({names})"
    )


@operation()
def streams_from(primary_address: str, wait: int = 60) -> Generator[StringCommand, None, None]:
    """Fail unless this standby streams from `primary_address` within `wait` seconds."""
    sql = (
        "SELECT pg_is_in_recovery() AND coalesce((SELECT status = 'streaming' AND sender_host = "
        f"{quote_literal(primary_address)} FROM pg_stat_wal_receiver), false)"
    )
    message = f"{host.name} does not stream from {primary_address} after {int(wait)} s"
    yield StringCommand(
        f"for i in $(seq {int(wait)}); do",
        '[ "$(',
        psql_command(sql),
        ')" = t ] && exit 0; sleep 1; done; echo',
        QuoteString(message),
        ">&2; exit 1",
    )
