"""day2/restore.py (runbooks/restore.py): the moment given, the plan and pgbackrest restore's
options, every problem the inventory and the parameters show (plan_problems) and those the
repository and the hosts show (live_problems), the report; and the restore's operations
(operations/pg_restore.py) against fact stubs."""

import subprocess
from datetime import UTC, datetime, timedelta, timezone

import pytest

from day2 import restore
from facts.postgresql import PostgresqlCluster
from model.hostdata import HostConfig
from operations import pg_restore as ops

from tests.unit.conftest import backup_data
from tests.unit.fact_stubs import FakeHost, run_operation

LOG = "/var/log/postgresql/postgresql-17-main.log"  # Debian 13's cluster log (roles/postgresql.Cluster.log)

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
FULL_STOP = datetime(2026, 12, 5, 6, 10, 12, tzinfo=UTC)
DATA = "/datastore/postgresql/17/main"
WAL = "/datastore/postgresql-wal/17/main"
EVERYONE = {"db1", "db2", "pg1", "pg2", "backup1"}


@pytest.fixture
def configs(fleet):
    hosts = {**fleet, "backup1": backup_data()}
    return {name: HostConfig.from_data(name, data) for name, data in hosts.items()}


def planned(configs, active=EVERYONE, **params):
    return restore.plan_problems(configs, params, set(active), NOW)


def plan_of(configs, **params):
    plan, problems = planned(configs, **params)
    assert problems == [], problems
    return plan


def only(problems):
    assert len(problems) == 1, problems
    return problems[0]


# --- the moment --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2026-12-05 06:10:00+00", datetime(2026, 12, 5, 6, 10, tzinfo=UTC)),
        ("2026-12-05T06:10:00Z", datetime(2026, 12, 5, 6, 10, tzinfo=UTC)),
        ("2026-12-05 06:10:00z", datetime(2026, 12, 5, 6, 10, tzinfo=UTC)),
        ("2026-12-05 08:10:00+02:00", datetime(2026, 12, 5, 6, 10, tzinfo=UTC)),
        ("2026-12-05 01:10:00-05", datetime(2026, 12, 5, 6, 10, tzinfo=UTC)),
        (" 2026-12-05 06:10:00.250+00 ", datetime(2026, 12, 5, 6, 10, 0, 250000, tzinfo=UTC)),
    ],
)
def test_a_moment_is_read_with_its_offset(text, moment):
    assert restore.parse_time(text) == moment


@pytest.mark.parametrize("text", ["2026-12-05 06:10:00", "2026-12-05T06:10", "yesterday", ""])
def test_a_moment_without_an_offset_is_refused(text):
    with pytest.raises(ValueError):
        restore.parse_time(text)


def test_a_moment_is_handed_to_postgresql_in_utc():
    moment = datetime(2026, 12, 5, 8, 10, 0, 5000, tzinfo=timezone(timedelta(hours=2)))
    assert restore.pg_time(moment) == "2026-12-05 06:10:00.005000+00"


# --- the plan and restore's options ------------------------------------------------------------


def test_a_replica_is_restored_as_a_standby_of_the_newest_backup(configs):
    plan = plan_of(configs, host="pg2", mode="replica")
    assert (plan.target.name, plan.repository.name, plan.primary.name) == ("pg2", "backup1", "pg1")
    assert (plan.stanza, plan.data_directory, plan.wal_directory) == ("postgresql", DATA, WAL)
    assert plan.options() == ["--delta", f"--link-map=pg_wal={WAL}", "--type=standby"]
    assert not plan.wipe and plan.time is None and plan.backup is None


def test_a_standalone_copy_recovers_to_a_moment_then_promotes(configs):
    plan = plan_of(configs, host="pg2", mode="standalone", time="2026-12-05 08:10:00+02")
    assert plan.options() == [
        "--delta",
        f"--link-map=pg_wal={WAL}",
        "--archive-mode=off",
        "--target-action=promote",
        "--type=time",
        "--target=2026-12-05 06:10:00.000000+00",
    ]


