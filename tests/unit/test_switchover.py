"""The planned switchover (day2/switchover*.py, operations/mariadb_topology.py and
postgresql_topology.py): its pre-checks refuse before any host is changed, the new roles and the
inventory change it prints, and the commands that promote and re-point, against fact stubs."""

import shlex

import pytest
from pyinfra.api import FileUploadCommand, HiddenValue, OperationError
from pyinfra.context import ctx_host

from day2 import switchover, switchover_mariadb, switchover_postgresql
from facts.mariadb import MariadbReplicaStatus, MariadbVariables
from facts.postgresql import PostgresqlControlData, PostgresqlLiveRole, PostgresqlReplicationSlots
from model.hostdata import HostConfig
from operations import mariadb_topology as ops, postgresql_topology as pg_ops
from roles import engine

from tests.unit.fact_stubs import FakeHost

PASSWORD = HiddenValue("s3cr'et")
TO_DB2 = {"primary_address": "10.99.0.12", "replication_user": "r", "password": PASSWORD}
FROM_DB1 = {"old_primary_address": "10.99.0.11", "replication_user": "r", "password": PASSWORD}
HEALTHY = {
    "Master_Host": "10.99.0.11",
    "Master_Port": "3306",
    "Slave_IO_Running": "Yes",
    "Slave_SQL_Running": "Yes",
    "Seconds_Behind_Master": "0",
}


def group_of(fleet, name):
    members = tuple(
        HostConfig.from_data(n, d) for n, d in fleet.items() if d["engine"] == fleet[name]["engine"]
    )
    return engine.Group(next(m for m in members if m.name == name), members)


def run(op, facts, **kwargs):
    host = FakeHost(facts)
    with ctx_host.use(host):
        produced = list(op._inner(**kwargs))
    uploads = {c.dest: c.src.getvalue().decode() for c in produced if isinstance(c, FileUploadCommand)}
    commands = [str(c.get_raw_value()) for c in produced if not isinstance(c, FileUploadCommand)]
    return commands, uploads, host


def test_new_roles_and_the_inventory_change(fleet):
    group = group_of(fleet, "db1")
    after = switchover.new_roles(group, "db2")
    assert (after["db2"].role, after["db2"].primary) == ("primary", None)
    assert (after["db1"].role, after["db1"].primary) == ("replica", "db2")
    assert switchover.inventory_change(group, "db2") == [
        "db1: role 'replica', primary 'db2'",
        "db2: role 'primary' (and no 'primary' key)",
    ]


def test_plan_refuses_a_candidate_that_is_not_a_replica_or_a_partial_limit(fleet):
    group = group_of(fleet, "db1")
    cfg = group.me
    assert switchover.plan_problems(cfg, group, "db2", {"db1", "db2", "pg1", "pg2"}) == []
    [problem] = switchover.plan_problems(cfg, group, "db1", {"db1", "db2"})
    assert (problem.host, problem.key) == ("db1", "role")
    [problem] = switchover.plan_problems(cfg, group, "db2", {"db2"})
    assert problem.key == "--limit" and "leaves out db1" in problem.message
    [problem] = switchover.plan_problems(cfg, group, "pg2", {"db1", "db2"})
    assert problem.key == "new_primary" and "not a host of db1's replication group" in problem.message


def test_plan_takes_both_engines(fleet):
    group = group_of(fleet, "pg1")
    assert switchover.plan_problems(group.me, group, "pg2", {"pg1", "pg2"}) == []


@pytest.mark.parametrize(
    "status, expected",
    [
        (HEALTHY, []),
        (None, ["MariaDB does not answer"]),
        ({**HEALTHY, "Slave_SQL_Running": "No", "Last_SQL_Error": "dup key"}, ["IO Yes, SQL No: dup key"]),
        ({**HEALTHY, "Seconds_Behind_Master": "45"}, ["the new primary is 45 s behind"]),
        ({**HEALTHY, "Master_Host": "10.99.0.99"}, ["replicates from 10.99.0.99, not from the primary"]),
    ],
)
def test_live_prechecks_of_the_new_primary(status, expected):
    problems = switchover_mariadb.candidate_problems("db2", status, 30, "10.99.0.11")
    assert len(problems) == len(expected)
    for problem, text in zip(problems, expected, strict=True):
        assert text in problem.message


