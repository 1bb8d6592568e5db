"""roles/snapshots.py: which hosts take snapshots, the files it writes (sanoid's config and the
unit whose command line the host script parses back), the data's validation, and the first
snapshot's operation against fact stubs."""

import shlex

import pytest
from pyinfra.facts.files import FileContents

from facts.zfs import ZfsSnapshots
from host_scripts import db_snapshot
from model.hostdata import HostConfig
from model.secrets import Secrets
from operations import snapshots as snapshot_ops
from roles import snapshots
from validation import validate

from tests.unit.fact_stubs import run_operation


def configs(fleet, **overrides):
    for data in fleet.values():
        data.update(overrides)
    return {name: HostConfig.from_data(name, data) for name, data in fleet.items()}


def takers(cfgs):
    members = list(cfgs.values())
    return {
        name
        for name, c in cfgs.items()
        if snapshots.takes_snapshots(c, [m for m in members if m.engine == c.engine])
    }


def test_replicas_take_them_by_default(fleet):
    assert takers(configs(fleet)) == {"db2", "pg2"}


def test_a_primary_without_replicas_takes_them(fleet):
    del fleet["db2"]
    assert takers(configs(fleet)) == {"db1", "pg2"}


@pytest.mark.parametrize(
    "snapshot_on, expected",
    [("primary", {"db1", "pg1"}), ("every_host", {"db1", "db2", "pg1", "pg2"}), ("none", set())],
)
def test_the_data_chooses_the_hosts(fleet, snapshot_on, expected):
    assert takers(configs(fleet, snapshot_on=snapshot_on)) == expected


def test_every_host_of_a_group_gets_the_same_files_its_role_decided_at_each_run(fleet):
    cfgs = configs(fleet)
    members = [c for c in cfgs.values() if c.engine == "mariadb"]
    replica, primary = (snapshots.files_text(cfgs[n], members) for n in ("db2", "db1"))
    assert replica.keys() == primary.keys()
    for path in replica:  # but the host's name in a comment
        assert replica[path].replace("db2", "db1") == primary[path], path
    conf = replica[snapshots.SANOID_CONF]
    assert "[dbpool/datastore/mysql]\n" in conf and "[dbpool/datastore/mysql-log]\n" in conf
    assert "\tautosnap = no\n" in conf and "\tautoprune = yes\n" in conf and "\tmonitor = no\n" in conf
    assert "\thourly = 36\n" in conf and "\tweekly = 0\n" in conf  # every kind: no sanoid default
    assert "[dbpool/datastore]\n" not in conf  # the parent's tree holds the rewrite's copies
    assert "--when replica" in replica[f"/etc/systemd/system/{snapshots.UNIT}"]
    assert "Wants=dbzfs-snapshot.service" in replica[snapshots.SANOID_DROP_IN]


def test_a_group_without_replicas_takes_them_in_any_role_and_none_takes_none(fleet):
    del fleet["db2"]
    cfg = configs(fleet)["db1"]
    assert "--when always" in snapshots.files_text(cfg, [cfg])[f"/etc/systemd/system/{snapshots.UNIT}"]
    cfgs = configs(fleet, snapshot_on="none")
    assert snapshots.UNIT_PATH not in snapshots.files_text(cfgs["db1"], [cfgs["db1"]])


def test_the_units_command_line_is_what_the_script_reads(fleet, monkeypatch, tmp_path):
    cfgs = configs(fleet)
    texts = snapshots.files_text(cfgs["pg2"], [cfgs["pg1"], cfgs["pg2"]])
    unit = texts[f"/etc/systemd/system/{snapshots.UNIT}"]
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart="))
    assert argv[:2] == ["/usr/bin/python3", snapshots.SCRIPT]
    seen = {}
    monkeypatch.setattr(db_snapshot, "run", lambda argv, timeout=120: seen.setdefault("argv", argv) and "")
    monkeypatch.setattr(
        db_snapshot, "live_role", lambda engine: seen.setdefault("engine", engine) and "replica"
    )
    monkeypatch.setattr(db_snapshot, "due", lambda keep, newest, now: seen.setdefault("keep", keep) and [])
    metrics = tmp_path / "dbzfs_snapshots.prom"
    assert argv[argv.index("--metrics") + 1] == snapshots.METRICS
    argv[argv.index("--metrics") + 1] = str(metrics)
    assert db_snapshot.main(argv[2:]) == 0
    assert "dbzfs_snapshots_taken_here 1\n" in metrics.read_text()
    assert "dbzfs_snapshots_success 1\n" in metrics.read_text()
    assert seen["engine"] == "postgresql"  # asked: --when replica
    assert seen["argv"][-1] == "dbpool/datastore/postgresql"  # what it lists: the data dataset's
    assert seen["keep"] == {"hourly": 36, "daily": 30, "monthly": 3}
    assert "--dataset dbpool/datastore/postgresql --dataset dbpool/datastore/postgresql-wal" in line
    assert "After=zfs-mount.service postgresql@17-main.service" in unit
    assert (
        "ConditionPathIsMountpoint=/datastore/postgresql\nConditionPathIsMountpoint=/datastore/postgresql-wal\n"
        in unit
    )


def problems(fleet, **data):
    fleet["db2"].update(data)
    secrets = Secrets({"replication_password": "r" * 24}, "test")
    return {(p.host, p.key): p for p in validate(fleet, secrets)}


