"""The planned switchover (roles/switchover.py, roles/operations/mariadb_topology.py): its
pre-checks refuse before any host is changed, the new roles and the inventory change it prints,
and the commands that promote and re-point, against fact stubs."""

import pytest
from pyinfra.api import FileUploadCommand, HiddenValue, OperationError
from pyinfra.context import ctx_host

from roles import engine, switchover
from roles.facts.mariadb import MariadbReplicaStatus, MariadbVariables
from roles.hostdata import HostConfig
from roles.operations import mariadb_topology as ops

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


def test_plan_refuses_postgresql_for_now(fleet):
    group = group_of(fleet, "pg1")
    [problem] = switchover.plan_problems(group.me, group, "pg2", {"pg1", "pg2"})
    assert problem.key == "engine" and "no switchover runbook" in problem.message


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
    problems = switchover.live_problems("db2", status, 30, "10.99.0.11")
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