def test_a_standalone_copy_of_a_named_backup_ends_where_it_ends(configs):
    plan = plan_of(configs, host="pg2", mode="standalone", backup="20261205-061000F", wipe=True)
    assert plan.wipe
    assert plan.options() == [
        "--delta",
        f"--link-map=pg_wal={WAL}",
        "--set=20261205-061000F",
        "--archive-mode=off",
        "--target-action=promote",
        "--type=immediate",
    ]


def test_a_standalone_copy_of_the_newest_backup(configs):
    plan = plan_of(configs, host="pg1", mode="standalone")
    assert plan.options() == [
        "--delta",
        f"--link-map=pg_wal={WAL}",
        "--archive-mode=off",
        "--target-action=promote",
        "--type=immediate",
    ]


# --- plan_problems -------------------------------------------------------------------------------


def problem_parts(p):
    return p.host, p.key, p.value


def test_a_missing_target_is_a_problem(configs):
    plan, problems = planned(configs, mode="replica")
    p = only(problems)
    assert plan is None
    assert problem_parts(p) == (None, "host", None)
    assert p.message == "missing" and p.fix == "run with --data host=HOST"


def test_an_unknown_target_is_a_problem(configs):
    p = only(planned(configs, host="pg9", mode="replica")[1])
    assert problem_parts(p) == (None, "host", "pg9")
    assert "not a host of the inventory" in p.message and "PostgreSQL host" in p.fix


def test_a_mariadb_target_is_not_postgresql_s_to_plan(configs):
    """day2.restore.run hands a MariaDB target to day2/restore_mariadb.py before this."""
    p = only(planned(configs, host="db2", mode="replica")[1])
    assert problem_parts(p) == ("db2", "host", "db2")
    assert p.message == "not a PostgreSQL host (mariadb)" and "MariaDB" in p.fix


def test_the_backup_host_is_no_target(configs):
    p = only(planned(configs, host="backup1", mode="standalone")[1])
    assert problem_parts(p) == ("backup1", "host", "backup1")
    assert p.message == "not a PostgreSQL host (backup)"


@pytest.mark.parametrize("mode", [None, "copy", "REPLICA"])
def test_the_mode_is_replica_or_standalone(configs, mode):
    p = only(planned(configs, host="pg2", mode=mode)[1])
    assert problem_parts(p) == ("pg2", "mode", mode)
    assert p.message == "not a way to restore" and '"replica"' in p.fix and '"standalone"' in p.fix


def test_without_a_backup_host_there_is_no_repository(configs):
    del configs["backup1"]
    plan, problems = planned(configs, active=EVERYONE - {"backup1"}, host="pg2", mode="replica")
    p = only(problems)
    assert plan is None
    assert problem_parts(p) == ("pg2", "inventory", None)
    assert "no backup host" in p.message and 'role = "backup"' in p.fix


def test_a_replica_restore_needs_the_target_declared_a_replica(configs):
    problems = planned(configs, host="pg1", mode="replica")[1]
    found = {p.key: p for p in problems}
    assert sorted(found) == ["host", "role"]
    assert problem_parts(found["role"]) == ("pg1", "role", "primary")
    assert "mode=standalone" in found["role"].fix
    assert found["host"].message == "is the group's declared primary"
    assert "switchover" in found["host"].fix


def test_a_replica_of_another_host_is_no_replica_of_the_group(configs, fleet):
    fleet["pg2"]["primary"] = "pg9"
    configs["pg2"] = HostConfig.from_data("pg2", fleet["pg2"])
    p = only(planned(configs, host="pg2", mode="replica")[1])
    assert problem_parts(p) == ("pg2", "role", "replica")


def test_a_replica_replays_to_the_newest_wal_not_to_a_moment(configs):
    p = only(planned(configs, host="pg2", mode="replica", time="2026-12-05 06:10:00+00")[1])
    assert problem_parts(p) == ("pg2", "time", "2026-12-05 06:10:00+00")
    assert "newest WAL" in p.message and "mode=standalone" in p.fix


