"""
Operations that move a MariaDB replication group's primary (runbooks/switchover.py): promote the
replica that has applied everything the old primary wrote, and point a server at a new primary.

The replication password travels as in operations/mariadb.py: in files uploaded to a
root-only tmpfs directory, removed after use, never on a command line.
"""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host, logger, state
from pyinfra.api import FileUploadCommand, HiddenValue, OperationError, StringCommand, operation

from facts.mariadb import MariadbReplicaStatus, MariadbVariables
from operations.common import reveal
from operations.mariadb import (
    SECRET_DIR,
    change_master_sql,
    option_value,
    replica_problems,
    run_secret_sql,
    run_sql,
    secret_file,
)


def client_file(address: str, port: int, user: str, password: str) -> str:
    """A [client] option file for the replication account on another server."""
    return (
        f"[client]\nhost = {address}\nport = {int(port)}\nuser = {user}\n"
        f"password = {option_value(password)}\n"
    )


@operation()
def promote(
    old_primary_address: str,
    replication_user: str,
    password: HiddenValue | str,
    port: int = 3306,
    timeout: int = 60,
) -> Generator[StringCommand | FileUploadCommand, None, None]:
    """
    Make this replica the primary once it has applied everything the old primary wrote: read the
    old primary's ``gtid_binlog_pos`` over the replication account (refusing while the old
    primary still takes writes), wait for it (``MASTER_GTID_WAIT``, at most `timeout` seconds),
    then ``STOP SLAVE; RESET SLAVE ALL`` and ``read_only = OFF``.

    + old_primary_address: the old primary's replication address (writes stopped there first)
    + replication_user, password: the replication account (a HiddenValue), as its replicas use it
    + port: the old primary's port
    + timeout: seconds to wait for the last GTID; past it nothing is changed here
    """
    status = host.get_fact(MariadbReplicaStatus)
    if status is None:
        raise OperationError(f"{host.name}: MariaDB does not answer; nothing was promoted")
    if not status:
        live = host.get_fact(MariadbVariables, names=["read_only"]) or {}
        if live.get("read_only") == "OFF":
            host.noop("already the primary: replicates from nobody and takes writes")
            return
        raise OperationError(
            f"{host.name}: replicates from nobody and is read-only: not a replica of "
            f"{old_primary_address}; look at it before promoting it"
        )
    if status.get("Master_Host") != old_primary_address:
        raise OperationError(
            f"{host.name}: replicates from {status.get('Master_Host')}, not from the old primary "
            f"{old_primary_address}; nothing was promoted"
        )
    cnf = f"{SECRET_DIR}/old-primary.cnf"
    yield from secret_file(
        "old-primary.cnf", client_file(old_primary_address, port, replication_user, reveal(password))
    )
    fail = "{ printf '%s\\n' \"$msg\" >&2; exit 1; }"
    yield StringCommand(
        f"out=$(mariadb --defaults-extra-file={cnf} -NB -e "
        "'SELECT @@global.read_only, @@global.gtid_binlog_pos' 2>&1); rc=$?;",
        f"rm -f {cnf};",
        f'msg="cannot read the old primary\'s GTID position ({old_primary_address}): $out";',
        f"[ $rc -eq 0 ] || {fail};",
        'ro=$(printf "%s" "$out" | cut -f1); pos=$(printf "%s" "$out" | cut -f2);',
        f'msg="the old primary {old_primary_address} still takes writes (read_only is off); '
        'stop them there first";',
        f'[ "$ro" = 1 ] || {fail};',
        'msg="unexpected GTID position from the old primary: $pos";',
        f'case "$pos" in *[!0-9,-]*) {fail};; esac;',
        "waited=$(mariadb -NB -e \"SELECT MASTER_GTID_WAIT('$pos', " + str(int(timeout)) + ')");',
        f"msg=\"did not apply the old primary's last transaction ($pos) within {int(timeout)} s "
        '(MASTER_GTID_WAIT: $waited); nothing was promoted";',
        f'[ "$waited" = 0 ] || {fail};',
        'echo "applied the old primary\'s last transaction: $pos"',
        _shell_executable="bash",
    )
    yield run_sql("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF")