def test_promote_waits_for_the_old_primarys_last_gtid_then_takes_writes():
    commands, uploads, _ = run(
        ops.promote,
        {MariadbReplicaStatus: HEALTHY},
        **FROM_DB1,
    )
    [cnf] = uploads.values()
    assert "host = 10.99.0.11" in cnf and 'password = "s3cr\'et"' in cnf
    assert not any("s3cr" in c for c in commands)  # the password stays in the uploaded file
    wait, take = commands[-2], commands[-1]
    assert (
        "SELECT @@global.read_only, @@global.gtid_binlog_pos" in wait
        and "rm -f /run/dbzfs/old-primary.cnf" in wait
    )
    assert "still takes writes" in wait and "MASTER_GTID_WAIT('$pos', 60)" in wait
    assert take == "mariadb -e 'STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF'"


def test_promote_is_a_no_op_on_a_writable_server_that_replicates_from_nobody():
    facts = {MariadbReplicaStatus: {}, MariadbVariables: {"read_only": "OFF"}}
    commands, _, host = run(ops.promote, facts, **FROM_DB1)
    assert commands == [] and host.noops


def test_promote_refuses_a_replica_of_another_host():
    with pytest.raises(OperationError, match="not from the old primary"):
        run(
            ops.promote,
            {MariadbReplicaStatus: {**HEALTHY, "Master_Host": "10.99.0.99"}},
            **FROM_DB1,
        )


def test_a_former_primary_follows_from_its_own_binlog_position():
    commands, uploads, _ = run(
        ops.follow,
        {MariadbReplicaStatus: {}},
        **TO_DB2,
    )
    [sql] = uploads.values()
    assert sql.startswith(
        "STOP SLAVE;\nSET GLOBAL gtid_slave_pos = @@global.gtid_binlog_pos;\nCHANGE MASTER TO"
    )
    assert (
        "MASTER_HOST='10.99.0.12'" in sql
        and "MASTER_USE_GTID=slave_pos" in sql
        and sql.endswith("START SLAVE;\n")
    )
    assert not any("s3cr" in c for c in commands)


def test_a_replica_follows_from_its_own_slave_position_and_is_left_alone_once_there():
    _, uploads, _ = run(
        ops.follow,
        {MariadbReplicaStatus: HEALTHY},
        **TO_DB2,
    )
    [sql] = uploads.values()
    assert "gtid_slave_pos" not in sql
    there = {**HEALTHY, "Master_Host": "10.99.0.12"}
    commands, uploads, host = run(
        ops.follow,
        {MariadbReplicaStatus: there},
        **TO_DB2,
    )
    assert commands == [] and uploads == {} and host.noops


def test_max_lag_argument_defaults_or_is_refused_by_name():
    from pyinfra.api.exceptions import PyinfraError

    assert switchover.parse_max_lag(None) == switchover.DEFAULT_MAX_LAG
    assert switchover.parse_max_lag("5") == 5
    with pytest.raises(PyinfraError, match="max_lag = 'soon': not a whole number of seconds"):
        switchover.parse_max_lag("soon")


# --- PostgreSQL ---------------------------------------------------------------------------------

STREAMING = {"pg2": {"state": "streaming", "replay_lag": 0.2, "client_addr": "10.99.0.22"}}
STANDBY = {"in_recovery": True, "sender": "10.99.0.21"}