def test_a_moment_without_an_offset_is_a_problem(configs):
    p = only(planned(configs, host="pg2", mode="standalone", time="2026-12-05 06:10:00")[1])
    assert problem_parts(p) == ("pg2", "time", "2026-12-05 06:10:00")
    assert p.message == "not a moment (no UTC offset)" and "+00" in p.fix


def test_a_moment_in_the_future_is_a_problem(configs):
    p = only(planned(configs, host="pg2", mode="standalone", time="2026-12-06 12:00:01+00")[1])
    assert problem_parts(p) == ("pg2", "time", "2026-12-06 12:00:01+00")
    assert p.message == "is in the future (now 2026-12-06 12:00:00.000000+00)"
    assert plan_of(configs, host="pg2", mode="standalone", time="2026-12-06 12:00:00+00").time == NOW


def test_a_moment_and_a_backup_together_are_a_problem(configs):
    p = only(
        planned(
            configs, host="pg2", mode="standalone", time="2026-12-05 06:10:00+00", backup="20261205-061000F"
        )[1]
    )
    assert problem_parts(p) == ("pg2", "backup", "20261205-061000F")
    assert "pgBackRest picks the backup" in p.fix


@pytest.mark.parametrize(
    ("left_out", "named"),
    [({"pg2"}, "pg2"), ({"backup1"}, "backup1"), ({"pg1"}, "pg1"), ({"pg1", "backup1"}, "backup1, pg1")],
)
def test_limit_must_include_the_target_the_backup_host_and_the_primary(configs, left_out, named):
    active = EVERYONE - left_out
    p = only(planned(configs, active=active, host="pg2", mode="replica")[1])
    assert problem_parts(p) == ("pg2", "--limit", ",".join(sorted(active)))
    assert p.message == f"leaves out {named}"
    assert p.fix


def test_limit_to_the_three_hosts_needed_is_enough(configs):
    assert plan_of(configs, host="pg2", mode="replica").target.name == "pg2"
    assert planned(configs, active={"pg1", "pg2", "backup1"}, host="pg2", mode="replica")[1] == []


def test_every_plan_problem_is_reported_at_once(configs):
    plan, problems = planned(
        configs,
        active={"pg2"},
        host="pg2",
        mode="replica",
        time="2030-01-01 00:00:00+00",
        backup="x",
        wipe=True,
    )
    assert plan is None
    assert [p.key for p in problems] == ["time", "time", "backup", "--limit"]
    assert all(p.host == "pg2" and p.message and p.fix for p in problems)


# --- live_problems -------------------------------------------------------------------------------

INFO = {
    "status": 0,
    "message": "ok",
    "backups": [
        {
            "label": "20261205-061000F",
            "type": "full",
            "start": FULL_STOP.timestamp() - 12,
            "stop": FULL_STOP.timestamp(),
            "lsn_start": "0/5000028",
            "lsn_stop": "0/5000100",
        },
        {
            "label": "20261205-061000F_20261206-010002I",
            "type": "incr",
            "start": FULL_STOP.timestamp() + 67550,
            "stop": FULL_STOP.timestamp() + 67558,
            "lsn_start": "0/9000028",
            "lsn_stop": "0/9000138",
        },
    ],
    "archive": {"min": "000000010000000000000005", "max": "000000010000000000000009"},
}
EMPTY_DIR = {"installed": True, "active": "inactive", "pg_version": "", "directories": []}
HOLDS_DB = {**EMPTY_DIR, "pg_version": "15", "active": "active"}
STANDBY = {"in_recovery": True, "status": "streaming", "slot_name": "pg2", "sender_host": "10.99.0.21"}
PRIMARY = {"in_recovery": False, "status": "", "slot_name": "", "sender_host": ""}


def live(plan, info=INFO, state=EMPTY_DIR, target_live=None, primary_live=PRIMARY):
    return restore.live_problems(plan, info, state, target_live, primary_live)


def test_a_restore_into_an_empty_directory_from_a_stanza_with_backups_is_fine(configs):
    plan = plan_of(configs, host="pg2", mode="replica")
    assert live(plan) == []
    assert live(plan_of(configs, host="pg2", mode="standalone", time="2026-12-05 07:00:00+00")) == []


