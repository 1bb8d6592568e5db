"""The PostgreSQL facts parse what psql and the shell print, and report a stopped server as None."""

import subprocess

from facts.postgresql import (
    DOWN,
    UP,
    PostgresqlCluster,
    PostgresqlConfigAge,
    PostgresqlDatabases,
    PostgresqlFileSettings,
    PostgresqlPendingRestart,
    PostgresqlReplicationSlots,
    PostgresqlRoles,
    PostgresqlWalReceiver,
    SystemdNeedsReload,
)

DATA = "/datastore/postgresql/15/main"
CONF = "/etc/postgresql/15/main/postgresql.conf"


def test_cluster_command_looks_in_the_declared_places():
    command = PostgresqlCluster().command("15", "main", DATA).get_raw_value()
    for path in (
        "/etc/postgresql/15/main/postgresql.conf",
        f"{DATA}/PG_VERSION",
        f"{DATA}/pg_wal",
        f"{DATA}/standby.signal",
        "/var/lib/postgresql/15/main",
    ):
        assert path in command


def test_cluster_present():
    facts = PostgresqlCluster().process(
        [
            "config=yes",
            "pg_version=15",
            "data_entries=23",
            "pg_wal=/datastore/postgresql-wal/15/main",
            "standby_signal=",
            "debian_default_dir=",
        ]
    )
    assert facts == {
        "config": True,
        "pg_version": "15",
        "data_entries": 23,
        "pg_wal": "/datastore/postgresql-wal/15/main",
        "standby_signal": False,
        "debian_default_dir": False,
    }


def test_cluster_absent():
    facts = PostgresqlCluster().process(
        [
            "config=",
            "pg_version=",
            "data_entries=-1",
            "pg_wal=",
            "standby_signal=",
            "debian_default_dir=",
        ]
    )
    assert facts["pg_version"] == "" and facts["data_entries"] == -1 and not facts["config"]


def test_every_sql_fact_is_none_when_the_server_is_down():
    for cls in (
        PostgresqlFileSettings,
        PostgresqlPendingRestart,
        PostgresqlRoles,
        PostgresqlDatabases,
        PostgresqlReplicationSlots,
        PostgresqlWalReceiver,
    ):
        assert cls().process([DOWN]) is None, cls.__name__


def test_sql_facts_ask_once_and_tell_a_server_that_is_down_from_an_error(tmp_path):
    command = PostgresqlRoles().command().get_raw_value()
    assert command.count("runuser") == 1 and "pg_isready" not in command
    # The shell logic around psql, with a stand-in psql that exits as the real one would.
    for rc, expected_rc, expected in ((0, 0, [UP, "row"]), (2, 0, [DOWN]), (3, 3, [])):
        fake = tmp_path / f"psql{rc}"
        fake.write_text(f"#!/bin/sh\necho row\nexit {rc}\n")
        fake.chmod(0o755)
        script = command.replace("[ -x /usr/bin/psql ] && id -u postgres >/dev/null 2>&1", "true")
        script = script.replace("runuser -u postgres -- psql", str(fake))
        result = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        assert (result.returncode, result.stdout.split()) == (expected_rc, expected), (rc, result)


def test_file_settings_split_restart_from_errors():
    facts = PostgresqlFileSettings().process(
        [
            UP,
            f"shared_buffers|postmaster|setting could not be applied|{CONF}|16",
            f'work_mem|user|invalid value for parameter "work_mem": "lots"|{CONF}|18',
        ]
    )
    assert facts["restart"] == ["shared_buffers"]
    assert facts["errors"] == [
        (
            "work_mem",
            'invalid value for parameter "work_mem": "lots"',
            CONF,
            18,
        )
    ]


def test_file_settings_nothing_pending():
    assert PostgresqlFileSettings().process([UP]) == {"restart": [], "errors": []}


def test_pending_restart():
    assert PostgresqlPendingRestart().process([UP, "max_connections", "shared_buffers"]) == [
        "max_connections",
        "shared_buffers",
    ]


def test_roles_never_read_the_verifier_itself():
    command = PostgresqlRoles().command().get_raw_value()
    assert "sha256(convert_to(rolpassword" in command
    facts = PostgresqlRoles().process(
        [
            UP,
            "postgres|t|t|t|||",
            "replicator|t|t|f|4096:VsAmMVPqV+eVYoT3DLp7qA==|" + "ab" * 32 + "|",
            "prometheus|t|f|f|||pg_monitor,pg_read_all_stats",
        ]
    )
    assert facts["replicator"] == {
        "login": True,
        "replication": True,
        "superuser": False,
        "scram": "4096:VsAmMVPqV+eVYoT3DLp7qA==",
        "verifier_sha256": "ab" * 32,
        "member_of": [],
    }
    assert facts["postgres"]["superuser"] and facts["postgres"]["scram"] == ""
    assert facts["prometheus"]["member_of"] == ["pg_monitor", "pg_read_all_stats"]


def test_databases_with_grants():
    facts = PostgresqlDatabases().process(
        [
            UP,
            "app|app|app:CREATE,app:TEMPORARY,app:CONNECT",
            "postgres|postgres|PUBLIC:TEMPORARY,PUBLIC:CONNECT,postgres:CREATE",
        ]
    )
    assert facts["app"] == {"owner": "app", "grants": {"app": {"CREATE", "TEMPORARY", "CONNECT"}}}
    assert facts["postgres"]["grants"]["PUBLIC"] == {"TEMPORARY", "CONNECT"}


def test_replication_slots():
    facts = PostgresqlReplicationSlots().process(
        [
            UP,
            "pg2|physical|t|0/3000148|streaming|10.99.0.22",
            "pg3|physical|f|0/2000000||",
        ]
    )
    assert facts["pg2"] == {
        "type": "physical",
        "active": True,
        "restart_lsn": "0/3000148",
        "state": "streaming",
        "client_addr": "10.99.0.22",
    }
    assert facts["pg3"]["active"] is False and facts["pg3"]["state"] == ""


def test_wal_receiver_streaming():
    assert PostgresqlWalReceiver().process([UP, "t|streaming|pg2|10.99.0.21"]) == {
        "in_recovery": True,
        "status": "streaming",
        "slot_name": "pg2",
        "sender_host": "10.99.0.21",
    }


def test_wal_receiver_waits_for_streaming():
    command = PostgresqlWalReceiver().command(wait=30).get_raw_value()
    assert command.startswith("for i in $(seq 30)") and "streaming" in command
    assert PostgresqlWalReceiver().process([UP, "f|||"])["in_recovery"] is False


def test_an_empty_result_is_not_a_stopped_server():
    # pyinfra hands a fact without output its default (None): the UP line tells them apart.
    assert PostgresqlReplicationSlots().process([UP]) == {}
    assert PostgresqlFileSettings().process([UP]) == {"restart": [], "errors": []}
    assert PostgresqlReplicationSlots().process([]) is None


def test_config_age():
    command = PostgresqlConfigAge().command(["/etc/a.conf"]).get_raw_value()
    assert "extract(epoch FROM pg_conf_load_time())" in command and "date -r /etc/a.conf +%s.%N" in command
    assert PostgresqlConfigAge().process([UP, "1764484017.935", "file 1764484011.2 /etc/a b.conf"]) == {
        "loaded": 1764484017.935,
        "files": {"/etc/a b.conf": 1764484011.2},
    }
    assert PostgresqlConfigAge().process([DOWN, "file 1 /etc/a.conf"]) is None


def test_systemd_needs_reload():
    assert SystemdNeedsReload().process(["yes"]) is True
    assert SystemdNeedsReload().process(["no"]) is False
