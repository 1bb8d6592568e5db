"""MariaDB facts parse what a real 10.11 server prints (fixtures captured from one), and tell an
unreachable server (None) from an empty answer."""

from facts.mariadb import (
    START,
    UNREACHABLE,
    MariadbGrants,
    MariadbReplicaStatus,
    MariadbSchemas,
    MariadbUsers,
    MariadbVariables,
    sql_string,
)

from tests.unit.fact_stubs import fixture_lines

DOWN = [START, UNREACHABLE]


def test_commands_never_fail_and_read_as_root_through_the_socket():
    for fact, kwargs in (
        (MariadbVariables(), {}),
        (MariadbReplicaStatus(), {}),
        (MariadbUsers(), {}),
        (MariadbSchemas(), {}),
        (MariadbGrants(), {"user": "app", "user_host": "localhost"}),
    ):
        command = str(fact.command(**kwargs).get_raw_value())
        assert command.startswith(f"echo {START} ; mariadb ")
        assert command.endswith(f"|| echo {UNREACHABLE}")
        assert " -u" not in command and " -p" not in command  # no credentials, ever


def test_unreachable_server_is_none():
    for fact in (
        MariadbVariables(),
        MariadbReplicaStatus(),
        MariadbUsers(),
        MariadbSchemas(),
        MariadbGrants(),
    ):
        assert fact.process(DOWN) is None
        assert fact.default() is None


def test_variables():
    out = [START, "innodb_doublewrite\tOFF", "read_only\tON", "init_connect\t"]
    assert MariadbVariables().process(out) == {
        "innodb_doublewrite": "OFF",
        "read_only": "ON",
        "init_connect": "",
    }
    command = str(MariadbVariables().command(names=["read_only"]).get_raw_value())
    assert "WHERE Variable_name IN (" in command and "read_only" in command


def test_replica_status_running():
    status = MariadbReplicaStatus().process(fixture_lines("mariadb/slave_status_running.txt"))
    assert status["Master_Host"] == "10.99.0.11"
    assert status["Slave_IO_Running"] == status["Slave_SQL_Running"] == "Yes"
    assert status["Using_Gtid"] == "Slave_Pos"
    assert status["Seconds_Behind_Master"] == "0"
    assert status["Last_SQL_Error"] == ""
    assert status["Gtid_IO_Pos"] == "0-1-8"


def test_replica_status_keeps_colons_in_errors():
    status = MariadbReplicaStatus().process(fixture_lines("mariadb/slave_status_broken.txt"))
    assert status["Slave_SQL_Running"] == "No"
    assert status["Last_SQL_Errno"] == "1062"
    assert status["Last_SQL_Error"].startswith("Could not execute Write_rows_v1 event")
    assert "Duplicate entry '4'" in status["Last_SQL_Error"]


def test_no_replication_is_an_empty_dict():
    assert MariadbReplicaStatus().process([START]) == {}


def test_users_carry_a_digest_never_the_hash():
    users = MariadbUsers().process(fixture_lines("mariadb/users.txt"))
    assert users[("root", "localhost")] == {"plugin": "mysql_native_password", "credential": "invalid"}
    assert users[("replicator", "10.99.0.12")]["credential"].startswith("857bc84f")
    command = str(MariadbUsers().command().get_raw_value())
    assert "SHA2(authentication_string, 256)" in command


def test_grants_by_level():
    grants = MariadbGrants().process(fixture_lines("mariadb/grants_replicator.txt"))
    assert grants == {
        "*": {
            "SELECT",
            "RELOAD",
            "LOCK TABLES",
            "REPLICATION SLAVE",
            "BINLOG MONITOR",
            "SHOW VIEW",
            "EVENT",
            "TRIGGER",
        }
    }
    app = MariadbGrants().process(fixture_lines("mariadb/grants_app.txt"))
    assert app == {"app": {"SELECT", "INSERT"}}  # USAGE is no privilege
    assert MariadbGrants().process([START, "*\tSELECT\tYES"]) == {"*": {"SELECT", "GRANT OPTION"}}


def test_grantee_is_quoted_for_sql():
    command = str(MariadbGrants().command(user="app", user_host="10.99.0.0/255.255.255.0").get_raw_value())
    assert "GRANTEE = " in command and "10.99.0.0/255.255.255.0" in command


def test_schemas():
    assert MariadbSchemas().process([START, "mysql", "app", "information_schema"]) == [
        "app",
        "information_schema",
        "mysql",
    ]


def test_sql_string_escapes():
    assert sql_string("it's") == "'it\\'s'"
    assert sql_string("a\\b") == "'a\\\\b'"
