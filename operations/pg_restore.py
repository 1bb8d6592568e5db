"""Operations of the restore runbook (day2/restore.py), on the PostgreSQL host restored."""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from facts.postgresql import PostgresqlCluster
from operations.postgresql import psql_command
from operations.postgresql_topology import standby_settings
from operations.seeding import server_stopped

__all__ = ["registered", "replayed", "restored", "server_stopped", "standby_of", "started"]

REPLAY_WAIT = 1800  # seconds a restored server may take to reach its target under emulation


@operation(is_idempotent=False)
def restored(stanza: str, options: list[str], data_directory: str) -> Generator[StringCommand, None, None]:
    """
    ``pgbackrest restore`` from the repository into the (stopped) server's data directory:
    ``--delta`` keeps the files that match and removes what the backup does not hold.

    + stanza: the replication group's stanza
    + options: restore's options (day2.restore.Plan.options)
    + data_directory: pg1-path of this host's pgbackrest.conf, named again for the message
    """
    yield StringCommand(
        "cd / && runuser -u postgres -- pgbackrest --log-level-console=info",
        QuoteString(f"--stanza={stanza}"),
        *[QuoteString(o) for o in options],
        "restore",
    )
    yield StringCommand("echo", QuoteString(f"restored into {data_directory}"))


@operation()
def registered(version: str, cluster_name: str, data_directory: str) -> Generator[StringCommand, None, None]:
    """
    The restored data directory registered as Debian's cluster VERSION/CLUSTER, as roles/postgresql
    does for a standby it builds (a host whose cluster was never created); nothing when it is.
    """
    facts = host.get_fact(
        PostgresqlCluster, version=version, cluster=cluster_name, data_directory=data_directory
    )
    if facts["config"]:
        host.noop(f"{version}/{cluster_name} is registered")
        return
    yield StringCommand(
        "runuser -u postgres -- touch",
        *[QuoteString(f"{data_directory}/{f}") for f in ("postgresql.conf", "pg_hba.conf", "pg_ident.conf")],
    )
    yield StringCommand(
        "pg_createcluster -d", QuoteString(data_directory), str(version), QuoteString(cluster_name)
    )


@operation(is_idempotent=False)
def standby_of(data_directory: str, conninfo: str, slot: str) -> Generator[StringCommand, None, None]:
    """primary_conninfo and the slot beside the restore_command pgBackRest wrote (standby.signal
    is there already)."""
    yield standby_settings(data_directory, conninfo, slot)


@operation(is_idempotent=False)
def started(unit: str) -> Generator[StringCommand, None, None]:
    yield StringCommand("systemctl start", QuoteString(unit))


@operation(is_idempotent=False)
def replayed(
    promoted: bool, unit: str, log: str, wait: int = REPLAY_WAIT
) -> Generator[StringCommand, None, None]:
    """
    With ``promoted``: wait until recovery has reached its target and the server has promoted
    (one that stops on the way, e.g. for a target after the last commit archived, fails it with
    the end of its `log`). Then print where replay stands: the last transaction replayed and its
    time.
    """
    where = (
        "SELECT 'last transaction replayed: ' || coalesce(pg_last_xact_replay_timestamp()::text, 'none')"
        " || ', WAL replayed to ' || coalesce(pg_last_wal_replay_lsn()::text, 'none')"
        " || ', in recovery: ' || pg_is_in_recovery()"
    )
    if promoted:
        sql = "SELECT NOT pg_is_in_recovery()"
        yield StringCommand(
            f"for i in $(seq {int(wait)}); do",
            "systemctl is-active --quiet",
            QuoteString(unit),
            "|| { echo",
            QuoteString(f"{host.name}: {unit} stopped during recovery; the end of {log}:"),
            ">&2; tail -n 4",
            QuoteString(log),
            ">&2; exit 1; };",
            '[ "$(',
            psql_command(sql),
            '2>/dev/null)" = t ] && break;',
            f"[ $i = {int(wait)} ] &&",
            "{ echo",
            QuoteString(f"{host.name}: recovery has not reached its target after {int(wait)} s"),
            ">&2; exit 1; };",
            "sleep 1; done",
        )
    yield psql_command(where)