@operation()
def follow(
    primary_address: str, replication_user: str, password: HiddenValue | str, port: int = 3306
) -> Generator[StringCommand | FileUploadCommand, None, None]:
    """
    Replicate from a new primary with GTID, from where this server is: a replica keeps its
    ``gtid_slave_pos``; a former primary (it replicates from nobody) starts from its own
    ``gtid_binlog_pos``, which the new primary applied before it was promoted.

    + primary_address: the new primary's replication address
    + replication_user, password: the replication account on it (a HiddenValue)
    + port: its port
    """
    status = host.get_fact(MariadbReplicaStatus)
    if status is None:
        raise OperationError(f"{host.name}: MariaDB does not answer; it was not re-pointed")
    if status.get("Master_Host") == primary_address and status.get("Master_Port") == str(port):
        host.noop(f"replicates from {primary_address}")
        return
    start_from = "" if status else "SET GLOBAL gtid_slave_pos = @@global.gtid_binlog_pos;\n"
    secret = reveal(password)
    yield from run_secret_sql(
        "follow.sql",
        "STOP SLAVE;\n"
        + start_from
        + change_master_sql(primary_address, port, replication_user, secret)
        + "START SLAVE;\n",
    )


@operation()
def take_over(timeout: int = 60) -> Generator[StringCommand, None, None]:
    """
    Make this replica the primary after its primary is gone (a failover): apply every
    transaction it received (its relay log, up to ``Gtid_IO_Pos``; at most `timeout` seconds),
    then ``STOP SLAVE; RESET SLAVE ALL`` and ``read_only = OFF``. The runbook has checked that the
    primary does not answer (an IO thread may show "Yes" until slave_net_timeout after it died).
    """
    status = host.get_fact(MariadbReplicaStatus)
    if status is None:
        raise OperationError(f"{host.name}: MariaDB does not answer; nothing was promoted")
    if not status:
        live = host.get_fact(MariadbVariables, names=["read_only"]) or {}
        if live.get("read_only") == "OFF":
            host.noop("already the primary: replicates from nobody and takes writes")
            return
        raise OperationError(f"{host.name}: replicates from nobody and is read-only; nothing was promoted")
    fail = "{ printf '%s\\n' \"$msg\" >&2; exit 1; }"
    yield StringCommand(
        "pos=$(mariadb -E -e 'SHOW SLAVE STATUS' | sed -n 's/^ *Gtid_IO_Pos: *//p');",
        'msg="unexpected received GTID position: $pos";',
        f'case "$pos" in *[!0-9,-]*) {fail};; esac;',
        "waited=$(mariadb -NB -e \"SELECT MASTER_GTID_WAIT('$pos', " + str(int(timeout)) + ')");',
        f'msg="did not apply what it received ($pos) within {int(timeout)} s '
        '(MASTER_GTID_WAIT: $waited); nothing was promoted";',
        f'[ "$waited" = 0 ] || {fail};',
        'echo "applied everything it received: $pos"',
        _shell_executable="bash",
    )
    yield run_sql("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF")


@operation()
def replicates_from(primary_address: str, port: int = 3306) -> Generator[StringCommand, None, None]:
    """
    Fail unless this server replicates from `primary_address` with GTID, both threads running (an
    IO thread still connecting is a warning): the check after a runbook re-pointed or started
    it. Never seeds and never re-points (``mariadb.replica``, the converge's, seeds a server that
    replicates from nobody). Under --dry the facts were read before the runbook's earlier steps
    re-point the server, so nothing is judged from them: the check is planned, as a no-op.

    + primary_address, port: the primary it must replicate from
    """
    if not state.is_executing:
        host.noop(f"checked, once re-pointed, to replicate from {primary_address}")
        return
    status = host.get_fact(MariadbReplicaStatus)
    if status is None:
        raise OperationError(f"{host.name}: MariaDB does not answer; it does not replicate")
    if not status:
        raise OperationError(f"{host.name}: replicates from nobody, not from {primary_address}")
    errors, warnings = replica_problems(status, primary_address, port)
    for warning in warnings:
        logger.warning(f"{host.print_prefix}{warning}")
    if errors:
        raise OperationError(
            f"{host.name}: does not replicate from {primary_address}:\n  - " + "\n  - ".join(errors)
        )
    host.noop(f"replicates from {primary_address}, {status.get('Seconds_Behind_Master')} s behind")
    return
    yield  # a generator, as every operation
