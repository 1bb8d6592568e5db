"""roles/backup.py: what the backup host pulls from where, the files it writes, the database hosts'
access for its key, the data's validation, and the `zfs allow` operation against fact stubs."""

import json
import subprocess

import pytest

from facts.zfs import ZfsAllowed, parse_allowed
from model.hostdata import HostConfig
from model.secrets import Secrets
from operations import zfs as zfs_ops
from roles import backup, pgbackrest
from validation import validate

from tests.unit.conftest import backup_data
from tests.unit.fact_stubs import run_operation


@pytest.fixture(scope="module")
def key_pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("key") / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(path)], check=True)
    return path.read_text(), " ".join(path.with_suffix(".pub").read_text().split()[:2])


@pytest.fixture
def with_backup(fleet):
    return {**fleet, "backup1": backup_data()}


def configs(fleet):
    return [HostConfig.from_data(name, data) for name, data in fleet.items()]


def secrets_with(key_pair, **more):
    # the PostgreSQL hosts' key to the pgBackRest repository too (roles/pgbackrest.py)
    values = {"replication_password": "r", backup.SECRET: key_pair[0], pgbackrest.SECRET: key_pair[0]}
    return Secrets({**values, **more}, "test")


def test_the_backup_host_pulls_every_database_host_s_data_and_log(with_backup):
    hosts = configs(with_backup)
    me = next(h for h in hosts if h.is_backup_host)
    config = json.loads(backup.pull_config_text(me, hosts))
    assert config["target"] == "dbpool/backup" and config["user"] == backup.USER
    assert [s["host"] for s in config["sources"]] == ["db1", "db2", "pg1", "pg2"]
    db2 = config["sources"][1]
    assert db2 == {
        "host": "db2",
        "address": "10.99.0.12",
        "cluster": "mariadb",
        "engine": "mariadb",
        "datasets": {"data": "dbpool/datastore/mysql", "log": "dbpool/datastore/mysql-log"},
    }
    assert backup.copy_of(me, hosts[1], "data") == "dbpool/backup/mariadb/db2/data"


def test_the_backup_host_s_sanoid_prunes_each_group_by_its_engine_s_counts(with_backup):
    with_backup["backup1"]["backup_retention"] = {
        "mariadb": {"hourly": 10, "daily": 7},
        "postgresql": {"daily": 3},
    }
    hosts = configs(with_backup)
    me = next(h for h in hosts if h.is_backup_host)
    texts = backup.files_text(me, hosts)
    conf = texts[backup.SANOID_CONF]
    assert "[dbpool/backup/mariadb]\n\tuse_template = mariadb\n\trecursive = yes\n" in conf
    assert "[dbpool/backup/postgresql]\n\tuse_template = postgresql\n" in conf
    mariadb = conf.split("[template_mariadb]")[1].split("[template_")[0]
    assert "\tautosnap = no\n" in mariadb and "\thourly = 10\n" in mariadb and "\tdaily = 7\n" in mariadb
    assert "\tmonthly = 0\n" in mariadb  # every kind: none of sanoid's own defaults
    assert "\tdaily = 3\n" in conf.split("[template_postgresql]")[1]
    assert f"ExecStart=/usr/bin/python3 {backup.SCRIPT} --config {backup.CONFIG}" in texts[backup.UNIT_PATH]
    assert "OnUnitActiveSec=15min" in texts[backup.TIMER_PATH]


def test_the_database_hosts_let_the_key_in_from_the_backup_hosts_only(key_pair, with_backup):
    public = backup.public_key(key_pair[0])
    assert public == key_pair[1]
    backups = [h for h in configs(with_backup) if h.is_backup_host]
    line = backup.authorized_keys_text(public, backups)
    assert line == f'restrict,from="10.99.0.51" {public} dbzfs-backup@backup1\n'


def test_a_key_that_is_not_one_is_refused_without_showing_it():
    with pytest.raises(ValueError, match="not an OpenSSH private key") as info:
        backup.public_key("-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-key\n")
    assert "not-a-key" not in str(info.value)