@pytest.mark.parametrize(
    "live, standbys, expected",
    [
        (STANDBY, STREAMING, []),
        (None, None, []),  # reported once, as a host that does not answer
        ({"in_recovery": False, "sender": ""}, STREAMING, ["not in recovery, not a standby of 10.99.0.21"]),
        ({"in_recovery": True, "sender": "10.99.0.99"}, STREAMING, ["streams from 10.99.0.99"]),
        (STANDBY, {}, ["does not stream from the primary (no walsender)"]),
        (STANDBY, {"pg2": {**STREAMING["pg2"], "state": "catchup"}}, ["(catchup)"]),
        (STANDBY, {"pg2": {**STREAMING["pg2"], "replay_lag": 45.0}}, ["the new primary is 45.0 s behind"]),
    ],
)
def test_postgresql_live_prechecks_of_the_new_primary(live, standbys, expected):
    problems = switchover_postgresql.candidate_problems("pg2", live, standbys, 30, "10.99.0.21")
    assert len(problems) == len(expected)
    for problem, text in zip(problems, expected, strict=True):
        assert text in problem.message


SHUT_DOWN = {"state": "shut down", "checkpoint": "0/5000028", "timeline": 1}
RUNNING = {"state": "in production", "checkpoint": "0/4000060", "timeline": 1}
DATA = "/datastore/postgresql/15/main"


@pytest.fixture
def executing(monkeypatch):
    """The operations as pyinfra's execution stage runs them (not --dry's planning)."""
    from types import SimpleNamespace

    state = SimpleNamespace(is_executing=True)
    monkeypatch.setattr(pg_ops, "state", state)
    return state


@pytest.fixture
def old_primary(monkeypatch):
    """The old primary as another host of the inventory, its control file stubbed."""
    from types import SimpleNamespace

    old = FakeHost({PostgresqlControlData: SHUT_DOWN})
    monkeypatch.setattr(pg_ops, "inventory", SimpleNamespace(get_host=lambda name: old))
    return old


def test_shut_down_stops_a_running_primary_and_checks_its_control_file(executing):
    commands, _, _ = run(pg_ops.shut_down, {PostgresqlControlData: RUNNING}, **PG_CLUSTER)
    assert commands[0] == "systemctl stop postgresql@15-main.service"
    assert f"pg_controldata -D {DATA}" in commands[1] and "shut down$'" in commands[1]


def test_shut_down_is_a_no_op_once_shut_down_and_refuses_a_standby(executing):
    commands, _, host = run(pg_ops.shut_down, {PostgresqlControlData: SHUT_DOWN}, **PG_CLUSTER)
    assert commands == [] and "0/5000028" in host.noops[0]
    with pytest.raises(OperationError, match="'in archive recovery', not a running primary"):
        run(
            pg_ops.shut_down,
            {PostgresqlControlData: {**RUNNING, "state": "in archive recovery"}},
            **PG_CLUSTER,
        )


PROMOTE = {"old_primary": "pg1", "old_data_directory": DATA, "version": 15}


def test_promote_waits_for_the_shutdown_checkpoint_then_promotes(executing, old_primary):
    commands, _, _ = run(pg_ops.promote, {PostgresqlLiveRole: STANDBY}, **PROMOTE)
    wait, promote, forget = commands
    assert "SELECT pg_last_wal_replay_lsn() > " in wait and "0/5000028" in wait and "seq 60" in wait
    assert "pg_promote(true, 60)" in promote and "exit 1" in promote
    assert "ALTER SYSTEM RESET primary_conninfo" in forget and "pg_reload_conf()" in forget


def test_promote_refuses_while_the_old_primary_is_not_shut_down(executing, old_primary):
    old_primary.facts[PostgresqlControlData] = RUNNING
    with pytest.raises(OperationError, match="pg1 is 'in production', not shut down cleanly"):
        run(pg_ops.promote, {PostgresqlLiveRole: STANDBY}, **PROMOTE)


def test_promote_plans_under_dry_before_the_old_primary_stops(executing, old_primary):
    executing.is_executing = False
    old_primary.facts[PostgresqlControlData] = RUNNING
    commands, _, _ = run(pg_ops.promote, {PostgresqlLiveRole: STANDBY}, **PROMOTE)
    assert "<its shutdown checkpoint>" in commands[0]