@pytest.mark.parametrize(
    "info",
    [None, {"status": 1, "message": "missing stanza path", "backups": [], "archive": {}}],
    ids=["no-pgbackrest", "missing-stanza"],
)
def test_a_stanza_not_in_the_repository_is_a_problem(configs, info):
    p = only(live(plan_of(configs, host="pg2", mode="replica"), info=info))
    assert problem_parts(p) == ("backup1", "stanza postgresql", None)
    assert p.message == "not in the repository" and "backup host" in p.fix


def test_a_stanza_without_backups_is_a_problem(configs):
    info = {"status": 2, "message": "no valid backups", "backups": [], "archive": {}}
    p = only(live(plan_of(configs, host="pg2", mode="replica"), info=info))
    assert problem_parts(p) == ("backup1", "stanza postgresql", "no valid backups")
    assert p.message == "holds no backup" and p.fix.startswith("converge")


def test_an_unknown_backup_label_is_a_problem(configs):
    plan = plan_of(configs, host="pg2", mode="standalone", backup="20261201-010000F")
    p = only(live(plan))
    assert problem_parts(p) == ("backup1", "backup", "20261201-010000F")
    assert p.fix == "one of 20261205-061000F, 20261205-061000F_20261206-010002I"
    assert live(plan_of(configs, host="pg2", mode="standalone", backup="20261205-061000F")) == []


def test_a_moment_before_the_oldest_backup_s_end_is_a_problem(configs):
    plan = plan_of(configs, host="pg2", mode="standalone", time="2026-12-05 06:10:11+00")
    p = only(live(plan))
    assert problem_parts(p) == ("backup1", "time", "2026-12-05 06:10:11.000000+00")
    assert p.message == "is before the end of the oldest backup (2026-12-05 06:10:12.000000+00)"
    assert p.fix
    at_the_end = plan_of(configs, host="pg2", mode="standalone", time="2026-12-05 06:10:12+00")
    assert live(at_the_end) == []


def test_a_target_without_postgresql_is_a_problem(configs):
    state = {**EMPTY_DIR, "installed": False}
    p = only(live(plan_of(configs, host="pg2", mode="replica"), state=state))
    assert problem_parts(p) == ("pg2", "server", None)
    assert p.message == "PostgreSQL is not installed" and p.fix == "converge the host first"


def test_the_declared_primary_running_as_primary_is_never_restored_over(configs):
    plan = plan_of(configs, host="pg1", mode="standalone", wipe=True)
    p = only(live(plan, state=HOLDS_DB, target_live=PRIMARY, primary_live=None))
    assert problem_parts(p) == ("pg1", "server", "primary")
    assert p.message == "is its group's declared primary"
    assert p.fix == "switch over first (runbooks/switchover.py)"


def test_a_promoted_standalone_copy_is_replaced_with_wipe(configs):
    plan = plan_of(configs, host="pg2", mode="replica", wipe=True)
    assert live(plan, state=HOLDS_DB, target_live=PRIMARY, primary_live=PRIMARY) == []


def test_a_promoted_standalone_copy_is_kept_without_wipe(configs):
    plan = plan_of(configs, host="pg2", mode="replica")
    p = only(live(plan, state=HOLDS_DB, target_live=PRIMARY, primary_live=PRIMARY))
    assert problem_parts(p) == ("pg2", "data directory", DATA)
    assert p.message == "holds a PostgreSQL 15 database (running)"
    assert p.fix == "--data wipe=yes to replace it"


def test_a_live_primary_while_the_declared_one_is_a_standby_is_refused(configs):
    """After a failover the target is its group's primary: the inventory is out of date."""
    plan = plan_of(configs, host="pg2", mode="standalone", wipe=True)
    p = only(live(plan, state=HOLDS_DB, target_live=PRIMARY, primary_live=STANDBY))
    assert problem_parts(p) == ("pg2", "server", "primary")
    assert p.message == "is a primary, and pg1 is not"
    assert p.fix == "update the inventory first"


