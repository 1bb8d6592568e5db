"""`./dbzfs status` (day2/status.py): what the fleet is doing, from stub readings of the facts it
reads (the pure report and its text and JSON), and its command line: --help reads nothing, a bad
inventory is refused with 2 before any connection, an unreachable host is a row and exit 1."""

import json
import os
import subprocess
import sys

import pytest

from day2 import status
from model.hostdata import HostConfig

from tests.unit.conftest import REPO, backup_data

NOW = 1796450403  # 2026-12-05 06:00:03 UTC
MARIADB = ["datastore/mysql", "datastore/mysql-log"]
POSTGRESQL = ["datastore/postgresql", "datastore/postgresql-wal"]
Reading = status.Reading


def pool(health="ONLINE", capacity=4):
    return {"health": {"value": health, "source": "-"}, "capacity": {"value": str(capacity), "source": "-"}}


def snaps(datasets, *ages, pool_name="dbpool"):
    """One snapshot of every dataset per age (seconds before NOW), as ZfsSnapshotPositions has them."""
    return [
        {"name": f"{pool_name}/{d}@autosnap_{age}", "creation": NOW - age, "gtid": None}
        for age in sorted(ages, reverse=True)
        for d in datasets
    ]


def mariadb_replica(io="Yes", sql="Yes", behind="0", source="10.99.0.11", error=""):
    return {
        "read_only": "1",
        "Master_Host": source,
        "Slave_IO_Running": io,
        "Slave_SQL_Running": sql,
        "Seconds_Behind_Master": behind,
        "Last_IO_Error": error,
        "Last_SQL_Error": "",
    }


def pg_standby(status_="streaming", received="0/5000148", replayed="0/5000148"):
    return {"in_recovery": True, "received": received, "replayed": replayed, "status": status_}


def healthy():
    """Readings of the conftest fleet, everything as it should be."""
    return {
        "db1": Reading(live={"read_only": "0"}, pool=pool()),
        "db2": Reading(live=mariadb_replica(), pool=pool(), snapshots=snaps(MARIADB, 4200, 600)),
        "pg1": Reading(
            live={"in_recovery": False, "sender": ""},
            standbys={"pg2": {"state": "streaming", "replay_lag": 0.012, "client_addr": "10.99.0.22"}},
            pool=pool(capacity=7),
        ),
        "pg2": Reading(
            live={"in_recovery": True, "sender": "10.99.0.21"},
            position=pg_standby(),
            pool=pool(capacity=7),
            snapshots=snaps(POSTGRESQL, 900),
        ),
    }


def configs(fleet):
    return [HostConfig.from_data(name, data) for name, data in fleet.items()]


def report(fleet, readings):
    return status.status(configs(fleet), readings, NOW, "inventories/prod.py")


def host(rep, name):
    return next(g["hosts"][name] for g in rep["groups"].values() if name in g["hosts"])


# --- the report ---------------------------------------------------------------------------------

HEALTHY_TEXT = """\
inventories/prod.py: 4 host(s), read at 2026-12-05 06:00:03 UTC

mariadb (MariaDB)
  HOST  ROLE     REPLICATION                    POOL              NEWEST SNAPSHOT            NEWEST BACKUP
  db1   primary  -                              dbpool ONLINE 4%  none                       -
  db2   replica  from db1: running, 0 s behind  dbpool ONLINE 4%  autosnap_600 (10 min ago)  -

postgresql (PostgreSQL)
  HOST  ROLE     REPLICATION                      POOL              NEWEST SNAPSHOT            NEWEST BACKUP
  pg1   primary  -                                dbpool ONLINE 7%  none                       -
  pg2   replica  from pg1: streaming, 0 s behind  dbpool ONLINE 7%  autosnap_900 (15 min ago)  -

healthy: every host read, no problem"""


