"""Pure parts of the PostgreSQL role: SCRAM verifiers as PostgreSQL computes them, the systemd
drop-in, who may connect to which database, and templates rendered by pyinfra exactly as
roles/render.py renders them."""

import base64
import hashlib

import pytest
from pyinfra.api.exceptions import PyinfraError

from model.hostdata import HostConfig
from operations import postgresql as pg
from roles import postgresql as role

# Computed by PostgreSQL 15 itself: ALTER ROLE postgres PASSWORD 'Pa:ss\w0rd-x'.
PG_VERIFIER = (
    "SCRAM-SHA-256$4096:VsAmMVPqV+eVYoT3DLp7qA==$rPEqhr5JBsiFhLR0e7w9bQRyYE9tcInNNkjDJ2Lrm7o"
    "=:b9BNRfb1+RHORaXbYCcKAmLb8pNmL6p4p1J6G7SYcAE="
)


def test_scram_verifier_matches_postgresql():
    salt = base64.b64decode("VsAmMVPqV+eVYoT3DLp7qA==")
    assert pg.scram_verifier("Pa:ss\\w0rd-x", salt) == PG_VERIFIER


def test_password_matches_a_stored_verifier():
    live = {
        "scram": "4096:VsAmMVPqV+eVYoT3DLp7qA==",
        "verifier_sha256": hashlib.sha256(PG_VERIFIER.encode()).hexdigest(),
    }
    assert pg.password_matches("Pa:ss\\w0rd-x", live)
    assert not pg.password_matches("Pa:ss\\w0rd-y", live)
    assert not pg.password_matches("Pa:ss\\w0rd-x", {"scram": "", "verifier_sha256": ""})


def test_fresh_verifiers_get_fresh_salts():
    assert pg.scram_verifier("pw") != pg.scram_verifier("pw")


def cfg_for(fleet, name, **data):
    fleet[name].update(data)
    return HostConfig.from_data(name, fleet[name])


def test_dropin_waits_for_zfs_and_both_datasets(fleet):
    text = role.dropin_text(cfg_for(fleet, "pg1"))
    assert "After=zfs-mount.service\nRequires=zfs-mount.service\n" in text
    assert "RequiresMountsFor=/datastore/postgresql /datastore/postgresql-wal\n" in text


def test_database_grants_least_privilege(fleet):
    cfg = cfg_for(
        fleet,
        "pg1",
        databases=[{"name": "heap", "owner": "heap"}, {"name": "reports"}],
        db_users=[
            {"name": "heap", "password_secret": "heap_password"},
            {"name": "reader", "password_secret": "r", "database": "reports"},
            {"name": "etl", "password_secret": "e", "database": "reports", "owner": True},
        ],
    )
    assert role.database_grants(cfg) == [
        {"name": "heap", "owner": "heap", "connect": ["heap"]},
        {"name": "reports", "owner": "etl", "connect": ["reader", "etl"]},
    ]


def test_user_of_an_undeclared_database_is_refused(fleet):
    cfg = cfg_for(fleet, "pg1", databases=[], db_users=[{"name": "app", "password_secret": "app_password"}])
    with pytest.raises(PyinfraError, match="database 'app', which is not in databases"):
        role.database_grants(cfg)
