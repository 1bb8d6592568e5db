"""PostgreSQL operations against fact stubs: exact commands, nothing when nothing changes, and no
password in any command."""

import hashlib
import logging
from types import SimpleNamespace

import pytest
from pyinfra.api import FileUploadCommand, OperationError
from pyinfra.context import ctx_host

from facts.postgresql import (
    PostgresqlCluster,
    PostgresqlConfigAge,
    PostgresqlDatabases,
    PostgresqlFileSettings,
    PostgresqlPendingRestart,
    PostgresqlReplicationSlots,
    PostgresqlRoles,
    PostgresqlWalReceiver,
)
from operations import postgresql as pg

from tests.unit.fact_stubs import FakeHost, run_operation

DATA = "/datastore/postgresql/15/main"
WAL = "/datastore/postgresql-wal/15/main"
PASSWORD = "s3cret:rep\\pw"


def commands_and_objects(op, facts, *args, **kwargs):
    """Like run_operation, but also the command objects (to read uploaded content)."""
    host = FakeHost(facts)
    with ctx_host.use(host):
        objects = list(op._inner(*args, **kwargs))
    return [str(c) for c in objects], objects, host


def uploaded(objects) -> list[str]:
    out = []
    for c in objects:
        if isinstance(c, FileUploadCommand):
            c.src.seek(0)
            out.append(c.src.read().decode())
    return out


def cluster_fact(**changes):
    facts = {
        "config": True,
        "pg_version": "15",
        "data_entries": 20,
        "pg_wal": WAL,
        "standby_signal": False,
        "debian_default_dir": False,
    }
    facts.update(changes)
    return facts


NO_CLUSTER = cluster_fact(config=False, pg_version="", data_entries=-1, pg_wal="")


# --- cluster ----------------------------------------------------------------------------------


def test_cluster_created_on_the_datasets():
    commands, host = run_operation(pg.cluster, {PostgresqlCluster: NO_CLUSTER}, "15", "main", DATA, WAL)
    assert commands == [
        f"pg_createcluster --locale C.UTF-8 --encoding UTF8 -d {DATA} 15 main"
        f" -- --waldir={WAL} --data-checksums"
    ]


def test_existing_cluster_in_place_is_left_alone():
    commands, host = run_operation(pg.cluster, {PostgresqlCluster: cluster_fact()}, "15", "main", DATA, WAL)
    assert commands == [] and host.noops


@pytest.mark.parametrize(
    "change, message",
    [
        ({"pg_wal": ""}, "move the WAL by hand"),
        ({"pg_version": "13"}, "PostgreSQL 13"),
        ({"pg_version": "", "data_entries": 3}, "not empty"),
    ],
)
def test_cluster_elsewhere_is_refused(change, message):
    with pytest.raises(OperationError, match=message):
        run_operation(pg.cluster, {PostgresqlCluster: cluster_fact(**change)}, "15", "main", DATA, WAL)


# --- reload or restart ------------------------------------------------------------------------


CONF = "/etc/postgresql/15/main/postgresql.conf"
HBA = "/etc/postgresql/15/main/pg_hba.conf"


def age(conf=100.0, hba=100.0, loaded=200.0):
    return {"loaded": loaded, "files": {CONF: conf, HBA: hba}}


def apply(facts):
    return run_operation(pg.apply_config, facts, "15", "main", [CONF, HBA])


def test_reload_when_a_file_is_newer_than_the_last_read():
    commands, host = apply(
        {
            PostgresqlFileSettings: {"restart": [], "errors": []},
            PostgresqlConfigAge: age(hba=300.0),
            PostgresqlPendingRestart: [],
        }
    )
    assert len(commands) == 1
    assert "systemctl reload postgresql@15-main.service" in commands[0]
    assert "pg_conf_load_time()" in commands[0]
    assert host.fact_calls[1][2] == {"paths": [CONF, HBA]}


def test_nothing_when_the_server_has_read_its_files():
    commands, host = apply(
        {PostgresqlFileSettings: {"restart": [], "errors": []}, PostgresqlConfigAge: age()}
    )
    assert commands == [] and "runs with its files" in host.noops[0]


def test_restart_when_a_postmaster_setting_changed():
    commands, host = apply({PostgresqlFileSettings: {"restart": ["shared_buffers"], "errors": []}})
    assert commands == ["systemctl restart postgresql@15-main.service"]


def test_restart_when_pending_after_reload():
    commands, host = apply(
        {
            PostgresqlFileSettings: {"restart": [], "errors": []},
            PostgresqlConfigAge: age(conf=300.0),
            PostgresqlPendingRestart: ["max_connections"],
        }
    )
    assert "systemctl reload" in commands[0]
    assert commands[1:] == ["systemctl restart postgresql@15-main.service"]