def test_a_healthy_fleet(fleet):
    rep = report(fleet, healthy())
    assert rep["healthy"] and rep["problems"] == []
    assert list(rep["groups"]) == ["mariadb", "postgresql"]
    assert status.render_text(rep) == HEALTHY_TEXT
    db2, pg2 = host(rep, "db2"), host(rep, "pg2")
    assert (db2["role"], db2["replication"]["source"], db2["replication"]["lag_seconds"]) == (
        "replica",
        "db1",
        0,
    )
    assert db2["newest_snapshot"] == {
        "name": "dbpool/datastore/mysql@autosnap_600",  # the data dataset's, of the same moment
        "created": NOW - 600,
        "age_seconds": 600,
    }
    assert pg2["replication"] == {
        "source": "pg1",
        "running": True,
        "io_running": None,
        "sql_running": None,
        "state": "streaming",
        "lag_seconds": 0.012,  # replay_lag, as pg1's pg_stat_replication measures it
        "unreplayed_bytes": 0,
        "error": None,
    }
    assert host(rep, "db1")["replication"] is None and host(rep, "db1")["takes_snapshots"] is False


def test_a_stopped_mariadb_replica(fleet):
    readings = healthy()
    readings["db2"].live = mariadb_replica(io="No", behind="NULL", error="error reconnecting to master")
    rep = report(fleet, readings)
    db2 = host(rep, "db2")
    assert not rep["healthy"]
    assert db2["replication"]["running"] is False and db2["replication"]["lag_seconds"] is None
    assert db2["problems"] == [
        "replication from db1 stopped (IO thread No, SQL thread Yes: error reconnecting to master)"
    ]
    assert "db2   replica  from db1: STOPPED (IO No, SQL Yes)" in status.render_text(rep)
    assert status.render_text(rep).endswith(
        "1 problem(s):\n  - db2: replication from db1 stopped (IO thread No, SQL thread Yes: error "
        "reconnecting to master)"
    )


def test_a_postgresql_standby_that_does_not_stream(fleet):
    readings = healthy()
    readings["pg2"].position = pg_standby(status_="", received="0/6000000", replayed="0/5000000")
    readings["pg1"].standbys = {}
    rep = report(fleet, readings)
    pg2 = host(rep, "pg2")
    assert pg2["replication"]["running"] is False
    assert pg2["replication"]["lag_seconds"] is None  # pg1 has no walsender for it
    assert pg2["replication"]["unreplayed_bytes"] == 0x1000000
    assert pg2["problems"] == ["replication from pg1 stopped (no WAL receiver)"]
    assert "pg2   replica  from pg1: not streaming, 16.0 MiB to replay" in status.render_text(rep)


def test_lag_over_the_alert_threshold_is_a_problem(fleet):
    readings = healthy()
    readings["db2"].live = mariadb_replica(behind="301")
    readings["pg1"].standbys["pg2"]["replay_lag"] = 300.0  # at the threshold: not over it
    rep = report(fleet, readings)
    assert host(rep, "db2")["problems"] == ["301 s behind, over replica_lag_alert_seconds = 300"]
    assert host(rep, "pg2")["problems"] == []


def test_a_degraded_pool(fleet):
    readings = healthy()
    readings["db1"].pool = pool(health="DEGRADED")
    rep = report(fleet, readings)
    assert host(rep, "db1")["pool"]["health"] == "DEGRADED"
    assert rep["problems"] == ["db1: pool dbpool is DEGRADED, not ONLINE"]
    assert "db1   primary  -                              dbpool DEGRADED 4%" in status.render_text(rep)


@pytest.mark.parametrize("capacity, over", [(80, False), (81, True)])
def test_over_capacity_is_over_the_hosts_threshold(fleet, capacity, over):
    readings = healthy()
    readings["pg1"].pool = pool(capacity=capacity)
    rep = report(fleet, readings)
    assert host(rep, "pg1")["pool"] == {
        "name": "dbpool",
        "health": "ONLINE",
        "capacity_percent": capacity,
        "threshold_percent": 80,
        "over_threshold": over,
    }
    assert rep["problems"] == (
        ["pg1: pool dbpool is 81% full, over zfs_capacity_threshold = 80%"] if over else []
    )
    assert ("(over 80%)" in status.render_text(rep)) is over


def test_the_threshold_is_the_hosts_own(fleet):
    fleet["pg1"]["zfs_capacity_threshold"] = 90
    readings = healthy()
    readings["pg1"].pool = pool(capacity=85)
    assert report(fleet, readings)["healthy"]


