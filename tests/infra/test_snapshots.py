"""The snapshots role's result on a live host: sanoid pruning the engine's datasets and the unit
that takes the snapshots on every host, and on the hosts that take them in the role the inventory
declares, snapshots of every kind kept that are recent, atomic across the data and log datasets,
and carry the engine's position."""

import re
import time

import pytest

from host_scripts import db_snapshot
from roles import snapshots

# tests/infra/conftest.py: only the database hosts are checked (a backup host runs no engine)
host_roles = ("primary", "replica")


@pytest.fixture(scope="module")
def takes(cfg, members):
    return snapshots.takes_snapshots(cfg, members)


def test_sanoid_prunes_the_engines_datasets(host, cfg):
    conf = host.file(snapshots.SANOID_CONF).content_string
    for dataset in snapshots.datasets(cfg):
        assert f"[{dataset}]" in conf
    timer = host.service("sanoid.timer")
    assert timer.is_enabled and timer.is_running


def test_each_sanoid_run_takes_the_snapshots_first(host, cfg, members):
    mode = snapshots.when(cfg, members)
    assert host.file(snapshots.SANOID_DROP_IN).exists == (mode is not None)
    if mode:
        unit = host.file(f"/etc/systemd/system/{snapshots.UNIT}").content_string
        assert f"--when {mode} " in unit


def autosnaps(host, dataset):
    """[(name, creation, createtxg, gtid, lsn)] of the dataset's snapshots of ours, oldest first."""
    out = host.check_output(
        f"zfs list -Hp -t snapshot -o name,creation,createtxg,{db_snapshot.GTID_PROPERTY},"
        f"{db_snapshot.LSN_PROPERTY} -s createtxg -d 1 {dataset}"
    )
    return [line.split("\t") for line in out.splitlines() if "@" + db_snapshot.PREFIX in line]


def test_a_host_that_takes_them_has_every_kind_kept_and_recent(host, cfg, takes):
    data = autosnaps(host, snapshots.datasets(cfg)[0])
    if not takes:
        return  # it may hold some from another role; sanoid ages them out
    now = time.time()
    for kind, count in snapshots.retention(cfg).items():
        if count:
            mine = [row for row in data if row[0].endswith(f"_{kind}")]
            assert mine, f"no {kind} snapshot of {snapshots.datasets(cfg)[0]}"
            age = now - int(mine[-1][1])
            assert age < snapshots.MAX_AGE_SECONDS[kind], f"newest {kind} snapshot is {age:.0f} s old"


def test_each_snapshot_is_atomic_and_holds_the_position(host, cfg, takes):
    data, log = (autosnaps(host, ds) for ds in snapshots.datasets(cfg))
    if not takes and not data:
        return
    assert [row[0].split("@")[1] for row in data] == [row[0].split("@")[1] for row in log]
    for d, lg in zip(data, log, strict=True):
        assert d[2] == lg[2], f"{d[0]}: not taken in one transaction group with the log's"
        if cfg.engine == "mariadb":
            assert re.fullmatch(r"empty|\d+-\d+-\d+(,\d+-\d+-\d+)*", d[3]) and d[3] == lg[3], d
        else:
            assert re.fullmatch(r"[0-9A-F]+/[0-9A-F]+", d[4]) and d[4] == lg[4], d