def test_stopped_server_is_not_touched():
    commands, host = apply({PostgresqlFileSettings: None})
    assert commands == [] and "not running" in host.noops[0]


def test_rejected_configuration_stops_before_reload():
    with pytest.raises(OperationError, match="work_mem: invalid value"):
        apply(
            {
                PostgresqlFileSettings: {
                    "restart": [],
                    "errors": [("work_mem", "invalid value", "/etc/x.conf", 3)],
                }
            }
        )


# --- roles: passwords only as SCRAM verifiers, through a root-only file -----------------------


def role(password, replication=True, login=True, superuser=False):
    verifier = pg.scram_verifier(password)
    return {
        "login": login,
        "replication": replication,
        "superuser": superuser,
        "scram": verifier.split("$")[1],
        "verifier_sha256": hashlib.sha256(verifier.encode()).hexdigest(),
        "member_of": [],
    }


def test_new_replication_role():
    commands, objects, host = commands_and_objects(
        pg.login_role, {PostgresqlRoles: {}}, "replicator", PASSWORD, replication=True
    )
    assert commands[0] == "install -d -m 0700 -o root -g root /run/dbzfs"
    assert isinstance(objects[1], FileUploadCommand)
    assert objects[1].dest.startswith("/run/dbzfs/")
    assert commands[2].startswith(
        "runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -d postgres < /run/dbzfs/"
    )
    assert "rm -f /run/dbzfs/" in commands[2]
    (sql,) = uploaded(objects)
    assert "SET log_min_error_statement = 'panic';" in sql
    assert 'CREATE ROLE "replicator" WITH LOGIN REPLICATION NOSUPERUSER PASSWORD \'SCRAM-SHA-256$4096:' in sql
    assert PASSWORD not in sql and PASSWORD not in " ".join(commands)


def test_role_with_its_password_is_left_alone():
    commands, host = run_operation(
        pg.login_role,
        {PostgresqlRoles: {"replicator": role(PASSWORD)}},
        "replicator",
        PASSWORD,
        replication=True,
    )
    assert commands == [] and host.noops == ["role replicator exists with its password"]


@pytest.mark.parametrize(
    "live",
    [
        role("another password"),
        role(PASSWORD, replication=False),
        role(PASSWORD, login=False),
        {"login": True, "replication": True, "superuser": False, "scram": "", "verifier_sha256": ""},
    ],
)
def test_role_altered_when_password_or_attributes_differ(live):
    commands, objects, host = commands_and_objects(
        pg.login_role, {PostgresqlRoles: {"replicator": live}}, "replicator", PASSWORD, replication=True
    )
    (sql,) = uploaded(objects)
    assert 'ALTER ROLE "replicator" WITH LOGIN REPLICATION NOSUPERUSER PASSWORD' in sql


def test_application_role_has_no_replication():
    commands, objects, host = commands_and_objects(pg.login_role, {PostgresqlRoles: {}}, "app", "app-pw")
    (sql,) = uploaded(objects)
    assert 'CREATE ROLE "app" WITH LOGIN NOREPLICATION NOSUPERUSER' in sql


@pytest.fixture
def executing(monkeypatch):
    monkeypatch.setattr(pg, "state", SimpleNamespace(is_executing=True))


@pytest.fixture
def dry(monkeypatch):
    monkeypatch.setattr(pg, "state", SimpleNamespace(is_executing=False))


def test_role_needs_a_password_and_a_running_server(executing):
    with pytest.raises(OperationError, match="no password"):
        run_operation(pg.login_role, {PostgresqlRoles: {}}, "app", "")
    with pytest.raises(OperationError, match="PostgreSQL is not running: cannot manage roles"):
        run_operation(pg.login_role, {PostgresqlRoles: None}, "app", "pw")
    with pytest.raises(OperationError, match="cannot manage databases"):
        run_operation(pg.database, {PostgresqlDatabases: None}, "app")
    with pytest.raises(OperationError, match="cannot manage replication slots"):
        run_operation(pg.replication_slot, {PostgresqlReplicationSlots: None}, "pg2")


def test_a_dry_plan_before_the_server_exists_proposes_everything_new(dry):
    """--dry on a first converge: the server is not installed yet, so its roles, databases and
    slots are planned as created (a real run starts the server before these steps)."""
    commands, objects, _ = commands_and_objects(pg.login_role, {PostgresqlRoles: None}, "app", "pw")
    assert 'CREATE ROLE "app" WITH LOGIN NOREPLICATION' in uploaded(objects)[0]
    commands, _ = run_operation(pg.monitoring_role, {PostgresqlRoles: None}, "prometheus")
    assert 'CREATE ROLE "prometheus"' in commands[0]
    commands, _ = run_operation(pg.database, {PostgresqlDatabases: None}, "app", owner="app")
    assert 'CREATE DATABASE "app" OWNER "app";' in commands[0]
    commands, _ = run_operation(pg.replication_slot, {PostgresqlReplicationSlots: None}, "pg2")
    assert "pg_create_physical_replication_slot" in commands[0]


