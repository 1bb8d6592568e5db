"""MariaDB operations against fact stubs: accounts, grants, replica seeding and health. The
password must never be in a command, only in uploaded files."""

import logging

import pytest
from pyinfra.api import FileUploadCommand, HiddenValue, OperationError, StringCommand
from pyinfra.context import ctx_host

from facts.mariadb import (
    MariadbGrants,
    MariadbReplicaStatus,
    MariadbSchemas,
    MariadbUsers,
)
from operations import mariadb as ops

from tests.unit.fact_stubs import FakeHost, fixture_lines

PASSWORD = "s3cret-'quote\"-\\back"
HIDDEN = HiddenValue(PASSWORD)
RUNNING = MariadbReplicaStatus().process(fixture_lines("mariadb/slave_status_running.txt"))
BROKEN = MariadbReplicaStatus().process(fixture_lines("mariadb/slave_status_broken.txt"))
SYSTEM = ["information_schema", "mysql", "performance_schema", "sys"]


def run(op, facts, *args, **kwargs):
    """(shell commands, {uploaded path: text}, fake host)"""
    host = FakeHost(facts)
    with ctx_host.use(host):
        produced = list(op._inner(*args, **kwargs))
    commands, uploads = [], {}
    for command in produced:
        if isinstance(command, FileUploadCommand):
            uploads[command.dest] = command.src.getvalue().decode()
        else:
            assert isinstance(command, StringCommand)
            commands.append(str(command.get_raw_value()))
    return commands, uploads, host


def assert_secret_only_in_uploads(commands, uploads):
    for command in commands:
        assert "s3cret" not in command, command
    assert all(path.startswith(ops.SECRET_DIR + "/") for path in uploads)


# --- user -------------------------------------------------------------------------------------


def users(accounts=None):
    return {
        MariadbUsers: {
            ("root", "localhost"): {"plugin": "mysql_native_password", "credential": "invalid"},
            **(accounts or {}),
        }
    }


def test_credential_digest_matches_what_the_server_stores():
    # SHA2(authentication_string, 256) read from a MariaDB 10.11 account IDENTIFIED BY 'pw1'
    assert ops.native_password_hash("x") == "*B69027D44F6E5EDC07F1AEAD1477967B16F28227"
    assert ops.credential_digest("pw1") == (
        "857bc84fe7681c2a2a22d6a5403e1af2b50f8d38d496d29568c1d4c4a7ccc457"
    )


def test_new_user_sql_goes_through_an_upload():
    commands, uploads, _ = run(ops.user, users(), "app", "10.0.0.0/255.0.0.0", HIDDEN)
    assert_secret_only_in_uploads(commands, uploads)
    sql = uploads[f"{ops.SECRET_DIR}/user-app.sql"]
    assert "CREATE USER IF NOT EXISTS 'app'@'10.0.0.0/255.0.0.0' IDENTIFIED BY " in sql
    assert "'s3cret-\\'quote\"-\\\\back'" in sql  # escaped for a SQL literal
    assert commands[0] == f"install -d -m 0700 -o root -g root {ops.SECRET_DIR}"
    # runs through stdin, removes the file whatever happens, shows only the error code
    assert f"mariadb < {ops.SECRET_DIR}/user-app.sql" in commands[-1]
    assert f"rm -f {ops.SECRET_DIR}/user-app.sql" in commands[-1]
    assert "grep -o" in commands[-1]


def test_user_with_the_right_password_is_no_change():
    facts = users(
        {
            ("app", "localhost"): {
                "plugin": "mysql_native_password",
                "credential": ops.credential_digest(PASSWORD),
            }
        }
    )
    commands, uploads, host = run(ops.user, facts, "app", "localhost", HIDDEN)
    assert commands == [] and uploads == {}
    assert host.noops


def test_user_with_another_password_is_altered():
    facts = users(
        {
            ("app", "localhost"): {
                "plugin": "mysql_native_password",
                "credential": ops.credential_digest("old"),
            }
        }
    )
    commands, uploads, _ = run(ops.user, facts, "app", "localhost", HIDDEN)
    assert "ALTER USER 'app'@'localhost' IDENTIFIED BY" in uploads[f"{ops.SECRET_DIR}/user-app.sql"]
    assert_secret_only_in_uploads(commands, uploads)


def test_user_on_an_unreachable_server_is_planned():
    commands, uploads, _ = run(ops.user, {MariadbUsers: None}, "app", "localhost", HIDDEN)
    assert uploads


def test_hidden_password_never_shows_in_a_repr():
    assert "s3cret" not in repr(HIDDEN) and "s3cret" not in str(HIDDEN)


# --- grants -----------------------------------------------------------------------------------


def grants_fact(levels):
    return {MariadbGrants: lambda user, user_host: levels}


def test_grants_added():
    commands, _, _ = run(ops.grants, grants_fact({}), "app", "localhost", "select, insert", "app")
    assert commands == [
        "mariadb -e 'GRANT INSERT, SELECT ON `app`.* TO '\"'\"'app'\"'\"'@'\"'\"'localhost'\"'\"''"
    ]


