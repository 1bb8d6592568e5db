"""The failover (day2/failover.py, take_over in operations/*_topology.py): which replica is
promoted, what refuses before any host is changed, and the commands that promote, against fact
stubs."""

from pyinfra.context import ctx_host

from day2 import failover
from facts.mariadb import MariadbReplicaStatus, MariadbVariables
from facts.postgresql import PostgresqlWalReceiver
from model.hostdata import HostConfig
from operations import mariadb_topology, postgresql_topology
from roles import engine

from tests.unit.fact_stubs import FakeHost


def group_of(fleet, name):
    members = tuple(
        HostConfig.from_data(n, d) for n, d in fleet.items() if d["engine"] == fleet[name]["engine"]
    )
    return engine.Group(next(m for m in members if m.name == name), members)


def run(op, facts, **kwargs):
    host = FakeHost(facts)
    with ctx_host.use(host):
        commands = [str(c.get_raw_value()) for c in op._inner(**kwargs)]
    return commands, host


def test_gtid_positions_are_compared_domain_by_domain():
    a = failover.gtid_position("0-1-100,1-2-7")
    assert a == {0: 100, 1: 7}
    assert failover.gtid_at_least(a, failover.gtid_position("0-1-99"))
    assert not failover.gtid_at_least(a, failover.gtid_position("0-1-99,1-2-8"))
    assert failover.gtid_at_least(a, {})


def test_lsns_order_as_numbers():
    assert failover.lsn("1/0") > failover.lsn("0/FFFFFFFF") > failover.lsn("0/5000148") > failover.lsn("")


def test_the_most_advanced_replica_is_promoted_first_in_inventory_order_on_a_tie():
    ge = lambda a, b: a >= b  # noqa: E731
    assert failover.most_advanced({"r1": 5, "r2": 9, "r3": 9}, ge, None) == ("r2", [])
    assert failover.most_advanced({"r1": 9, "r2": 9}, ge, None) == ("r1", [])
    assert failover.most_advanced({"r1": 9, "r2": 9}, ge, "r2") == ("r2", [])


def test_a_named_replica_that_is_behind_is_refused():
    name, [problem] = failover.most_advanced({"r1": 5, "r2": 9}, lambda a, b: a >= b, "r1")
    assert name is None and problem.key == "new_primary" and "behind r2" in problem.message


def test_gtid_positions_that_cannot_be_ordered_refuse():
    positions = {"r1": {0: 10, 1: 3}, "r2": {0: 9, 1: 4}}
    name, [problem] = failover.most_advanced(positions, failover.gtid_at_least, None)
    assert name is None and "no replica holds everything" in problem.message


def test_plan_refuses_a_failed_host_that_is_not_the_primary_or_a_partial_limit(fleet):
    group = group_of(fleet, "db2")
    assert failover.plan_problems(group, "db1", None, {"db2"}) == []
    [problem] = failover.plan_problems(group, "db2", None, {"db2"})
    assert problem.key == "failed" and "not the primary" in problem.message
    [problem] = failover.plan_problems(group, None, None, {"db2"})
    assert problem.key == "failed" and problem.message == "missing"
    [problem] = failover.plan_problems(group, "db1", None, set())
    assert problem.key == "--limit" and "leaves out db2" in problem.message
    [problem] = failover.plan_problems(group, "db1", "db1", {"db2"})
    assert problem.key == "new_primary"


RECEIVING = {"Master_Host": "10.99.0.11", "Slave_IO_Running": "Yes", "Slave_SQL_Running": "Yes"}


def test_mariadb_take_over_applies_what_it_received_then_takes_writes():
    status = {**RECEIVING, "Slave_IO_Running": "Connecting", "Gtid_IO_Pos": "0-1-42"}
    wait, take = run(mariadb_topology.take_over, {MariadbReplicaStatus: status})[0]
    assert "Gtid_IO_Pos" in wait and "MASTER_GTID_WAIT('$pos', 60)" in wait
    assert take == "mariadb -e 'STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF'"


def test_mariadb_take_over_is_a_no_op_on_the_primary():
    facts = {MariadbReplicaStatus: {}, MariadbVariables: {"read_only": "OFF"}}
    commands, host = run(mariadb_topology.take_over, facts)
    assert commands == [] and host.noops


def test_postgresql_take_over_replays_what_it_received_then_promotes():
    facts = {PostgresqlWalReceiver: {"in_recovery": True, "status": "", "slot_name": "", "sender_host": ""}}
    wait, promote, forget = run(postgresql_topology.take_over, facts)[0]
    assert "pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()" in wait
    assert "pg_promote(true, 60)" in promote and "RESET primary_conninfo" in forget


def test_port_probe_fact_asks_bash_for_a_tcp_connection():
    from facts.network import PortAnswers

    command = str(PortAnswers().command(address="10.99.0.11", port=3306).get_raw_value())
    assert command.startswith("timeout 3 bash -c") and "/dev/tcp/10.99.0.11/3306" in command
    assert PortAnswers().process(["open"]) is True and PortAnswers().process(["closed"]) is False
