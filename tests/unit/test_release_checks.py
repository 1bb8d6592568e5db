"""The release keys (debian_release, postgresql_version) in validation, in the server version a host
runs and in the replication groups: the mixed states a release upgrade passes through are accepted,
the others refused with the key and a fix."""

import pytest

import engines
from model import releases
from model.hostdata import HostConfig
from roles import postgresql
from validation import validate


def found(fleet, secrets):
    return [(p.host, p.key, p.value) for p in validate(fleet, secrets)]


def test_the_release_ships_one_mariadb_and_keeps_the_previous_postgresql():
    assert releases.server_versions("13", "mariadb") == ("11.8",)
    assert releases.server_versions("13", "postgresql") == ("17", "15")
    assert releases.server_versions("12", "postgresql") == ("15",)
    assert releases.shipping("postgresql", "15") is releases.BOOKWORM
    assert releases.previous(releases.TRIXIE) is releases.BOOKWORM
    assert releases.previous(releases.BOOKWORM) is None
    assert releases.following(releases.BOOKWORM) is releases.TRIXIE
    assert releases.following(releases.TRIXIE) is None


def test_a_debian_13_host_still_running_postgresql_15_is_its_15_cluster(fleet, secrets):
    """Mid-upgrade: both PostgreSQL hosts on Debian 13, their clusters still 15 (pg_upgradecluster
    has not run): the unit, paths and settings are 15's."""
    for name in ("pg1", "pg2"):
        fleet[name].update(debian_release="13", postgresql_version="15")
    assert found(fleet, secrets) == []
    cfg = HostConfig.from_data("pg2", fleet["pg2"])
    assert cfg.server_version == "15"
    assert engines.of(cfg).version == "15"
    assert postgresql.cluster(cfg).unit == "postgresql@15-main.service"


def test_the_version_is_text_as_every_version_key(fleet, secrets):
    fleet["pg1"].update(debian_release="13", postgresql_version=15)
    assert ("pg1", "postgresql_version", 15) in found(fleet, secrets)


def test_a_standby_on_the_new_release_still_15_streams_from_its_15_primary(fleet, secrets):
    fleet["pg1"]["debian_release"] = "12"
    fleet["pg2"].update(debian_release="13", postgresql_version="15")
    assert found(fleet, secrets) == []


def test_a_standby_of_another_major_version_is_refused(fleet, secrets):
    fleet["pg1"]["debian_release"] = "12"
    fleet["pg2"]["debian_release"] = "13"  # 17
    assert ("pg2", "debian_release", "13") in found(fleet, secrets)
    fleet["pg1"].update(debian_release="13", postgresql_version="15")
    fleet["pg2"].update(debian_release="13", postgresql_version="17")
    assert ("pg2", "postgresql_version", "17") in found(fleet, secrets)


@pytest.mark.parametrize(
    ("host", "data", "message"),
    [
        ("pg1", {"debian_release": "12", "postgresql_version": "17"}, "runs PostgreSQL 15 only"),
        ("pg1", {"postgresql_version": "16"}, "not a PostgreSQL version"),
        ("db1", {"postgresql_version": "15"}, "not PostgreSQL"),
    ],
)
def test_a_version_the_host_cannot_run_is_refused_with_a_fix(fleet, secrets, host, data, message):
    fleet[host].update(data)
    problems = [p for p in validate(fleet, secrets) if p.key == "postgresql_version"]
    assert len(problems) == 1 and problems[0].host == host, [str(p) for p in problems]
    assert message in problems[0].message and problems[0].fix


def test_a_mariadb_replica_may_be_newer_than_its_primary_never_older(fleet, secrets):
    fleet["db1"]["debian_release"] = "12"
    fleet["db2"]["debian_release"] = "13"
    assert found(fleet, secrets) == []
    fleet["db1"]["debian_release"] = "13"
    fleet["db2"]["debian_release"] = "12"
    assert ("db2", "debian_release", "12") in found(fleet, secrets)