def test_a_pool_not_imported(fleet):
    readings = healthy()
    readings["pg2"].pool = None
    rep = report(fleet, readings)
    assert host(rep, "pg2")["pool"]["health"] is None
    assert rep["problems"] == ["pg2: pool dbpool is not imported"]
    assert "dbpool NOT IMPORTED" in status.render_text(rep)


def test_an_unreachable_host_is_a_row_not_a_crash(fleet):
    readings = healthy()
    readings["db2"] = Reading(
        error="Could not connect ([Errno None] Unable to connect to port 22 on 10.0.0.12)"
    )
    rep = report(fleet, readings)
    db2 = host(rep, "db2")
    assert (db2["reachable"], db2["role"], db2["pool"], db2["replication"]) == (False, None, None, None)
    assert rep["problems"] == [
        "db2: unreachable: Could not connect ([Errno None] Unable to connect to port 22 on 10.0.0.12)"
    ]
    row = next(line for line in status.render_text(rep).splitlines() if line.startswith("  db2"))
    assert row.split() == ["db2", "UNREACHABLE", "?", "?", "?", "-"]


def test_a_server_that_does_not_answer(fleet):
    readings = healthy()
    readings["pg1"].live = None
    readings["pg1"].standbys = None
    rep = report(fleet, readings)
    assert host(rep, "pg1")["server_answers"] is False
    assert host(rep, "pg1")["problems"] == ["the PostgreSQL server does not answer"]
    assert host(rep, "pg2")["replication"]["lag_seconds"] is None  # its primary could not say
    assert "pg1   DOWN (inventory: primary)" in status.render_text(rep)


def test_a_role_that_differs_from_the_inventory(fleet):
    # After a switchover the inventory does not show yet: db2 is the primary, db1 its replica.
    readings = healthy()
    readings["db1"] = Reading(
        live=mariadb_replica(source="10.99.0.12"), pool=pool(), snapshots=snaps(MARIADB, 60)
    )
    readings["db2"] = Reading(live={"read_only": "0"}, pool=pool(), snapshots=snaps(MARIADB, 600))
    rep = report(fleet, readings)
    text = status.render_text(rep)
    assert "db1   replica (inventory: primary)  from db2: running, 0 s behind" in text
    assert "db2   primary (inventory: replica)  -" in text
    assert host(rep, "db1")["problems"] == [
        "the inventory declares it a primary, but the live server is a replica of db2 (10.99.0.12)"
    ]
    assert host(rep, "db2")["problems"] == [
        "the inventory declares it a replica of db1, but the live server is a primary: it replicates "
        "from nobody and takes writes"
    ]
    # the snapshots follow the live role: db1 takes them now (a replica), db2 no more
    assert (host(rep, "db1")["takes_snapshots"], host(rep, "db2")["takes_snapshots"]) == (True, False)


def test_two_live_primaries_in_a_group(fleet):
    readings = healthy()
    readings["pg2"] = Reading(live={"in_recovery": False, "sender": ""}, standbys={}, pool=pool())
    rep = report(fleet, readings)
    assert rep["groups"]["postgresql"]["problems"] == ["2 live primaries: pg1, pg2"]
    assert rep["problems"][0] == "postgresql: 2 live primaries: pg1, pg2"


def test_a_replica_that_replicates_from_nobody(fleet):
    readings = healthy()
    readings["db2"].live = {"read_only": "1"}  # RESET SLAVE ALL: read-only, no source
    rep = report(fleet, readings)
    assert host(rep, "db2")["role"] == "read-only"
    assert host(rep, "db2")["problems"] == ["replicates from nobody"]


def test_snapshots_too_old_where_they_are_taken(fleet):
    readings = healthy()
    readings["db2"].snapshots = snaps(MARIADB, 27 * 3600)
    readings["pg2"].snapshots = []
    readings["pg1"].snapshots = snaps(POSTGRESQL, 40 * 86400)  # a primary's old ones: it takes none
    rep = report(fleet, readings)
    assert rep["problems"] == [
        "db2: newest snapshot 27 h old, over snapshot_max_age_hours = 26",
        "pg2: takes the snapshots (snapshot_on = 'replica') but has none",
    ]
    assert host(rep, "pg1")["newest_snapshot"]["age_seconds"] == 40 * 86400