# --- passfile -----------------------------------------------------------------------------


def test_pgpass_escapes_colon_and_backslash():
    assert pg.pgpass_line("a:b\\c", "replicator") == "*:*:replication:replicator:a\\:b\\\\c\n"


# --- databases --------------------------------------------------------------------------------


def test_new_database_only_its_user_connects():
    commands, host = run_operation(
        pg.database, {PostgresqlDatabases: {}}, "app", owner="app", connect=["app"]
    )
    assert commands == [
        "runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -d postgres "
        '-c \'CREATE DATABASE "app" OWNER "app";\' '
        "-c 'REVOKE CONNECT, TEMPORARY ON DATABASE \"app\" FROM PUBLIC;' "
        '-c \'GRANT CONNECT ON DATABASE "app" TO "app";\''
    ]


def test_database_as_declared_changes_nothing():
    live = {"app": {"owner": "app", "grants": {"app": {"CONNECT", "CREATE", "TEMPORARY"}}}}
    commands, host = run_operation(
        pg.database, {PostgresqlDatabases: live}, "app", owner="app", connect=["app"]
    )
    assert commands == [] and host.noops


def test_database_public_connect_revoked_and_owner_fixed():
    live = {
        "app": {"owner": "postgres", "grants": {"PUBLIC": {"CONNECT", "TEMPORARY"}, "postgres": {"CREATE"}}}
    }
    commands, host = run_operation(
        pg.database, {PostgresqlDatabases: live}, "app", owner="app", connect=["app"]
    )
    assert 'ALTER DATABASE "app" OWNER TO "app";' in commands[0]
    assert 'REVOKE CONNECT, TEMPORARY ON DATABASE "app" FROM PUBLIC;' in commands[0]
    assert 'GRANT CONNECT ON DATABASE "app" TO "app";' in commands[0]


# --- slots and standbys -----------------------------------------------------------------------


def test_slot_created_reserving_wal():
    commands, host = run_operation(pg.replication_slot, {PostgresqlReplicationSlots: {}}, "pg2")
    assert commands == [
        "runuser -u postgres -- psql -X -q -A -t -v ON_ERROR_STOP=1 -d postgres "
        "-c 'SELECT pg_create_physical_replication_slot('\"'\"'pg2'\"'\"', true)'"
    ]


def test_existing_slot_left_alone():
    slots = {
        "pg2": {
            "type": "physical",
            "active": True,
            "restart_lsn": "0/1",
            "state": "streaming",
            "client_addr": "10.99.0.22",
        }
    }
    commands, host = run_operation(pg.replication_slot, {PostgresqlReplicationSlots: slots}, "pg2")
    assert commands == [] and host.noops


def test_slot_names_are_valid():
    assert pg.slot_name("pg2") == "pg2"
    assert pg.slot_name("PG-02.db.example.net") == "pg_02_db_example_net"


STANDBY = dict(
    version="15",
    cluster_name="main",
    data_directory=DATA,
    wal_directory=WAL,
    primary_address="10.99.0.21",
    slot="pg2",
    application_name="pg2",
    passfile="/var/lib/postgresql/.pgpass",
)


def test_standby_built_with_basebackup_through_its_slot():
    commands, host = run_operation(pg.standby, {PostgresqlCluster: NO_CLUSTER}, **STANDBY)
    assert commands == [
        "runuser -u postgres -- env PGPASSFILE=/var/lib/postgresql/.pgpass pg_basebackup "
        "-h 10.99.0.21 -p 5432 -U replicator -w -d application_name=pg2 -S pg2 -R -X stream "
        f"-c fast -D {DATA} --waldir={WAL}",
        f"runuser -u postgres -- touch {DATA}/postgresql.conf {DATA}/pg_hba.conf {DATA}/pg_ident.conf",
        f"pg_createcluster -d {DATA} 15 main",
    ]


def test_healthy_standby_is_never_rebuilt():
    commands, host = run_operation(
        pg.standby, {PostgresqlCluster: cluster_fact(standby_signal=True)}, **STANDBY
    )
    assert commands == [] and host.noops


def test_interrupted_build_is_registered_not_rebuilt():
    commands, host = run_operation(
        pg.standby, {PostgresqlCluster: cluster_fact(config=False, standby_signal=True)}, **STANDBY
    )
    assert commands[-1] == f"pg_createcluster -d {DATA} 15 main"
    assert not any("pg_basebackup" in c for c in commands)