def test_grants_extra_revoked_for_least_privilege():
    commands, _, _ = run(
        ops.grants, grants_fact({"app": {"SELECT", "DROP"}}), "app", "localhost", "SELECT", "app"
    )
    assert len(commands) == 1 and "REVOKE DROP ON `app`.*" in commands[0]


def test_grants_as_declared_is_no_change():
    commands, _, host = run(
        ops.grants,
        grants_fact({"*": set(ops.REPLICATION_PRIVILEGES)}),
        "replicator",
        "10.99.0.12",
        ops.REPLICATION_PRIVILEGES,
    )
    assert commands == [] and host.noops


def test_grants_all_matches_the_expanded_list():
    commands, _, _ = run(
        ops.grants, grants_fact({"app": set(ops.DATABASE_ALL)}), "app", "localhost", "ALL", "app"
    )
    assert commands == []


def test_other_levels_are_left_alone():
    commands, _, _ = run(ops.grants, grants_fact({"other": {"SELECT"}}), "app", "localhost", "SELECT", "app")
    assert commands == ["mariadb -e 'GRANT SELECT ON `app`.* TO '\"'\"'app'\"'\"'@'\"'\"'localhost'\"'\"''"]


# --- insecure accounts ------------------------------------------------------------------------


def test_anonymous_and_remote_root_dropped():
    facts = users({("", "localhost"): {}, ("root", "%"): {}, ("root", "127.0.0.1"): {}})
    commands, _, _ = run(ops.no_insecure_accounts, facts)
    assert len(commands) == 3
    assert all(c.startswith("mariadb -e 'DROP USER ") for c in commands)
    assert not any("'\"'\"'root'\"'\"'@'\"'\"'localhost" in c for c in commands)


def test_secure_accounts_no_change():
    commands, _, host = run(ops.no_insecure_accounts, users())
    assert commands == [] and host.noops


def test_accounts_of_hosts_outside_the_group_dropped():
    facts = users({("replicator", "10.0.0.1"): {}, ("replicator", "10.0.0.3"): {}, ("app", "10.0.0.3"): {}})
    commands, _, _ = run(ops.only_from, facts, "replicator", ["10.0.0.1", "10.0.0.2"])
    assert commands == ["mariadb -e 'DROP USER '\"'\"'replicator'\"'\"'@'\"'\"'10.0.0.3'\"'\"''"]


def test_no_account_outside_the_group_no_change():
    facts = users({("replicator", "10.0.0.1"): {}, ("app", "10.0.0.3"): {}})
    commands, _, host = run(ops.only_from, facts, "replicator", ["10.0.0.1", "10.0.0.2"])
    assert commands == [] and host.noops


def test_no_hosts_drops_every_account_of_that_name():
    facts = users({("replicator", "10.0.0.1"): {}})
    commands, _, _ = run(ops.only_from, facts, "replicator", [])
    assert len(commands) == 1 and "10.0.0.1" in commands[0]


# --- replica ----------------------------------------------------------------------------------


def replica_facts(status, schemas=SYSTEM):
    return {MariadbReplicaStatus: status, MariadbSchemas: schemas}


def seed(status=None, schemas=SYSTEM):
    return run(
        ops.replica,
        replica_facts({} if status is None else status, schemas),
        "10.99.0.11",
        "replicator",
        HIDDEN,
    )


def test_fresh_replica_is_seeded_with_a_consistent_gtid_dump():
    commands, uploads, _ = seed()
    assert_secret_only_in_uploads(commands, uploads)
    cnf = uploads[f"{ops.SECRET_DIR}/seed.cnf"]
    assert "host = 10.99.0.11\n" in cnf and "user = replicator\n" in cnf
    assert 'password = "s3cret-\'quote\\"-\\\\back"\n' in cnf
    change = uploads[f"{ops.SECRET_DIR}/change-master.sql"]
    assert "MASTER_HOST='10.99.0.11'" in change and "MASTER_USE_GTID=slave_pos" in change
    assert f"MASTER_CONNECT_RETRY={ops.CONNECT_RETRY_SECONDS}," in change
    assert "MASTER_PASSWORD='s3cret-\\'quote" in change and change.endswith("START SLAVE;\n")
    assert "mariadb -e 'STOP SLAVE; RESET MASTER'" in commands
    dump = commands[-1]
    for flag in (
        "--single-transaction",
        "--master-data=1",
        "--gtid",
        "--all-databases",
        "--ignore-table=mysql.gtid_slave_pos",
        f"--defaults-extra-file={ops.SECRET_DIR}/seed.cnf",
    ):
        assert flag in dump
    assert "SET SESSION sql_log_bin=0;" in dump  # the load must not enter the replica's binlog
    assert dump.startswith("set -o pipefail;")
    assert f"rm -f {ops.SECRET_DIR}/seed.cnf {ops.SECRET_DIR}/change-master.sql" in dump