# --- a backup host --------------------------------------------------------------------------------


@pytest.fixture
def with_backup(fleet):
    fleet["backup1"] = backup_data(zpool_name="backuppool")
    return fleet


def copies(cluster, name, *ages):
    root = f"backuppool/backup/{cluster}/{name}"
    return [
        {"name": f"{root}/{d}@autosnap_{age}", "creation": NOW - age, "gtid": None}
        for age in sorted(ages, reverse=True)
        for d in ("data", "log")
    ]


def pgbackrest_info(*stops, status_=0, message="ok"):
    backups = [
        {"label": f"B{i}", "type": "full" if i == 0 else "incr", "start": NOW - s - 60, "stop": NOW - s}
        for i, s in enumerate(sorted(stops, reverse=True))
    ]
    return {"status": status_, "message": message, "backups": backups, "archive": {}}


def backup_reading(**kwargs):
    defaults = {
        "pool": pool(capacity=12),
        "copies": copies("mariadb", "db2", 7200, 900)
        + copies("postgresql", "pg2", 1800)
        + copies("mariadb", "db1", 90000),
        "pgbackrest": {"postgresql": pgbackrest_info(86400, 5 * 3600)},
    }
    return Reading(**{**defaults, **kwargs})


def test_a_backup_host_with_copies(with_backup):
    readings = {**healthy(), "backup1": backup_reading()}
    rep = report(with_backup, readings)
    assert rep["healthy"], rep["problems"]
    assert host(rep, "db2")["newest_backup"] == {
        "host": "backup1",
        "read": True,
        "name": "backuppool/backup/mariadb/db2/data@autosnap_900",
        "created": NOW - 900,
        "age_seconds": 900,
    }
    # db1 (a primary: it takes no snapshots) keeps the copies of its replica days: no problem
    assert host(rep, "db1")["newest_backup"]["age_seconds"] == 90000
    assert rep["groups"]["postgresql"]["pgbackrest"] == {
        "host": "backup1",
        "read": True,
        "status": 0,
        "message": "ok",
        "label": "B1",
        "type": "incr",
        "stopped": NOW - 5 * 3600,
        "age_seconds": 5 * 3600,
    }
    assert rep["groups"]["mariadb"]["pgbackrest"] is None
    assert rep["backup_hosts"] == {
        "backup1": {
            "reachable": True,
            "error": None,
            "pool": {
                "name": "backuppool",
                "health": "ONLINE",
                "capacity_percent": 12,
                "threshold_percent": 80,
                "over_threshold": False,
            },
            "copies": 8,
            "problems": [],
        }
    }
    text = status.render_text(rep)
    assert "postgresql (PostgreSQL); pgBackRest on backup1: B1 (incr, 5 h ago)" in text
    assert "backup1: autosnap_900 (15 min ago)" in text
    assert (
        "backup hosts\n  HOST     POOL                   COPIES\n  backup1  backuppool ONLINE 12%  8" in text
    )


def test_old_or_missing_copies_and_backups_are_problems(with_backup):
    readings = {
        **healthy(),
        "backup1": backup_reading(
            copies=copies("mariadb", "db2", 3 * 3600),
            pgbackrest={"postgresql": pgbackrest_info(30 * 3600)},
        ),
    }
    rep = report(with_backup, readings)
    assert rep["problems"] == [
        "postgresql: pgBackRest's newest backup (B0) 30 h old, over pgbackrest_backup_max_age_hours = 26",
        "db2: newest copy on backup1 3 h old, over backup_max_age_hours = 2",
        "pg2: no copy of its snapshots on backup1",
    ]


def test_a_stanza_without_a_backup(with_backup):
    info = pgbackrest_info(status_=2, message="no valid backups")
    rep = report(with_backup, {**healthy(), "backup1": backup_reading(pgbackrest={"postgresql": info})})
    assert rep["groups"]["postgresql"]["problems"] == [
        "pgBackRest on backup1: stanza postgresql: no valid backups (status 2)"
    ]
    assert "pgBackRest on backup1: no backup (no valid backups)" in status.render_text(rep)