def test_promoted_standby_is_reported_not_rebuilt(caplog):
    with caplog.at_level(logging.WARNING):
        commands, host = run_operation(pg.standby, {PostgresqlCluster: cluster_fact()}, **STANDBY)
    assert commands == []
    assert "not a standby" in caplog.text and "never rebuilt" in caplog.text


def test_standby_over_unknown_files_is_refused():
    with pytest.raises(OperationError, match="not empty"):
        run_operation(pg.standby, {PostgresqlCluster: cluster_fact(pg_version="", data_entries=2)}, **STANDBY)


def test_standby_streaming_is_quiet(caplog):
    state = {"in_recovery": True, "status": "streaming", "slot_name": "pg2", "sender_host": "10.99.0.21"}
    with caplog.at_level(logging.WARNING):
        commands, host = run_operation(pg.standby_health, {PostgresqlWalReceiver: state}, "pg1")
    assert commands == [] and caplog.text == ""
    assert host.fact_calls[0][2] == {"wait": 30}


@pytest.mark.parametrize(
    "state, why",
    [
        (None, "does not accept connections"),
        ({"in_recovery": False, "status": "", "slot_name": "", "sender_host": ""}, "not in recovery"),
        ({"in_recovery": True, "status": "", "slot_name": "", "sender_host": ""}, "not running"),
    ],
)
def test_standby_not_streaming_is_reported(caplog, state, why):
    with caplog.at_level(logging.WARNING):
        commands, host = run_operation(pg.standby_health, {PostgresqlWalReceiver: state}, "pg1")
    assert commands == []
    assert f"standby {host.name} is not streaming from pg1" in caplog.text and why in caplog.text


def test_primary_reports_inactive_and_missing_slots(caplog):
    slots = {
        "pg2": {
            "type": "physical",
            "active": False,
            "restart_lsn": "0/5000000",
            "state": "",
            "client_addr": "",
        }
    }
    with caplog.at_level(logging.WARNING):
        commands, host = run_operation(
            pg.replication_health, {PostgresqlReplicationSlots: slots}, ["pg2", "pg3"]
        )
    assert commands == []
    assert "standby pg2 is not streaming" in caplog.text and "inactive" in caplog.text
    assert "standby pg3 is not streaming" in caplog.text and "missing" in caplog.text


def test_primary_quiet_when_every_standby_streams(caplog):
    slots = {
        "pg2": {
            "type": "physical",
            "active": True,
            "restart_lsn": "0/5000000",
            "state": "streaming",
            "client_addr": "10.99.0.22",
        }
    }
    with caplog.at_level(logging.WARNING):
        commands, host = run_operation(pg.replication_health, {PostgresqlReplicationSlots: slots}, ["pg2"])
    assert commands == [] and caplog.text == ""


# --- the exporter's role: no password, pg_monitor only ----------------------------------------


def monitoring_commands(live):
    commands, _, _ = commands_and_objects(pg.monitoring_role, {PostgresqlRoles: live}, "prometheus")
    return [c for c in commands if isinstance(c, str)]


def test_monitoring_role_is_created_without_a_password_and_given_pg_monitor():
    commands = monitoring_commands({})
    assert len(commands) == 2
    assert 'CREATE ROLE "prometheus" WITH LOGIN NOSUPERUSER NOREPLICATION PASSWORD NULL' in commands[0]
    assert 'GRANT "pg_monitor" TO "prometheus"' in commands[1]


def test_monitoring_role_in_place_is_a_noop():
    no_password = {"scram": "", "verifier_sha256": ""}  # what PostgresqlRoles reads for PASSWORD NULL
    live = {"prometheus": {**role("x", replication=False), **no_password, "member_of": ["pg_monitor"]}}
    assert monitoring_commands(live) == []


def test_monitoring_role_with_a_password_or_superuser_is_altered():
    live = {"prometheus": {**role("x", replication=False, superuser=True), "member_of": ["pg_monitor"]}}
    (command,) = monitoring_commands(live)
    assert 'ALTER ROLE "prometheus" WITH LOGIN NOSUPERUSER NOREPLICATION PASSWORD NULL' in command


def test_monitoring_role_refuses_a_stopped_server(executing):
    with pytest.raises(OperationError, match="not running"):
        monitoring_commands(None)


def test_monitoring_role_with_any_password_is_altered():
    # an md5 (or plain) password has no SCRAM parts but still has a stored password
    live = {"prometheus": {**role("x", replication=False), "scram": "", "member_of": ["pg_monitor"]}}
    (command,) = monitoring_commands(live)
    assert 'ALTER ROLE "prometheus" WITH LOGIN NOSUPERUSER NOREPLICATION PASSWORD NULL' in command
