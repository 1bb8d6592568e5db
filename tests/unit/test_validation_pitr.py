"""validation/ on point-in-time recovery (roles/pgbackrest.py): the PostgreSQL hosts' key
to the repository (secret pgbackrest_ssh_private_key) wherever a backup host and a PostgreSQL
host meet, and the ranges of the archive and backup settings."""

import pytest

from model.secrets import Secrets
from roles import backup, pgbackrest
from validation import validate

from tests.unit.conftest import backup_data

KEY = f"secrets.{pgbackrest.SECRET}"


@pytest.fixture
def with_backup(fleet):
    return {**fleet, "backup1": backup_data()}


def secrets(ssh_keys, **more):
    values = {"replication_password": "r", backup.SECRET: ssh_keys[0], pgbackrest.SECRET: ssh_keys[1]}
    values.update(more)
    return Secrets({k: v for k, v in values.items() if v is not None}, "test")


def problems(hosts, found_secrets):
    return {(p.host, p.key): p for p in validate(hosts, found_secrets)}


def test_a_fleet_with_a_backup_host_and_both_keys_is_valid(with_backup, ssh_keys):
    assert validate(with_backup, secrets(ssh_keys)) == []


def test_the_postgresql_hosts_key_must_be_there(with_backup, ssh_keys):
    found = problems(with_backup, secrets(ssh_keys, **{pgbackrest.SECRET: None}))
    assert list(found) == [("pg1", KEY)]  # named once, at the first PostgreSQL host
    problem = found[("pg1", KEY)]
    assert problem.value is None
    assert (
        "archive their WAL to the backup host" in problem.message and "(looked in: test)" in problem.message
    )
    assert "DBZFS_SECRET_PGBACKREST_SSH_PRIVATE_KEY" in problem.fix and "ssh-keygen -t ed25519" in problem.fix


def test_the_postgresql_hosts_key_must_be_a_key_and_is_never_shown(with_backup, ssh_keys):
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-key\n-----END OPENSSH PRIVATE KEY-----\n"
    found = problems(with_backup, secrets(ssh_keys, **{pgbackrest.SECRET: text}))
    problem = found[("pg1", KEY)]
    assert problem.value == "(hidden)"
    assert "not an OpenSSH private key" in problem.message
    assert "not-a-key" not in str(problem)
    assert ("backup1", f"secrets.{backup.SECRET}") not in found


def test_no_pgbackrest_key_is_needed_without_a_backup_host(fleet):
    assert validate(fleet, Secrets({"replication_password": "r"}, "test")) == []


def test_no_pgbackrest_key_is_needed_without_a_postgresql_host(with_backup, ssh_keys):
    mariadb_only = {k: v for k, v in with_backup.items() if not k.startswith("pg")}
    assert validate(mariadb_only, secrets(ssh_keys, **{pgbackrest.SECRET: None})) == []


def test_the_key_is_asked_of_the_first_postgresql_host_of_the_inventory(with_backup, ssh_keys):
    reordered = {"pg2": with_backup["pg2"], **{k: v for k, v in with_backup.items() if k != "pg2"}}
    found = problems(reordered, secrets(ssh_keys, **{pgbackrest.SECRET: None}))
    assert list(found) == [("pg2", KEY)]


# --- the ranges ------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["pg1", "pg2", "backup1"])
@pytest.mark.parametrize("value", [0, -1, 3601])
def test_the_archive_timeout_is_1_to_3600_seconds(with_backup, ssh_keys, host, value):
    with_backup[host]["pitr_archive_timeout"] = value
    problem = problems(with_backup, secrets(ssh_keys))[(host, "pitr_archive_timeout")]
    assert problem.value == value
    assert problem.message == "out of range (1..3600 seconds)" and problem.fix.startswith("e.g. 60")


@pytest.mark.parametrize("value", [1, 3600])
def test_the_archive_timeout_s_bounds_pass(with_backup, ssh_keys, value):
    with_backup["pg1"]["pitr_archive_timeout"] = value
    assert validate(with_backup, secrets(ssh_keys)) == []


def test_a_mariadb_host_s_archive_settings_are_not_read(with_backup, ssh_keys):
    with_backup["db1"].update(
        pitr_archive_timeout=0,
        pgbackrest_retention_full=0,
        pgbackrest_full_calendar="",
        pgbackrest_backup_max_age_hours=0,
    )
    assert validate(with_backup, secrets(ssh_keys)) == []


def test_an_archive_timeout_of_the_wrong_type_is_reported_once(with_backup, ssh_keys):
    with_backup["pg1"]["pitr_archive_timeout"] = "60s"
    found = [p for p in validate(with_backup, secrets(ssh_keys)) if p.key == "pitr_archive_timeout"]
    assert len(found) == 1
    assert found[0].message == "must be an integer, not a string" and "60 (seconds)" in found[0].fix