def test_a_valid_fleet_with_a_backup_host(key_pair, with_backup):
    assert validate(with_backup, secrets_with(key_pair)) == []


def problems(fleet, secrets):
    return {(p.host, p.key): p for p in validate(fleet, secrets)}


def test_the_backup_key_must_be_there_and_be_a_key(key_pair, with_backup):
    found = problems(with_backup, Secrets({"replication_password": "r"}, "test"))
    assert ("backup1", f"secrets.{backup.SECRET}") in found
    found = problems(with_backup, secrets_with(("not a key", "")))
    problem = found[("backup1", f"secrets.{backup.SECRET}")]
    assert "not an OpenSSH private key" in problem.message and "not a key" not in str(problem)


def test_a_backup_host_runs_no_database(key_pair, with_backup):
    with_backup["backup1"].update(engine="mariadb", server_id=9)
    found = problems(with_backup, secrets_with(key_pair))
    assert "runs no database" in found[("backup1", "engine")].message
    assert ("backup1", "server_id") in found


def test_every_host_needs_an_address_the_backup_host_can_use(key_pair, with_backup):
    with_backup["pg2"]["replication_address"] = None
    with_backup["backup1"]["replication_address"] = None
    found = problems(with_backup, secrets_with(key_pair))
    assert "pulls from it there" in found[("pg2", "replication_address")].message
    assert "from that address only" in found[("backup1", "replication_address")].message


def test_the_backup_retention_keeps_something_of_each_engine(key_pair, with_backup):
    with_backup["backup1"]["backup_retention"] = {"mariadb": {"hourly": 0}, "postgresql": {"daily": 3}}
    found = problems(with_backup, secrets_with(key_pair))
    assert "keeps no copy" in found[("backup1", "backup_retention['mariadb']")].message
    with_backup["backup1"]["backup_retention"] = {"mariadb": {"daily": 3}, "postgresql": {"dayly": 3}}
    found = problems(with_backup, secrets_with(key_pair))
    assert "did you mean 'daily'" in found[("backup1", "backup_retention['postgresql']['dayly']")].fix
    with_backup["backup1"].update(
        backup_retention={"mariadb": {"daily": 1}, "postgresql": {"daily": 1}}, backup_pull_minutes=0
    )
    found = problems(with_backup, secrets_with(key_pair))
    assert ("backup1", "backup_pull_minutes") in found


ALLOW_OUTPUT = """\
---- Permissions on dbpool/datastore ---------------------------------
Local+Descendent permissions:
	user dbzfs-backup hold,send
	group staff snapshot
---- Permissions on dbpool -------------------------------------------
Local+Descendent permissions:
	user other send
""".splitlines()


def test_the_allow_fact_reads_the_dataset_s_own_permissions():
    assert parse_allowed(ALLOW_OUTPUT) == {"dbzfs-backup": ["hold", "send"]}
    assert parse_allowed([]) == {}
    assert parse_allowed(["MISSING"]) is None


@pytest.mark.parametrize(
    "live, wanted, expected",
    [
        ({}, ["send"], ["zfs allow -l -d -u dbzfs-backup send dbpool/datastore"]),
        ({"dbzfs-backup": ["send"]}, ["send"], []),
        (
            {"dbzfs-backup": ["destroy", "send"]},
            ["send"],
            [
                "zfs unallow -l -d -u dbzfs-backup dbpool/datastore",
                "zfs allow -l -d -u dbzfs-backup send dbpool/datastore",
            ],
        ),
        ({"dbzfs-backup": ["send"]}, [], ["zfs unallow -l -d -u dbzfs-backup dbpool/datastore"]),
        (None, [], []),  # no dataset yet: nothing to take away
    ],
)
def test_the_allow_operation_gives_exactly_the_permissions(live, wanted, expected):
    commands, host = run_operation(
        zfs_ops.allowed,
        {ZfsAllowed: live},
        dataset_name="dbpool/datastore",
        user="dbzfs-backup",
        permissions=wanted,
    )
    assert commands == expected
    assert bool(host.noops) == (not expected)