def test_an_unreachable_backup_host(with_backup):
    rep = report(with_backup, {**healthy(), "backup1": Reading(error="Could not connect (timed out)")})
    assert rep["problems"] == ["backup1: unreachable: Could not connect (timed out)"]  # said once
    assert host(rep, "db2")["newest_backup"] == {
        "host": "backup1",
        "read": False,
        "name": None,
        "created": None,
        "age_seconds": None,
    }
    assert rep["groups"]["postgresql"]["pgbackrest"]["read"] is False
    text = status.render_text(rep)
    assert "backup1: ?" in text and "backup1  UNREACHABLE  ?" in text


# --- the JSON -------------------------------------------------------------------------------------

HOST_KEYS = [
    "reachable",
    "error",
    "role",
    "inventory_role",
    "server_answers",
    "replication",
    "pool",
    "takes_snapshots",
    "newest_snapshot",
    "newest_backup",
    "problems",
]
REPLICATION_KEYS = [
    "source",
    "running",
    "io_running",
    "sql_running",
    "state",
    "lag_seconds",
    "unreplayed_bytes",
    "error",
]


def test_the_json_shape_is_stable(with_backup):
    readings = {**healthy(), "backup1": backup_reading()}
    readings["db1"] = Reading(error="Could not connect")
    readings["pg1"].live = None
    rep = json.loads(status.render_json(report(with_backup, readings)))
    assert list(rep) == ["inventory", "read_at", "healthy", "problems", "groups", "backup_hosts"]
    assert (rep["inventory"], rep["read_at"], rep["healthy"]) == ("inventories/prod.py", NOW, False)
    for group in rep["groups"].values():
        assert list(group) == ["engine", "pgbackrest", "problems", "hosts"]
        for row in group["hosts"].values():  # reachable, unreachable and down alike
            assert list(row) == HOST_KEYS
            if row["replication"] is not None:
                assert list(row["replication"]) == REPLICATION_KEYS
    assert list(rep["groups"]["postgresql"]["pgbackrest"]) == [
        "host",
        "read",
        "status",
        "message",
        "label",
        "type",
        "stopped",
        "age_seconds",
    ]
    assert list(rep["backup_hosts"]["backup1"]) == ["reachable", "error", "pool", "copies", "problems"]


def test_the_docstring_documents_every_key():
    doc = status.__doc__
    for key in [*HOST_KEYS, *REPLICATION_KEYS, "read_at", "healthy", "backup_hosts", "pgbackrest", "copies"]:
        assert f'"{key}"' in doc, key


# --- the command line -------------------------------------------------------------------------------


@pytest.fixture
def tripwire(monkeypatch):
    """Loading, validating or reading anything fails the test."""

    def trip(*args, **kwargs):
        raise AssertionError("touched")

    for name in ("load_inventory", "validate", "read"):
        monkeypatch.setattr(status, name, trip)


def test_help_prints_the_usage_and_reads_nothing(tripwire, capsys):
    assert status.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ./dbzfs status [-h] [--json] INVENTORY")
    assert "exit status: 0" in out
    assert status.main(["inventories/prod.py", "--json", "-h"]) == 0


@pytest.mark.parametrize("argv", [[], ["a.py", "b.py"], ["a.py", "--yaml"]])
def test_bad_arguments_exit_2(tripwire, capsys, argv):
    assert status.main(argv) == 2
    assert "usage: ./dbzfs status" in capsys.readouterr().err


def test_no_such_inventory_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(status, "read", lambda *a: pytest.fail("connected"))
    assert status.main(["inventories/nonexistent.py"]) == 2
    assert "inventory = 'inventories/nonexistent.py': no such file" in capsys.readouterr().err


def test_refused_data_exits_2_before_any_connection(monkeypatch, capsys, fleet):
    fleet["db2"]["role"] = "leader"
    monkeypatch.setattr(status, "load_inventory", lambda path: fleet)
    monkeypatch.setattr(status, "read", lambda *a: pytest.fail("connected"))
    monkeypatch.setenv("DBZFS_SECRET_REPLICATION_PASSWORD", "x")
    assert status.main(["inv.py"]) == 2
    err = capsys.readouterr().err
    assert "inv.py: 1 problem(s) in the inventory data; no host was changed" in err
    assert "db2: role = 'leader'" in err