def test_a_live_primary_while_the_declared_one_is_down_is_refused(configs):
    plan = plan_of(configs, host="pg2", mode="standalone", wipe=True)
    p = only(live(plan, state=HOLDS_DB, target_live=PRIMARY, primary_live=None))
    assert problem_parts(p) == ("pg2", "server", "primary")


def test_a_data_directory_holding_a_database_needs_wipe(configs):
    stopped = {**HOLDS_DB, "active": "inactive"}
    plan = plan_of(configs, host="pg2", mode="replica")
    p = only(live(plan, state=stopped, target_live=None))
    assert problem_parts(p) == ("pg2", "data directory", DATA)
    assert p.message == "holds a PostgreSQL 15 database (stopped)"
    standby = only(live(plan, state=HOLDS_DB, target_live=STANDBY))
    assert standby.message == "holds a PostgreSQL 15 database (running)"
    wiped = plan_of(configs, host="pg2", mode="replica", wipe=True)
    assert live(wiped, state=stopped) == [] and live(wiped, state=HOLDS_DB, target_live=STANDBY) == []


def test_every_live_problem_is_reported_at_once(configs):
    plan = plan_of(configs, host="pg2", mode="standalone", backup="nope")
    info = {**INFO}
    problems = live(plan, info=info, state={**HOLDS_DB, "installed": False}, target_live=None)
    assert [(p.host, p.key) for p in problems] == [
        ("backup1", "backup"),
        ("pg2", "server"),
        ("pg2", "data directory"),
    ]


# --- the report ----------------------------------------------------------------------------------


def test_the_report_of_a_standalone_copy_says_how_to_put_it_back(configs):
    plan = plan_of(configs, host="pg2", mode="standalone", time="2026-12-05 06:10:00+00")
    lines = restore.report_lines(
        plan, ["last transaction replayed: 2026-12-05 06:09:59.8+00, ...", ""], timedelta(seconds=42)
    )
    assert lines == [
        "==> restore of pg2 (standalone) from backup1's repository, stanza postgresql: "
        "to 2026-12-05 06:10:00.000000+00",
        "    last transaction replayed: 2026-12-05 06:09:59.8+00, ...",
        "    took 0:00:42",
        "    pg2 runs on its own (promoted, archiving nothing), outside its group; to put it back:",
        "      pyinfra INVENTORY runbooks/restore.py --data host=pg2 --data mode=replica --data wipe=yes",
    ]


def test_the_report_names_the_backup_restored(configs):
    named = restore.report_lines(
        plan_of(configs, host="pg2", mode="standalone", backup="20261205-061000F"), [], "1s"
    )
    assert named[0].endswith("stanza postgresql: backup 20261205-061000F")
    newest = restore.report_lines(plan_of(configs, host="pg2", mode="standalone"), [], "1s")
    assert newest[0].endswith(": backup newest")


def test_the_report_of_a_replica(configs):
    lines = restore.report_lines(plan_of(configs, host="pg2", mode="replica"), ["in recovery: true"], "3s")
    assert lines == [
        "==> restore of pg2 (replica) from backup1's repository, stanza postgresql: "
        "the newest backup, then the archive",
        "    in recovery: true",
        "    took 3s",
    ]


# --- the operations --------------------------------------------------------------------------------


def test_the_restore_runs_pgbackrest_as_postgres_with_the_plan_s_options(configs):
    plan = plan_of(configs, host="pg2", mode="standalone", time="2026-12-05 06:10:00+00")
    commands, _ = run_operation(
        ops.restored, {}, stanza=plan.stanza, options=plan.options(), data_directory=plan.data_directory
    )
    assert commands == [
        "cd / && runuser -u postgres -- pgbackrest --log-level-console=info --stanza=postgresql --delta "
        f"--link-map=pg_wal={WAL} --archive-mode=off --target-action=promote --type=time "
        "'--target=2026-12-05 06:10:00.000000+00' restore",
        f"echo 'restored into {DATA}'",
    ]