def test_bad_snapshot_data_is_named_with_host_key_and_fix(fleet):
    found = problems(fleet, snapshot_on="replicas")
    assert "not a choice" in found[("db2", "snapshot_on")].message
    found = problems(fleet, snapshot_retention={"mariadb": {"houry": 36, "daily": -1}})
    assert "did you mean 'hourly'" in found[("db2", "snapshot_retention['mariadb']['houry']")].fix
    assert "not a count" in found[("db2", "snapshot_retention['mariadb']['daily']")].message
    found = problems(fleet, snapshot_retention={"mariadb": {"hourly": 0}})
    assert "keeps no snapshot" in found[("db2", "snapshot_retention['mariadb']")].message
    assert problems(fleet, snapshot_on="none", snapshot_retention={"mariadb": {}}) == {}


def test_the_first_snapshot_is_taken_once():
    op = snapshot_ops.first_taken
    commands, host = run_operation(
        op, {ZfsSnapshots: []}, dataset="dbpool/datastore/mysql", unit=snapshots.UNIT
    )
    assert commands == [
        "systemctl start dbzfs-snapshot.service && journalctl -o cat -n 3 -u dbzfs-snapshot.service"
    ]
    seed_only = [{"name": "dbpool/datastore/mysql@dbzfs-seed-full", "creation": 1}]
    commands, host = run_operation(
        op, {ZfsSnapshots: seed_only}, dataset="dbpool/datastore/mysql", unit=snapshots.UNIT
    )
    assert len(commands) == 1  # another tool's snapshot is not ours
    taken = seed_only + [
        {"name": "dbpool/datastore/mysql@autosnap_2026-12-04_22:00:03_hourly", "creation": 2}
    ]
    commands, host = run_operation(
        op, {ZfsSnapshots: taken}, dataset="dbpool/datastore/mysql", unit=snapshots.UNIT
    )
    assert commands == [] and "autosnap_2026-12-04_22:00:03_hourly" in host.noops[0]


def test_the_snapshot_fact_reads_zfs_list():
    fact = ZfsSnapshots()
    assert fact.process(["dbpool/datastore/mysql@a\t1796421603", "garbage"]) == [
        {"name": "dbpool/datastore/mysql@a", "creation": 1796421603}
    ]
    assert "-d 1 dbpool/datastore/mysql" in str(fact.command("dbpool/datastore/mysql"))


def test_the_script_takes_none_in_the_other_role_and_says_so_to_the_alerts(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(db_snapshot, "live_role", lambda engine: "primary")
    monkeypatch.setattr(db_snapshot, "run", lambda argv, timeout=120: pytest.fail(f"ran {argv}"))
    metrics = tmp_path / "m.prom"
    argv = ["--engine", "mariadb", "--when", "replica", "--dataset", "p/d", "--keep", "hourly=1"]
    assert db_snapshot.main([*argv, "--metrics", str(metrics)]) == 0
    assert "none taken here: the server is a primary (--when replica)" in capsys.readouterr().out
    assert "dbzfs_snapshots_taken_here 0\n" in metrics.read_text()


def test_a_failed_run_says_so_to_the_alerts(monkeypatch, tmp_path):
    def fails(engine):
        raise db_snapshot.SnapshotError("the server did not answer")

    monkeypatch.setattr(db_snapshot, "live_role", fails)
    metrics = tmp_path / "m.prom"
    argv = ["--engine", "mariadb", "--when", "replica", "--dataset", "p/d", "--keep", "hourly=1"]
    assert db_snapshot.main([*argv, "--metrics", str(metrics)]) == 1
    text = metrics.read_text()
    assert "dbzfs_snapshots_success 0\n" in text and "dbzfs_snapshots_taken_here 1\n" in text
    assert "# TYPE dbzfs_snapshots_success gauge\n" in text


def test_the_jobs_first_run_is_once_per_host():
    op, first = (
        snapshot_ops.first_run,
        ["systemctl start dbzfs-snapshot.service && journalctl -o cat -n 3 -u dbzfs-snapshot.service"],
    )
    assert run_operation(op, {FileContents: None}, unit=snapshots.UNIT, marker=snapshots.METRICS)[0] == first
    # A run before the server answered (the timer's, during the first converge) does not count.
    failed = ["dbzfs_snapshots_taken_here 1", "dbzfs_snapshots_success 0"]
    assert (
        run_operation(op, {FileContents: failed}, unit=snapshots.UNIT, marker=snapshots.METRICS)[0] == first
    )
    # It has run here: whatever the role now (a switchover since), the converge leaves it to the timer.
    ran = ["dbzfs_snapshots_taken_here 0", "dbzfs_snapshots_success 1"]
    commands, host = run_operation(op, {FileContents: ran}, unit=snapshots.UNIT, marker=snapshots.METRICS)
    assert commands == [] and snapshots.METRICS in host.noops[0]


def test_a_switchover_runs_the_job_where_it_is_installed():
    commands, _ = run_operation(snapshot_ops.job_run, {}, unit=snapshots.UNIT)
    assert commands == [
        "if systemctl cat dbzfs-snapshot.service >/dev/null 2>&1; then systemctl start dbzfs-snapshot.service"
        " && journalctl -o cat -n 3 -u dbzfs-snapshot.service ; fi"
    ]


def test_none_leaves_sanoid_pruning_and_no_job(fleet):
    cfgs = configs(fleet, snapshot_on="none")
    assert list(snapshots.files_text(cfgs["db2"], list(cfgs.values()))) == [snapshots.SANOID_CONF]