@pytest.mark.parametrize("as_json", [False, True])
def test_main_prints_the_report_and_exits_1_on_a_problem(monkeypatch, capsys, fleet, as_json):
    readings = healthy()
    monkeypatch.setattr(status.time, "time", lambda: NOW)  # the readings' ages are from NOW
    monkeypatch.setattr(status, "load_inventory", lambda path: fleet)
    monkeypatch.setattr(status, "validate", lambda hosts, secrets: [])
    monkeypatch.setattr(status, "read", lambda path, cfgs: readings)
    argv = ["inv.py", "--json"] if as_json else ["inv.py"]
    assert status.main(argv) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["healthy"] if as_json else out.endswith("healthy: every host read, no problem\n")
    readings["pg2"] = Reading(error="Could not connect")
    assert status.main(argv) == 1
    out = capsys.readouterr().out
    assert (json.loads(out)["problems"] if as_json else out.splitlines()[-1]) in (
        ["pg2: unreachable: Could not connect"],
        "  - pg2: unreachable: Could not connect",
    )


INVENTORY = """\
_hw = {"ram_bytes": 4 * 1024**3, "cpus": 2}
mariadb = [
    ("@local", {"engine": "mariadb", "role": "primary", "server_id": 1, "hardware": _hw,
                "replication_address": "10.99.0.11", "drive_pattern": "nvme-A_*", "drive_count": 24}),
    ("db2", {"ssh_hostname": "127.0.0.1", "ssh_port": PORT, "ssh_user": "root", "ssh_connect_retries": 0,
             "engine": "mariadb", "role": "replica", "primary": "@local", "server_id": 2, "hardware": _hw,
             "replication_address": "10.99.0.12", "drive_pattern": "nvme-B_*", "drive_count": 24}),
]
"""


def closed_port():
    import socket

    with socket.socket() as s:  # bound, never listening: a connection is refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_status(tmp_path, path=None):
    inventory = tmp_path / "inv.py"
    inventory.write_text(INVENTORY.replace("PORT", str(closed_port())))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBZFS_SECRET")}
    env.update(DBZFS_SECRETS_FILE=str(tmp_path / "none.yml"), DBZFS_SECRET_REPLICATION_PASSWORD="x")
    if path:
        env["PATH"] = f"{path}:{env['PATH']}"
    result = subprocess.run(
        [sys.executable, "-m", "day2.status", str(inventory), "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    rep = json.loads(result.stdout)
    return rep, rep["groups"]["mariadb"]["hosts"]["@local"], rep["groups"]["mariadb"]["hosts"]["db2"]


def test_the_real_reading_an_unreachable_host_and_this_machine(tmp_path):
    """The glue through pyinfra's API, in a process of its own (pyinfra_cli patches the interpreter
    for gevent): this machine through pyinfra's @local connector (its facts only read: no
    MariaDB server or pool here is a row too) and a host whose ssh port refuses."""
    rep, local, db2 = run_status(tmp_path)
    assert local["reachable"] and local["error"] is None and local["pool"]["name"] == "dbpool"
    assert not db2["reachable"] and db2["error"].startswith("Could not connect")
    assert f"db2: unreachable: {db2['error']}" in rep["problems"]


def test_the_real_reading_a_fact_that_fails_is_an_unreadable_host(tmp_path):
    """A fact's command failing (here `zpool get`, on this machine) fails its host in pyinfra:
    that host's row says which fact and what the command said; the other hosts are still read."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "zpool").write_text('#!/bin/sh\n[ "$1" = list ] && exit 0\necho "zpool: broken" >&2\nexit 1\n')
    (fake / "zpool").chmod(0o755)
    rep, local, db2 = run_status(tmp_path, path=fake)
    assert local["reachable"] and local["pool"] is None and local["role"] is None
    assert local["error"].startswith("could not read ZpoolProperties: zpool: broken")
    assert f"@local: {local['error']}" in rep["problems"]
    assert not db2["reachable"]