def cluster(config):
    return {
        "config": config,
        "pg_version": "15",
        "data_entries": 20,
        "pg_wal": WAL,
        "standby_signal": False,
        "debian_default_dir": False,
    }


def test_a_registered_cluster_is_left_alone():
    commands, host = run_operation(
        ops.registered,
        {PostgresqlCluster: cluster(True)},
        version="15",
        cluster_name="main",
        data_directory=DATA,
    )
    assert commands == [] and host.noops == ["15/main is registered"]
    assert host.fact_calls == [
        (PostgresqlCluster, (), {"version": "15", "cluster": "main", "data_directory": DATA})
    ]


def test_a_restored_directory_is_registered_as_debian_s_cluster():
    commands, host = run_operation(
        ops.registered,
        {PostgresqlCluster: cluster(False)},
        version="15",
        cluster_name="main",
        data_directory=DATA,
    )
    assert commands == [
        f"runuser -u postgres -- touch {DATA}/postgresql.conf {DATA}/pg_hba.conf {DATA}/pg_ident.conf",
        f"pg_createcluster -d {DATA} 15 main",
    ]
    assert host.noops == []


def test_a_replica_is_pointed_at_its_primary_beside_pgbackrest_s_restore_command(postgres_dir):
    """The command run for real on a scratch data directory: pgBackRest's restore_command kept,
    an older primary_conninfo replaced, standby.signal there."""
    auto = postgres_dir / "postgresql.auto.conf"
    auto.write_text(
        "# Do not edit this file manually!\n"
        "primary_conninfo = 'host=10.99.0.9'\n"
        "restore_command = 'pgbackrest --stanza=postgresql archive-get %f \"%p\"'\n"
    )
    conninfo = "host=10.99.0.21 port=5432 user=replicator application_name=pg2"
    (command,), _ = run_operation(
        ops.standby_of, {}, data_directory=str(postgres_dir), conninfo=conninfo, slot="pg2"
    )
    subprocess.run(["bash", "-c", command], check=True, capture_output=True, timeout=30)
    assert auto.read_text() == (
        "# Do not edit this file manually!\n"
        "restore_command = 'pgbackrest --stanza=postgresql archive-get %f \"%p\"'\n"
        f"primary_conninfo = '{conninfo}'\n"
        "primary_slot_name = 'pg2'\n"
    )
    assert (postgres_dir / "standby.signal").is_file()
    assert auto.owner() == "postgres" and (auto.stat().st_mode & 0o777) == 0o600


def test_the_server_is_started():
    commands, _ = run_operation(ops.started, {}, unit="postgresql@17-main.service")
    assert commands == ["systemctl start postgresql@17-main.service"]


def bash_parses(command):
    result = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_standalone_copy_is_waited_for_until_promoted():
    commands, _ = run_operation(
        ops.replayed, {}, promoted=True, unit="postgresql@17-main.service", log=LOG, wait=30
    )
    assert len(commands) == 2
    loop, where = commands
    assert loop.startswith("for i in $(seq 30); do systemctl is-active --quiet postgresql@17-main.service ||")
    assert f"tail -n 4 {LOG}" in loop
    assert "SELECT NOT pg_is_in_recovery()" in loop
    assert f"'{FakeHost.name}: postgresql@17-main.service stopped during recovery; the end of {LOG}:'" in loop
    assert f"'{FakeHost.name}: recovery has not reached its target after 30 s'" in loop
    assert loop.endswith("sleep 1; done")
    assert "pg_last_xact_replay_timestamp()" in where and "pg_is_in_recovery()" in where
    for command in commands:
        bash_parses(command)


def test_a_replica_only_says_where_replay_stands():
    commands, _ = run_operation(ops.replayed, {}, promoted=False, unit="postgresql@17-main.service", log=LOG)
    assert len(commands) == 1
    assert commands[0].startswith(
        "runuser -u postgres -- psql -X -q -A -t -v ON_ERROR_STOP=1 -d postgres -c "
    )
    assert "last transaction replayed: " in commands[0] and "WAL replayed to " in commands[0]
