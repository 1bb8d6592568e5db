"""InnoDB's doublewrite buffer goes only where ZFS makes it useless: records of at least a 16k
page on the data dataset (the same rule as PostgreSQL's full_page_writes at 8k)."""

import pytest

import validation
from model.hostdata import HostConfig
from model.secrets import Secrets
from roles import render

SECRETS = Secrets({"replication_password": "x"}, "test")


def my_cnf(fleet, recordsize):
    fleet["db1"]["zfs_dataset_properties"] = {"datastore/mysql": {"recordsize": recordsize}}
    cfg = HostConfig.from_data("db1", fleet["db1"])
    return render.render("my.cnf.j2", render.mariadb_context(cfg, cfg.sizing()))


@pytest.mark.parametrize("recordsize, doublewrite", [("16k", "0"), ("64k", "0"), ("8k", "1"), ("4k", "1")])
def test_doublewrite_off_only_with_records_of_a_page_or_more(fleet, recordsize, doublewrite):
    lines = [line.split() for line in my_cnf(fleet, recordsize).splitlines()]
    assert ["innodb_doublewrite", "=", doublewrite] in lines


@pytest.mark.parametrize(
    ("release", "spelling"),
    [(r, s) for r in ("12", "13") for s in ("OFF", "off", "0", False, 0)]
    + [("12", "FALSE")],  # 11.8: an enum
)
def test_doublewrite_override_off_under_16k_records_is_refused(fleet, release, spelling):
    fleet["db1"]["debian_release"] = fleet["db2"]["debian_release"] = release
    fleet["db1"]["zfs_dataset_properties"] = {"datastore/mysql": {"recordsize": "8k"}}
    fleet["db1"]["db_settings"] = {"innodb_doublewrite": spelling}
    problems = [p for p in validation.validate(fleet, SECRETS) if "innodb_doublewrite" in p.key]
    assert len(problems) == 1
    assert str(problems[0]).startswith("db1: db_settings['innodb_doublewrite'] = ")
    assert "unsafe with recordsize 8192 < 16k on datastore/mysql" in str(problems[0])
    assert "Fix: set the data dataset's recordsize to 16k or more" in str(problems[0])


def test_doublewrite_override_off_with_16k_records_is_fine(fleet):
    fleet["db1"]["db_settings"] = {"innodb_doublewrite": "OFF"}
    assert not [p for p in validation.validate(fleet, SECRETS) if "innodb_doublewrite" in p.key]


def test_innodb_page_size_is_the_toolkits(fleet):
    fleet["db1"]["db_settings"] = {"innodb_page_size": "4k"}
    (problem,) = [p for p in validation.validate(fleet, SECRETS) if "innodb_page_size" in p.key]
    assert "set by the toolkit" in str(problem)