def test_promote_is_a_no_op_on_a_primary(executing, old_primary):
    commands, _, host = run(
        pg_ops.promote, {PostgresqlLiveRole: {"in_recovery": False, "sender": ""}}, **PROMOTE
    )
    assert commands == [] and host.noops


PG_CLUSTER = {"version": 15, "cluster_name": "main", "data_directory": DATA}
FOLLOW = {
    **PG_CLUSTER,
    "primary_address": "10.99.0.22",
    "slot": "pg1",
    "application_name": "pg1",
    "passfile": "/var/lib/postgresql/.pgpass",
    "replication_user": "replicator",
    "stale_slots": ["pg1", "pg2"],
}
WANTED = "user=replicator passfile=/var/lib/postgresql/.pgpass host=10.99.0.22 port=5432 application_name=pg1"


def test_follow_turns_a_cleanly_shut_down_primary_into_a_standby_and_drops_its_slots(executing):
    facts = {
        PostgresqlLiveRole: None,
        PostgresqlControlData: SHUT_DOWN,
        PostgresqlReplicationSlots: {"pg2": {"type": "physical", "active": False}},
    }
    commands, _, _ = run(pg_ops.follow, facts, **FOLLOW)
    write, start, drop = commands
    assert f"{DATA}/postgresql.auto.conf" in write and f"{DATA}/standby.signal" in write
    assert f"primary_conninfo = '{WANTED}'\nprimary_slot_name = 'pg1'\n" in shlex.split(write)
    assert start == "systemctl start postgresql@15-main.service"
    [sql] = [token for token in shlex.split(drop) if "pg_drop_replication_slot" in token]
    assert "NOT active AND slot_name IN ('pg2')" in sql


def test_follow_repoints_a_running_standby_with_a_reload(executing):
    facts = {PostgresqlLiveRole: STANDBY, PostgresqlReplicationSlots: {}}
    commands, _, _ = run(pg_ops.follow, facts, **FOLLOW)
    [alter] = commands
    assert "ALTER SYSTEM SET primary_conninfo" in alter and "10.99.0.22" in alter
    assert "pg_reload_conf()" in alter


def test_follow_is_a_no_op_on_a_standby_of_the_new_primary(executing):
    facts = {
        PostgresqlLiveRole: {"in_recovery": True, "sender": "10.99.0.22"},
        PostgresqlReplicationSlots: {},
    }
    commands, _, host = run(pg_ops.follow, facts, **FOLLOW)
    assert commands == [] and host.noops


def test_follow_plans_under_dry_before_the_old_primary_stops(executing):
    """`--dry` (and the roll's --dry) reads the old primary still running: the plan assumes the
    runbook's earlier step shut it down."""
    executing.is_executing = False
    facts = {
        PostgresqlLiveRole: {"in_recovery": False, "sender": ""},
        PostgresqlControlData: RUNNING,
        PostgresqlReplicationSlots: {},
    }
    commands, _, _ = run(pg_ops.follow, facts, **FOLLOW)
    assert f"{DATA}/standby.signal" in commands[0]
    assert commands[1] == "systemctl start postgresql@15-main.service"


@pytest.mark.parametrize(
    "live, control, match",
    [
        ({"in_recovery": False, "sender": ""}, None, "a running primary"),
        (None, RUNNING, "'in production', not shut down cleanly"),
        (None, None, "'no cluster'"),
    ],
)
def test_follow_refuses_what_it_cannot_turn_into_a_standby(executing, live, control, match):
    with pytest.raises(OperationError, match=match):
        run(pg_ops.follow, {PostgresqlLiveRole: live, PostgresqlControlData: control}, **FOLLOW)


def test_controldata_fact_parses_the_state_and_checkpoint():
    output = [
        "pg_control version number:            1300",
        "Database cluster state:               shut down",
        "Latest checkpoint location:           0/5000028",
        "Latest checkpoint's TimeLineID:       2",
    ]
    assert PostgresqlControlData().process(output) == {
        "state": "shut down",
        "checkpoint": "0/5000028",
        "timeline": 2,
    }
    assert PostgresqlControlData().process([]) is None