@pytest.mark.parametrize(("value", "passes"), [(0, False), (1, True), (99, True), (100, False)])
def test_the_full_backups_kept_are_1_to_99(with_backup, ssh_keys, value, passes):
    with_backup["backup1"]["pgbackrest_retention_full"] = value
    found = problems(with_backup, secrets(ssh_keys))
    if passes:
        assert found == {}
    else:
        problem = found[("backup1", "pgbackrest_retention_full")]
        assert (
            problem.value == value and problem.message == "out of range (1..99)" and problem.fix == "e.g. 2"
        )


@pytest.mark.parametrize(
    ("value", "passes"), [(0, False), (-26, False), (1, True), (8760, True), (8761, False)]
)
def test_the_newest_backup_s_age_alerted_is_1_to_8760_hours(with_backup, ssh_keys, value, passes):
    with_backup["backup1"]["pgbackrest_backup_max_age_hours"] = value
    found = problems(with_backup, secrets(ssh_keys))
    if passes:
        assert found == {}
    else:
        problem = found[("backup1", "pgbackrest_backup_max_age_hours")]
        assert problem.value == value and problem.message == "out of range (1..8760 hours)"
        assert problem.fix.startswith("e.g. 26")


def test_the_newest_backup_s_age_of_the_wrong_type_is_reported_once(with_backup, ssh_keys):
    with_backup["backup1"]["pgbackrest_backup_max_age_hours"] = "26h"
    found = [
        p for p in validate(with_backup, secrets(ssh_keys)) if p.key == "pgbackrest_backup_max_age_hours"
    ]
    assert len(found) == 1
    assert found[0].message == "must be an integer, not a string" and "26" in found[0].fix


@pytest.mark.parametrize("key", ["pgbackrest_full_calendar", "pgbackrest_incr_calendar"])
@pytest.mark.parametrize(
    "value",
    # "%": systemd expands specifiers in the timer's Description, which names the calendar
    ["", "   ", "Sun *-*-* 01:00\nExecStartPre=/bin/sh -c id", "Sun *-*-* 01:00\n", "Sun *-*-* 01:00 %H"],
)
def test_a_calendar_is_one_non_empty_line(with_backup, ssh_keys, key, value):
    with_backup["backup1"][key] = value
    problem = problems(with_backup, secrets(ssh_keys))[("backup1", key)]
    assert problem.value == value
    assert problem.message == "not a systemd OnCalendar expression"
    assert problem.fix.startswith("e.g. ") and "*-*-* 01:00" in problem.fix


def test_calendars_of_systemd_s_own_forms_pass(with_backup, ssh_keys):
    with_backup["backup1"].update(pgbackrest_full_calendar="weekly", pgbackrest_incr_calendar="*-*-* 00/6:00")
    assert validate(with_backup, secrets(ssh_keys)) == []


def test_a_calendar_of_the_wrong_type_is_reported_once(with_backup, ssh_keys):
    with_backup["backup1"]["pgbackrest_incr_calendar"] = ["Mon", "Tue"]
    found = [p for p in validate(with_backup, secrets(ssh_keys)) if p.key == "pgbackrest_incr_calendar"]
    assert len(found) == 1 and found[0].message == "must be a string, not a list"


# --- the backup host's snapshots of the repository ------------------------------------------------


@pytest.mark.parametrize("value", [{}, {"hourly": 0, "daily": 0}])
def test_the_backup_host_keeps_some_snapshots_of_the_repository(with_backup, ssh_keys, value):
    with_backup["backup1"]["pgbackrest_repository_snapshots"] = value
    problem = problems(with_backup, secrets(ssh_keys))[("backup1", "pgbackrest_repository_snapshots")]
    assert problem.value == value
    assert "every PostgreSQL host can write and delete files in it" in problem.message
    assert problem.fix == 'keep some, e.g. {"hourly": 24, "daily": 7}'


def test_no_repository_snapshots_are_asked_for_without_a_postgresql_host(with_backup, ssh_keys):
    mariadb_only = {k: v for k, v in with_backup.items() if not k.startswith("pg")}
    mariadb_only["backup1"]["pgbackrest_repository_snapshots"] = {}
    assert validate(mariadb_only, secrets(ssh_keys, **{pgbackrest.SECRET: None})) == []


@pytest.mark.parametrize(
    ("value", "key", "message"),
    [
        (
            {"hourley": 24},
            "pgbackrest_repository_snapshots['hourley']",
            "not a kind of snapshot sanoid keeps",
        ),
        ({"daily": -1}, "pgbackrest_repository_snapshots['daily']", "not a count"),
        ({"daily": "7"}, "pgbackrest_repository_snapshots['daily']", "not a count"),
    ],
)
def test_the_repository_snapshots_are_counts_of_sanoid_s_kinds(with_backup, ssh_keys, value, key, message):
    with_backup["backup1"]["pgbackrest_repository_snapshots"] = value
    found = problems(with_backup, secrets(ssh_keys))
    assert found[("backup1", key)].message == message, found
