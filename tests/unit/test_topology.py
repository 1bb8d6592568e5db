"""The inventory against the live replication topology (roles/topology.py): a converge whose
inventory disagrees with what runs stops before any change, naming the host, what it declares and
what runs; a server that does not answer has nothing to fight."""

import pytest

from facts.mariadb import MariadbLiveRole
from facts.postgresql import PostgresqlLiveRole, conninfo_host
from model.hostdata import HostConfig
from roles import engine, topology


def check(fleet, name, fact):
    engine_name = fleet[name]["engine"]
    members = tuple(HostConfig.from_data(n, d) for n, d in fleet.items() if d["engine"] == engine_name)
    me = next(m for m in members if m.name == name)
    return topology.problems(me, engine.Group(me, members), topology.live_role(engine_name, fact))


PRIMARY = {"mariadb": {"read_only": "0"}, "postgresql": {"in_recovery": False, "sender": ""}}


def follower(engine_name, address):
    if engine_name == "mariadb":
        return {"read_only": "1", "Master_Host": address}
    return {"in_recovery": True, "sender": address}


@pytest.mark.parametrize(
    "primary, replica, engine_name",
    [("db1", "db2", "mariadb"), ("pg1", "pg2", "postgresql")],
)
def test_the_declared_topology_is_no_problem(fleet, primary, replica, engine_name):
    assert check(fleet, primary, PRIMARY[engine_name]) == []
    assert check(fleet, replica, follower(engine_name, fleet[primary]["replication_address"])) == []


@pytest.mark.parametrize("name", ["db1", "db2", "pg1", "pg2"])
def test_a_server_that_does_not_answer_has_nothing_to_fight(fleet, name):
    assert check(fleet, name, None) == []


def test_a_fresh_mariadb_replica_not_yet_replicating_is_no_problem(fleet):
    # Installed with the replica's config (read_only) and not seeded yet: the converge seeds it.
    assert check(fleet, "db2", {"read_only": "1"}) == []


@pytest.mark.parametrize("name, replica", [("db1", "db2"), ("pg1", "pg2")])
def test_a_declared_primary_that_now_replicates_is_refused(fleet, name, replica):
    engine_name = fleet[name]["engine"]
    [problem] = check(fleet, name, follower(engine_name, fleet[replica]["replication_address"]))
    kind = "replica" if engine_name == "mariadb" else "standby"
    assert (problem.host, problem.key, problem.value) == (name, "role", "primary")
    assert f"is a {kind} of {replica} ({fleet[replica]['replication_address']})" in problem.message
    assert problem.fix.startswith(f"declare what runs ({name}: role 'replica', primary {replica!r})")
    assert "never re-points or demotes" in problem.fix


@pytest.mark.parametrize("name", ["db2", "pg2"])
def test_a_replica_of_another_host_is_refused(fleet, name):
    [problem] = check(fleet, name, follower(fleet[name]["engine"], "10.99.0.99"))
    assert (problem.host, problem.key, problem.value) == (name, "primary", fleet[name]["primary"])
    assert "replicates from 10.99.0.99 (not in the inventory)" in problem.message


@pytest.mark.parametrize("name", ["db2", "pg2"])
def test_a_declared_replica_that_takes_writes_is_refused(fleet, name):
    [problem] = check(fleet, name, PRIMARY[fleet[name]["engine"]])
    assert (problem.host, problem.key, problem.value) == (name, "role", "replica")
    assert "is a primary: it replicates from nobody and takes writes" in problem.message
    assert problem.fix.startswith(f"declare what runs ({name}: role 'primary')")


def test_problems_name_host_key_and_fix_in_the_report(fleet):
    [problem] = check(fleet, "db1", follower("mariadb", "10.99.0.12"))
    assert str(problem).startswith("db1: role = 'primary': the inventory declares it a primary")


def test_mariadb_live_role_fact_reads_read_only_and_replica_status_at_once():
    fact = MariadbLiveRole()
    command = str(fact.command().get_raw_value())
    assert "SELECT @@global.read_only AS read_only; SHOW SLAVE STATUS" in command and " -E " in command
    out = [
        "__DBZFS_MARIADB__",
        "*************************** 1. row ***************************",
        "read_only: 1",
        "*************************** 1. row ***************************",
        "                Slave_IO_State: Waiting for master to send event",
        "                   Master_Host: 10.99.0.11",
    ]
    assert fact.process(out)["Master_Host"] == "10.99.0.11" and fact.process(out)["read_only"] == "1"
    assert fact.process(["__DBZFS_MARIADB__", "__DBZFS_MARIADB_UNREACHABLE__"]) is None


def test_postgresql_live_role_fact_reads_recovery_and_the_conninfo_host():
    fact = PostgresqlLiveRole()
    assert "SELECT pg_is_in_recovery(), current_setting(" in str(fact.command().get_raw_value())
    conninfo = "host=10.99.0.21 port=5432 user=replicator passfile=/var/lib/postgresql/.pgpass"
    up = "__dbzfs_postgresql_up__"
    assert fact.process([up, f"t|{conninfo}"]) == {"in_recovery": True, "sender": "10.99.0.21"}
    assert fact.process([up, "f|"]) == {"in_recovery": False, "sender": ""}
    assert conninfo_host("user=r host='10.0.0.5' port=5432") == "10.0.0.5"