def test_seed_command_runs_under_bash():
    host = FakeHost(replica_facts({}))
    with ctx_host.use(host):
        produced = list(ops.replica._inner("10.99.0.11", "replicator", HIDDEN))
    assert produced[-1].connector_arguments == {"_shell_executable": "bash"}


def test_healthy_replica_is_no_change():
    commands, uploads, host = seed(RUNNING)
    assert commands == [] and uploads == {}
    assert "0 s behind" in host.noops[0]


def test_healthy_replica_with_another_connect_retry_gets_only_the_retry():
    commands, uploads, _ = seed({**RUNNING, "Connect_Retry": "60"})
    assert not uploads
    retry = ops.CONNECT_RETRY_SECONDS
    sql = f"STOP SLAVE; CHANGE MASTER TO MASTER_CONNECT_RETRY={retry}; START SLAVE"
    assert commands == [f"mariadb -e '{sql}'"]


def test_broken_replica_is_reported_not_reseeded():
    with pytest.raises(OperationError) as raised:
        seed(BROKEN)
    text = str(raised.value)
    assert "db1.example.net" in text and "broken" in text
    assert "Duplicate entry '4'" in text and "1062" in text
    assert "never re-seeded" in text


def test_stopped_replica_is_reported():
    stopped = dict(RUNNING, Slave_IO_Running="No", Slave_SQL_Running="No")
    with pytest.raises(OperationError) as raised:
        seed(stopped)
    assert "stopped by hand?" in str(raised.value)


def test_replica_of_another_primary_is_reported():
    with pytest.raises(OperationError) as raised:
        seed(dict(RUNNING, Master_Host="10.99.0.99"))
    assert "10.99.0.99" in str(raised.value)
    assert "declared primary is 10.99.0.11" in str(raised.value)


def test_connecting_io_thread_is_a_warning(caplog):
    connecting = dict(RUNNING, Slave_IO_Running="Connecting", Last_IO_Error="error reconnecting to master")
    with caplog.at_level(logging.WARNING):
        commands, _, host = seed(connecting)
    assert commands == []
    assert "Connecting" in caplog.text and "error reconnecting" in caplog.text


def test_replica_with_databases_of_its_own_is_not_seeded_over():
    with pytest.raises(OperationError) as raised:
        seed({}, SYSTEM + ["shop"])
    assert "shop" in str(raised.value) and "refusing to seed" in str(raised.value)


def test_unreachable_replica_is_planned_as_a_seed():
    commands, uploads, _ = run(ops.replica, replica_facts(None, None), "10.99.0.11", "replicator", HIDDEN)
    assert f"{ops.SECRET_DIR}/seed.cnf" in uploads


def test_privilege_names_normalised():
    assert ops.normalise_privileges("select, Insert ,REPLICATION  CLIENT") == {
        "SELECT",
        "INSERT",
        "BINLOG MONITOR",
    }
    assert ops.normalise_privileges("ALL PRIVILEGES") == ops.DATABASE_ALL


# --- socket_user: the exporter's account, no password --------------------------------------------


def test_socket_user_created_identified_via_unix_socket():
    commands, uploads, _ = run(ops.socket_user, users(), "prometheus", "localhost")
    assert uploads == {}
    assert len(commands) == 1
    assert commands[0] == str(
        ops.run_sql(
            "CREATE USER IF NOT EXISTS 'prometheus'@'localhost' IDENTIFIED VIA unix_socket"
        ).get_raw_value()
    )


def test_socket_user_in_place_is_no_change():
    live = users({("prometheus", "localhost"): {"plugin": "unix_socket", "credential": "empty"}})
    commands, _, host = run(ops.socket_user, live, "prometheus", "localhost")
    assert commands == [] and host.noops


def test_socket_user_with_a_password_is_switched_to_unix_socket():
    live = users({("prometheus", "localhost"): {"plugin": "mysql_native_password", "credential": "ab"}})
    commands, _, _ = run(ops.socket_user, live, "prometheus", "localhost")
    assert commands[-1] == str(
        ops.run_sql("ALTER USER 'prometheus'@'localhost' IDENTIFIED VIA unix_socket").get_raw_value()
    )


# --- read_only follows the role, live -----------------------------------------------------------


@pytest.mark.parametrize("on, live, expected", [(True, "OFF", "ON"), (False, "ON", "OFF")])
def test_read_only_set_live_without_a_restart(on, live, expected):
    from facts.mariadb import MariadbVariables

    commands, _, _ = run(ops.read_only, {MariadbVariables: {"read_only": live}}, on=on)
    assert commands == [f"mariadb -e 'SET GLOBAL read_only = {expected}'"]
    commands, _, host = run(ops.read_only, {MariadbVariables: {"read_only": expected}}, on=on)
    assert commands == [] and host.noops == [f"read_only is {expected}"]


def test_read_only_planned_before_the_server_exists():
    from facts.mariadb import MariadbVariables

    commands, _, _ = run(ops.read_only, {MariadbVariables: None}, on=True)
    assert commands == ["mariadb -e 'SET GLOBAL read_only = ON'"]
