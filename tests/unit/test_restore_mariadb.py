"""day2/restore_mariadb.py (runbooks/restore.py for a MariaDB host): every problem the inventory
and the parameters show (plan_problems) and those the backup host's copies and binlogs, the target
and the primary show (live_problems), the choice of the copy, the report; the operations
(operations/mariadb_restore.py) against fact stubs; the receive wrapper; every step on the
right host; and the replay's exact commands against real mariadbd servers."""

import inspect
import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyinfra.api import HiddenValue, OperationError
from pyinfra.api.operation import OperationMeta

from day2 import kit, restore, restore_mariadb as rm, restore_run
from facts.mariadb import BinlogFiles, MariadbLiveRole
from facts.zfs import ZfsDatasetProperties, ZfsSnapshotPositions
from model.hostdata import HostConfig
from operations import mariadb_restore as ops, runtime
from roles import engine, mariadb

from tests.unit.conftest import backup_data
from tests.unit.fact_stubs import FakeHost
from tests.unit.test_binlog_stream_server import SCHEMA, Server, rows
from tests.unit.test_seeding import PASSWORD, PRIVATE_KEY, bash_syntax, props, run, zfs

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
EVERYONE = {"db1", "db2", "pg1", "pg2", "backup1"}
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOneTimeKey dbzfs-restore:db2:20261206T120000Z"
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfTheTarget root@db2"
COPIES = "dbpool/backup/mariadb"
DATA, LOG = "dbpool/datastore/mysql", "dbpool/datastore/mysql-log"
STREAM = "/var/lib/dbzfs-binlogs/mariadb/db1"


def at(text):
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


SNAP_1 = "autosnap_2026-12-05_06:00:03_hourly"
SNAP_2 = "autosnap_2026-12-05_07:00:02_hourly"
SNAP_3 = "autosnap_2026-12-05_08:00:04_hourly"


@pytest.fixture
def configs(fleet):
    hosts = {**fleet, "backup1": backup_data()}
    return {name: HostConfig.from_data(name, data) for name, data in hosts.items()}


def planned(configs, active=EVERYONE, **params):
    return rm.plan_problems(configs, params, set(active), NOW)


def plan_of(configs, **params):
    plan, problems = planned(configs, **params)
    assert problems == [], problems
    return plan


def only(problems):
    assert len(problems) == 1, problems
    return problems[0]


def parts(p):
    return p.host, p.key, p.value


# --- plan_problems -------------------------------------------------------------------------------


def test_a_standalone_restore_to_a_moment_names_everything_it_uses(configs):
    plan = plan_of(configs, host="db2", mode="standalone", time="2026-12-05 08:10:00+02", wipe=True)
    assert (plan.target.name, plan.backup.name, plan.primary.name, plan.wipe) == (
        "db2",
        "backup1",
        "db1",
        True,
    )
    assert plan.time == datetime(2026, 12, 5, 6, 10, tzinfo=UTC) and plan.replays
    assert [m.name for m in plan.members] == ["db1", "db2"]
    assert plan.copies_root == COPIES and plan.stream_directory == STREAM
    assert (plan.binlogs_dataset, plan.binlogs_snapshot) == ("dbpool/binlogs", "dbzfs-restore-db2")
    assert plan.received == "dbpool/dbzfs-restore-binlogs"
    assert plan.received_directory == "/var/lib/dbzfs-restore-binlogs/mariadb/db1"
    assert plan.identity == "standalone to 2026-12-05 06:10:00 UTC"
    assert plan.marker == "dbzfs-restore:db2:"


def test_a_replica_restore(configs):
    plan = plan_of(configs, host="db2", mode="replica")
    assert plan.identity == "replica" and not plan.replays and plan.backup_name is None


@pytest.mark.parametrize(
    "params, key, value, message",
    [
        ({"host": "db9"}, "host", "db9", "not a MariaDB host of the inventory"),
        ({"host": "db2", "mode": "copy"}, "mode", "copy", "not a way to restore"),
        ({"host": "db2", "mode": "standalone", "time": "2026-12-05 06:10"}, "time", None, "no UTC offset"),
        (
            {"host": "db2", "mode": "standalone", "time": "2026-12-06 12:00:01+00"},
            "time",
            None,
            "is in the future (now 2026-12-06 12:00:00 UTC)",
        ),
        (
            {"host": "db2", "mode": "replica", "time": "2026-12-05 06:10:00+00"},
            "time",
            None,
            "replicates to now",
        ),
        (
            {"host": "db2", "mode": "standalone", "time": "2026-12-05 06:10:00+00", "backup": SNAP_1},
            "backup",
            SNAP_1,
            "given with a time",
        ),
        ({"host": "db1", "mode": "standalone"}, "host", "db1", "is the group's declared primary"),
        ({"host": "db1", "mode": "replica"}, "host", "db1", "is the group's declared primary"),
    ],
)
def test_the_plan_refuses_what_the_parameters_and_inventory_do_not_allow(
    configs, params, key, value, message
):
    p = only(planned(configs, **params)[1])
    assert p.key == key and message in p.message and (value is None or p.value == value)
    assert p.host in (params["host"], None)


def test_without_a_backup_host_there_is_no_copy(configs):
    del configs["backup1"]
    p = only(planned(configs, active=EVERYONE - {"backup1"}, host="db2", mode="replica")[1])
    assert parts(p) == ("db2", "inventory", None) and 'role = "backup"' in p.fix


def test_a_replica_restore_needs_the_target_declared_a_replica_of_the_primary(configs, fleet):
    fleet["db2"]["primary"] = "db9"
    configs["db2"] = HostConfig.from_data("db2", fleet["db2"])
    p = only(planned(configs, host="db2", mode="replica")[1])
    assert parts(p) == ("db2", "role", "replica") and "mode=standalone" in p.fix
    assert planned(configs, host="db2", mode="standalone")[1] == []


@pytest.mark.parametrize(
    "mode, left_out, named",
    [
        ("replica", {"db2"}, "db2"),
        ("replica", {"backup1"}, "backup1"),
        ("replica", {"db1"}, "db1"),
        ("standalone", {"db2", "backup1"}, "db2, backup1"),
    ],
)
def test_limit_must_include_the_target_the_backup_host_and_a_replica_s_primary(
    configs, mode, left_out, named
):
    p = only(planned(configs, active=EVERYONE - left_out, host="db2", mode=mode)[1])
    assert p.key == "--limit" and p.message == f"leaves out {named}"
    assert planned(configs, active={"db2", "backup1"}, host="db2", mode="standalone")[1] == []


def test_every_plan_problem_at_once(configs):
    plan, problems = planned(
        configs,
        active={"db2"},
        host="db2",
        mode="replica",
        time="2030-01-01 00:00:00+00",
        backup="x",
        wipe=True,
    )
    assert plan is None
    assert [p.key for p in problems] == ["time", "time", "backup", "--limit"]


# --- the copy --------------------------------------------------------------------------------------


def snapshot(member, role, snap, when, gtid="0-1-10"):
    return {"name": f"{COPIES}/{member}/{role}@{snap}", "creation": int(at(when)), "gtid": gtid}


SNAPSHOTS = [
    snapshot("db2", "data", SNAP_1, "2026-12-05 06:00:03", "0-1-10"),
    snapshot("db2", "log", SNAP_1, "2026-12-05 06:00:03", "0-1-10"),
    snapshot("db2", "data", SNAP_2, "2026-12-05 07:00:02", "0-1-20"),
    snapshot("db2", "log", SNAP_2, "2026-12-05 07:00:02", "0-1-20"),
    snapshot("db1", "data", SNAP_3, "2026-12-05 08:00:04", "0-1-30"),  # its log's is not pulled yet
    snapshot("db2", "data", "syncoid_backup1_x", "2026-12-05 08:30:00", None),  # no position
    {
        "name": "dbpool/backup/mariadb/db2/log@syncoid_backup1_x",
        "creation": int(at("2026-12-05 08:30:00")),
        "gtid": None,
    },
]


def test_the_copies_are_the_snapshots_on_both_datasets_with_a_position(configs):
    plan = plan_of(configs, host="db2", mode="standalone")
    found = rm.copies(plan, SNAPSHOTS)
    assert [(c.member, c.snapshot, c.gtid) for c in found] == [
        ("db2", SNAP_1, "0-1-10"),
        ("db2", SNAP_2, "0-1-20"),
    ]
    assert found[0].data == f"{COPIES}/db2/data" and found[0].log == f"{COPIES}/db2/log"


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"time": "2026-12-05 06:59:59+00"}, SNAP_1),
        ({"time": "2026-12-05 07:00:02+00"}, SNAP_2),
        ({"time": "2026-12-05 09:00:00+00"}, SNAP_2),
        ({"backup": SNAP_1}, SNAP_1),
        ({}, SNAP_2),
    ],
)
def test_the_copy_before_the_moment_the_named_one_or_the_newest(configs, params, expected):
    plan = plan_of(configs, host="db2", mode="standalone", **params)
    assert rm.chosen(plan, rm.copies(plan, SNAPSHOTS), {}).snapshot == expected


def test_a_re_run_keeps_the_copy_an_earlier_run_put_in_place(configs):
    plan = plan_of(configs, host="db2", mode="replica")
    in_place = {f"{DATA}@{SNAP_1}": props(**{"dbzfs:restore": "replica"})}
    assert rm.chosen(plan, rm.copies(plan, SNAPSHOTS), in_place).snapshot == SNAP_1
    other = {f"{DATA}@{SNAP_1}": props(**{"dbzfs:restore": "standalone"})}
    assert rm.chosen(plan, rm.copies(plan, SNAPSHOTS), other).snapshot == SNAP_2


# --- live_problems -------------------------------------------------------------------------------

EMPTY_DIR = {
    "installed": True,
    "active": "inactive",
    "uid": "105",
    "gid": "111",
    "host_key": HOST_KEY,
    "pg_version": "",
    "directories": ["mysql", "performance_schema", "sys"],
}
HOLDS_DB = {**EMPTY_DIR, "active": "active", "directories": ["app", "mysql", "sys"]}
REPLICA_LIVE = {
    "read_only": "1",
    "Master_Host": "10.99.0.11",
    "Slave_IO_Running": "Yes",
    "Slave_SQL_Running": "Yes",
}
PRIMARY_LIVE = {"read_only": "0"}
GIB = 1024**3


def target_zfs(available=100 * GIB, **extra):
    table = {"dbpool/datastore": props(available=available, used=0)}
    for name in (DATA, LOG):
        table[name] = props(used=GIB, mounted="yes")
    table.update(extra)
    return table


BACKUP_ZFS = {
    f"{COPIES}/db2/data": props(referenced=2 * GIB, encryption="off"),
    f"{COPIES}/db2/log": props(referenced=GIB, encryption="off"),
    "dbpool/binlogs": props(referenced=GIB // 2),
}
BINLOGS = [
    {"name": "mysql-bin.000001", "size": 100, "mtime": at("2026-12-05 05:00:00")},
    {"name": "mysql-bin.000002", "size": 100, "mtime": at("2026-12-06 11:59:00")},
]


def found_for(
    snapshots=SNAPSHOTS, binlogs=BINLOGS, state=EMPTY_DIR, zfs_=None, live=None, primary=PRIMARY_LIVE
):
    return {
        "backup": {"snapshots": snapshots, "zfs": BACKUP_ZFS, "binlogs": binlogs},
        "target": {"state": state, "zfs": target_zfs() if zfs_ is None else zfs_, "live": live},
        "primary": {"live": primary},
    }


def live(configs, found=None, **params):
    plan = plan_of(configs, host="db2", **params)
    return rm.live_problems(plan, found or found_for())


def test_a_healthy_restore_passes_and_carries_its_copy(configs):
    plan, problems = live(configs, mode="standalone", time="2026-12-05 06:10:00+00")
    assert problems == [] and plan.copy.snapshot == SNAP_1 and plan.copy.gtid == "0-1-10"
    assert plan.seeded == f"{DATA}@{SNAP_1}"
    assert [(d.source, d.seed, d.live, d.aside) for d in plan.datasets] == [
        (f"{COPIES}/db2/data", f"{DATA}-seed", DATA, f"{DATA}-replaced"),
        (f"{COPIES}/db2/log", f"{LOG}-seed", LOG, f"{LOG}-replaced"),
    ]
    _, problems = live(configs, mode="replica", found=found_for(live=REPLICA_LIVE))
    assert problems == []


def test_no_copy_of_the_group_is_a_problem(configs):
    p = only(live(configs, found_for(snapshots=[]), mode="replica")[1])
    assert parts(p) == ("backup1", "copies", COPIES) and "pull" in p.fix


def test_an_unknown_copy_name_is_a_problem(configs):
    p = only(live(configs, mode="standalone", backup="autosnap_nope")[1])
    assert parts(p) == ("backup1", "backup", "autosnap_nope") and SNAP_2 in p.fix


def test_a_moment_before_the_oldest_copy_is_a_problem(configs):
    p = only(live(configs, mode="standalone", time="2026-12-05 06:00:02+00")[1])
    assert parts(p) == ("backup1", "time", "2026-12-05 06:00:02 UTC")
    assert p.message == f"is before the oldest copy (db2@{SNAP_1}, 2026-12-05 06:00:03 UTC)"


def test_a_moment_needs_binlogs_that_reach_it(configs):
    p = only(live(configs, found_for(binlogs=[]), mode="standalone", time="2026-12-05 06:10:00+00")[1])
    assert parts(p) == ("backup1", "binlogs", STREAM) and "holds no binlog file" in p.message
    lagging = [BINLOGS[0]]
    p = only(live(configs, found_for(binlogs=lagging), mode="standalone", time="2026-12-05 06:10:00+00")[1])
    assert parts(p) == ("backup1", "binlogs", STREAM)
    assert "mysql-bin.000001, was last written 2026-12-05 05:00:00 UTC" in p.message
    assert "BinlogStreamFailing" in p.message and "dbzfs-binlog@mariadb.service" in p.fix
    # without a moment, no binlog is needed
    assert live(configs, found_for(binlogs=[]), mode="standalone")[1] == []


def test_a_live_primary_is_never_restored_over(configs):
    p = only(live(configs, found_for(live=PRIMARY_LIVE, state=HOLDS_DB), mode="standalone", wipe=True)[1])
    assert parts(p) == ("db2", "server", "primary") and "switch over" in p.fix


def test_a_standalone_copy_restored_before_is_replaced_with_wipe(configs):
    standalone = {"read_only": "1"}
    found = found_for(live=standalone, state=HOLDS_DB)
    assert live(configs, found, mode="replica", wipe=True)[1] == []
    p = only(live(configs, found, mode="replica")[1])
    assert parts(p) == ("db2", "wipe", None)
    assert p.message == "its datadir holds schemas of its own (app) (MariaDB running)"
    assert p.fix.startswith("--data wipe=yes")


def test_the_target_must_be_converged(configs):
    state = {**EMPTY_DIR, "installed": False, "host_key": ""}
    zfs_ = {k: v for k, v in target_zfs().items() if k != "dbpool/datastore"}
    problems = live(configs, found_for(state=state, zfs_=zfs_), mode="replica")[1]
    assert [(p.key, p.value) for p in problems] == [
        ("host", "db2"),
        ("host key", "/etc/ssh/ssh_host_ed25519_key.pub"),
        ("zfs_datasets", "dbpool/datastore"),
    ]


def test_the_target_s_pool_needs_room_for_the_copy(configs):
    # data 2 GiB + log 1 GiB + binlogs 0.5 GiB, plus 10 %
    p = only(
        live(
            configs,
            found_for(zfs_=target_zfs(available=3 * GIB)),
            mode="standalone",
            time="2026-12-05 06:10:00+00",
        )[1]
    )
    assert parts(p) == ("db2", "zpool_name", "dbpool") and "the copy needs 3.9 GiB" in p.message
    # without the binlogs: 3.3 GiB
    assert live(configs, found_for(zfs_=target_zfs(available=int(3.4 * GIB))), mode="standalone")[1] == []


def test_names_in_the_way(configs):
    table = target_zfs(
        **{
            f"{DATA}-seed": props(used=0, receive_resume_token="-"),
            f"{LOG}-replaced": props(used=0),
            "dbpool/dbzfs-restore-binlogs": props(used=0),
        }
    )
    problems = live(configs, found_for(zfs_=table), mode="standalone", time="2026-12-05 06:10:00+00")[1]
    assert [(p.key, p.value) for p in problems] == [
        ("dataset", f"{DATA}-seed"),
        ("dataset", f"{LOG}-replaced"),
        ("dataset", "dbpool/dbzfs-restore-binlogs"),
    ]
    assert problems[0].fix == f"zfs destroy -r {DATA}-seed (on db2)"


def test_a_re_run_resumes_and_another_restores_copy_in_place_is_replaced_with_wipe(configs):
    marked = {
        "dbzfs:restore": "standalone to 2026-12-05 06:10:00 UTC",
        "dbzfs:replayed": "reached GTID 0-1-12",
    }
    table = target_zfs(**{f"{DATA}@{SNAP_1}": props(**marked)})
    plan, problems = live(
        configs, found_for(zfs_=table, state=HOLDS_DB), mode="standalone", time="2026-12-05 06:10:00+00"
    )
    assert problems == [] and plan.replayed and not plan.replays  # no wipe needed: it is this restore's
    p = only(
        live(
            configs, found_for(zfs_=table, state=HOLDS_DB), mode="standalone", time="2026-12-05 06:20:00+00"
        )[1]
    )
    assert parts(p) == ("db2", "wipe", None) and p.fix.startswith("--data wipe=yes")
    plan, problems = live(
        configs,
        found_for(zfs_=table, state=HOLDS_DB),
        mode="standalone",
        time="2026-12-05 06:20:00+00",
        wipe=True,
    )
    assert problems == [] and not plan.replayed and plan.replays  # replaced: another restore's


def test_the_targets_own_snapshot_of_the_copy_is_no_restore_in_place(configs):
    """A copy of the target itself: its live dataset still holds the copy's snapshot, unmarked,
    under a database that has moved on since; it is replaced (with wipe), never taken as restored."""
    table = target_zfs(**{f"{DATA}@{SNAP_1}": props(**{"dbzfs:gtid": "0-1-12"})})
    p = only(live(configs, found_for(zfs_=table, state=HOLDS_DB), mode="replica")[1])
    assert parts(p) == ("db2", "wipe", None)
    plan, problems = live(configs, found_for(zfs_=table, state=HOLDS_DB), mode="replica", wipe=True)
    assert problems == [] and not plan.replayed


def test_the_copy_s_host_must_mount_its_datasets_where_the_target_does(configs, fleet):
    fleet["db2"]["zfs_dataset_properties"] = {"datastore/mysql-log": {"mountpoint": "/srv/mysql-log"}}
    configs["db2"] = HostConfig.from_data("db2", fleet["db2"])
    found = found_for(
        snapshots=[snapshot("db1", r, SNAP_3, "2026-12-05 08:00:04", "0-1-30") for r in ("data", "log")]
    )
    p = only(live(configs, found, mode="standalone")[1])
    assert (
        parts(p) == ("db2", "mountpoint", "/srv/mysql-log")
        and "db1, is mounted at /datastore/mysql-log" in p.message
    )


def test_a_replica_s_primary_must_answer_as_one(configs):
    p = only(live(configs, found_for(primary=None), mode="replica")[1])
    assert parts(p) == ("db1", "host", "db1")
    p = only(live(configs, found_for(primary=REPLICA_LIVE), mode="replica")[1])
    assert parts(p) == ("db1", "role", "primary")
    assert live(configs, found_for(primary=None), mode="standalone")[1] == []


# --- the facts ----------------------------------------------------------------------------------


def test_the_copies_fact_reads_creation_and_position():
    fact = ZfsSnapshotPositions()
    assert str(fact.command(datasets=[COPIES])) == (
        f"zfs list -Hp -t snapshot -o name,creation,dbzfs:gtid -s creation -r {COPIES} 2>/dev/null || true"
    )
    assert fact.process(
        [f"{COPIES}/db2/data@{SNAP_1}\t1796450403\t0-1-10", f"{COPIES}/db2/data@s\t1796450404\t-", "junk"]
    ) == [
        {"name": f"{COPIES}/db2/data@{SNAP_1}", "creation": 1796450403, "gtid": "0-1-10"},
        {"name": f"{COPIES}/db2/data@s", "creation": 1796450404, "gtid": None},
    ]


def test_the_binlog_files_fact_orders_by_number_and_skips_the_index():
    fact = BinlogFiles()
    assert "find /var/lib/dbzfs-binlogs/mariadb/db1 -maxdepth 1 -type f" in str(
        fact.command(directory=STREAM)
    )
    assert fact.process(
        [
            "mysql-bin.1000000\t5\t1796450403.5",
            "mysql-bin.000002\t4\t1796450402",
            "mysql-bin.index\t3\t1796450401",
            "mysql-bin.999999\t2\t1796450400",
        ]
    ) == [
        {"name": "mysql-bin.000002", "size": 4, "mtime": 1796450402.0},
        {"name": "mysql-bin.999999", "size": 2, "mtime": 1796450400.0},
        {"name": "mysql-bin.1000000", "size": 5, "mtime": 1796450403.5},
    ]


# --- the replay's commands ------------------------------------------------------------------------

MOMENT = datetime(2026, 12, 5, 6, 10, 0, 250000, tzinfo=UTC)
RECEIVED = "/var/lib/dbzfs-restore-binlogs/mariadb/db1"


def test_the_replay_decodes_in_utc_from_the_copy_s_gtid_to_the_moment_s_second():
    command = ops.replay_command(RECEIVED, "0-1-10,1-2-3", MOMENT)
    assert (
        "TZ=UTC mariadb-binlog --start-position=0-1-10,1-2-3 --stop-datetime='2026-12-05 06:10:00' "
        "$files | mariadb" in command
    )
    assert f"cd {RECEIVED} && ls -1 | grep -E '^[A-Za-z0-9_.-]+\\.[0-9]{{6,}}$'" in command
    bash_syntax(command)
    resumed = ops.replay_command(RECEIVED, "0-1-10", MOMENT, resume=True)
    assert "--start-position=\"$(mariadb -NBe 'SELECT @@global.gtid_binlog_pos')\"" in resumed
    assert "mariadb-binlog --stop-datetime" in ops.replay_command(RECEIVED, "empty", MOMENT)
    moment_elsewhere = datetime.fromisoformat("2026-12-05 08:10:00+02:00")
    assert "--stop-datetime='2026-12-05 06:10:00'" in ops.replay_command(RECEIVED, "0-1-10", moment_elsewhere)
    bash_syntax(ops.reached_command(RECEIVED, "0-1-10", MOMENT))


def test_the_files_are_replayed_in_their_numbers_order(tmp_path):
    for name in ["mysql-bin.000010", "mysql-bin.000002", "mysql-bin.1000000", "mysql-bin.index", "x.txt"]:
        (tmp_path / name).write_text("")
    script = f"echo {ops.binlog_files(str(tmp_path))}"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(tmp_path / n) for n in ["mysql-bin.000002", "mysql-bin.000010", "mysql-bin.1000000"]]


# --- the operations ----------------------------------------------------------------------------------


@pytest.fixture
def executing(monkeypatch):
    state = SimpleNamespace(is_executing=True, failed_hosts=set())
    monkeypatch.setattr(ops, "state", state)
    return state


@pytest.fixture
def others(monkeypatch):
    hosts: dict[str, FakeHost] = {}
    monkeypatch.setattr(ops, "inventory", SimpleNamespace(get_host=lambda name: hosts[name]))
    return hosts


SEEDED = f"{DATA}@{SNAP_1}"
HELD = "dbpool/dbzfs-restore-binlogs@dbzfs-restore-db2"
SNAPSHOT_ARGS = {
    "dataset": "dbpool/binlogs",
    "snapshot": "dbzfs-restore-db2",
    "target": "db2",
    "received": HELD,
}


def test_the_binlogs_are_snapshotted_once_until_the_target_holds_them(executing, others):
    others["db2"] = FakeHost({ZfsDatasetProperties: zfs({})})
    commands, _, _ = run(ops.binlogs_snapshot, {ZfsDatasetProperties: zfs({})}, **SNAPSHOT_ARGS)
    assert commands == ["zfs snapshot dbpool/binlogs@dbzfs-restore-db2"]
    taken = {ZfsDatasetProperties: zfs({"dbpool/binlogs@dbzfs-restore-db2": props()})}
    commands, _, host = run(ops.binlogs_snapshot, taken, **SNAPSHOT_ARGS)
    assert commands == [] and host.noops == ["dbpool/binlogs@dbzfs-restore-db2 exists"]
    others["db2"] = FakeHost({ZfsDatasetProperties: zfs({HELD: props()})})
    commands, _, host = run(ops.binlogs_snapshot, {ZfsDatasetProperties: zfs({})}, **SNAPSHOT_ARGS)
    assert commands == [] and host.noops == [f"db2 holds {HELD}"]


def test_the_received_binlogs_are_mounted_read_only(executing):
    ds, mount = "dbpool/dbzfs-restore-binlogs", "/var/lib/dbzfs-restore-binlogs"
    args = {"dataset": ds, "mountpoint": mount}
    received = {ZfsDatasetProperties: zfs({ds: props(readonly="off", mountpoint="/dbpool/x", mounted="no")})}
    commands, _, _ = run(ops.binlogs_mounted, received, **args)
    assert commands == [
        f"zfs set readonly=on mountpoint={mount} {ds}",
        f"zfs get -H -o value mounted {ds} | grep -qx yes || zfs mount {ds}",
    ]
    done = {ZfsDatasetProperties: zfs({ds: props(readonly="on", mountpoint=mount, mounted="yes")})}
    commands, _, host = run(ops.binlogs_mounted, done, **args)
    assert commands == [] and host.noops
    with pytest.raises(OperationError, match="was not received"):
        run(ops.binlogs_mounted, {ZfsDatasetProperties: zfs({})}, **args)


def test_temporary_datasets_destroyed_and_the_copy_marked(executing):
    ds = "dbpool/dbzfs-restore-binlogs"
    commands, _, _ = run(ops.dataset_destroyed, {ZfsDatasetProperties: zfs({ds: props()})}, dataset=ds)
    assert commands == [f"zfs destroy -r {ds}"]
    commands, _, host = run(ops.dataset_destroyed, {ZfsDatasetProperties: zfs({})}, dataset=ds)
    assert commands == [] and host.noops
    commands, _, _ = run(
        ops.marked, {ZfsDatasetProperties: zfs({SEEDED: props()})}, snapshot=SEEDED, value="replica"
    )
    assert commands == [f"zfs set dbzfs:restore=replica {SEEDED}"]
    marked = {ZfsDatasetProperties: zfs({SEEDED: props(**{"dbzfs:restore": "replica"})})}
    assert run(ops.marked, marked, snapshot=SEEDED, value="replica")[0] == []


STANDALONE_ARGS = {
    "datadir": "/datastore/mysql",
    "relay_log": "/datastore/mysql-log/relay/relay-bin",
    "seeded": SEEDED,
}


def test_a_standalone_server_starts_without_the_copy_s_replication(executing):
    facts = {ZfsDatasetProperties: zfs({SEEDED: props()}), MariadbLiveRole: None}
    commands, _, _ = run(ops.standalone, facts, **STANDALONE_ARGS)
    assert commands == [
        "rm -f /datastore/mysql/master.info /datastore/mysql/relay-log.info "
        "/datastore/mysql/multi-master.info /datastore/mysql/master-*.info "
        "/datastore/mysql/relay-log-*.info /datastore/mysql-log/relay/relay-bin.*",
        "systemctl start mariadb.service",
        "mariadb -e 'STOP SLAVE; RESET SLAVE ALL'",
    ]
    facts[MariadbLiveRole] = {"read_only": "1"}
    commands, _, host = run(ops.standalone, facts, **STANDALONE_ARGS)
    assert commands == [] and host.noops == ["runs on its own, replicating from no one"]
    facts[MariadbLiveRole] = {"read_only": "1", "Master_Host": "10.99.0.11"}
    with pytest.raises(OperationError, match="replicates from 10.99.0.11"):
        run(ops.standalone, facts, **STANDALONE_ARGS)
    facts[ZfsDatasetProperties] = zfs({})
    with pytest.raises(OperationError, match="the copy is not in place"):
        run(ops.standalone, facts, **STANDALONE_ARGS)


REPLAY_ARGS = {"directory": RECEIVED, "seeded": SEEDED, "moment": MOMENT}


def test_the_replay_is_marked_started_then_done_and_never_run_twice(executing):
    facts = {ZfsDatasetProperties: zfs({SEEDED: props(**{"dbzfs:gtid": "0-1-10"})})}
    commands, _, _ = run(ops.replayed, facts, **REPLAY_ARGS)
    mark, replay, reached = commands
    assert mark == f"zfs set dbzfs:replayed=started {SEEDED}"
    assert replay == ops.replay_command(RECEIVED, "0-1-10", MOMENT)
    assert reached.startswith(f'out=$({ops.reached_command(RECEIVED, "0-1-10", MOMENT)}) && echo "$out" &&')
    assert reached.endswith(f'zfs set "dbzfs:replayed=${{out#dbzfs-restore: }}" {SEEDED}')
    for command in commands:
        bash_syntax(command)
    started = {
        ZfsDatasetProperties: zfs({SEEDED: props(**{"dbzfs:gtid": "0-1-10", "dbzfs:replayed": "started"})})
    }
    assert run(ops.replayed, started, **REPLAY_ARGS)[0][1] == ops.replay_command(
        RECEIVED, "0-1-10", MOMENT, resume=True
    )
    done = {
        ZfsDatasetProperties: zfs({SEEDED: props(**{"dbzfs:gtid": "0-1-10", "dbzfs:replayed": "reached x"})})
    }
    commands, _, host = run(ops.replayed, done, **REPLAY_ARGS)
    assert commands == [] and host.noops == ["replayed in an earlier run: reached x"]
    with pytest.raises(OperationError, match="holds no GTID position"):
        run(ops.replayed, {ZfsDatasetProperties: zfs({SEEDED: props()})}, **REPLAY_ARGS)
    executing.is_executing = False  # --dry: planned before the copy is there
    assert (
        "--start-position='<the copy'"
        in run(ops.replayed, {ZfsDatasetProperties: zfs({})}, **REPLAY_ARGS)[0][1]
    )


# --- the wrapper ---------------------------------------------------------------------------------------


def test_the_wrapper_allows_only_the_restore_s_datasets(configs, tmp_path):
    plan, _ = live(configs, mode="standalone", time="2026-12-05 06:10:00+00")
    text = rm.wrapper_text(plan)
    bash_syntax(text)
    assert f"allowed=( {DATA}-seed {LOG}-seed dbpool/dbzfs-restore-binlogs )" in text
    replica, _ = live(configs, mode="replica", found=found_for(live=REPLICA_LIVE))
    assert f"allowed=( {DATA}-seed {LOG}-seed )" in rm.wrapper_text(replica)
    script = tmp_path / "wrapper"
    script.write_text(text)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "zfs").write_text('#!/bin/bash\necho "zfs $*"\n')
    (stubs / "zfs").chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"}
    for request, ok in [
        ("zfs recv -s -u dbpool/dbzfs-restore-binlogs", True),
        (f"zfs recv -s -u {DATA}-seed", True),
        (f"zfs recv -s -u {DATA}", False),
        ("zfs recv -s -u dbpool/binlogs", False),
        ("zfs destroy -r dbpool/dbzfs-restore-binlogs", False),
    ]:
        result = subprocess.run(
            ["bash", str(script)],
            env={**env, "SSH_ORIGINAL_COMMAND": request},
            capture_output=True,
            text=True,
        )
        assert (result.returncode == 0) == ok, (request, result.stderr)


# --- the report ----------------------------------------------------------------------------------------


def test_the_report_of_a_point_in_time_restore(configs):
    plan, _ = live(configs, mode="standalone", time="2026-12-05 06:10:00+00", wipe=True)
    sent = [
        f"dbzfs-seed: sent {COPIES}/db2/data@{SNAP_1} 3145728 bytes in 1500 ms",
        f"dbzfs-seed: sent {COPIES}/db2/log@{SNAP_1} 1048576 bytes in 500 ms",
        "dbzfs-seed: sent dbpool/binlogs@dbzfs-restore-db2 1048576 bytes in 500 ms",
    ]
    replay = ["dbzfs-restore: reached GTID 0-1-12 at 2026-12-05 06:09:59 UTC"]
    assert rm.report_lines(plan, sent, replay, "0:01:02") == [
        "==> restore of db2 (standalone) from backup1's copies of mariadb: to 2026-12-05 06:10:00 UTC",
        f"    copy: db2@{SNAP_1}, taken 2026-12-05 06:00:03 UTC, at GTID 0-1-10",
        "    sent: 5242880 bytes (5.0 MiB) in 2.5 s, 3 dataset(s)",
        "    binlogs replayed: reached GTID 0-1-12 at 2026-12-05 06:09:59 UTC",
        "    took 0:01:02",
        "    db2 runs on its own (read_only ON, replicating from no one), outside its group; to put it back:",
        "      pyinfra INVENTORY runbooks/restore.py --data host=db2 --data mode=replica --data wipe=yes",
    ]


def test_the_report_of_a_replica(configs):
    plan, _ = live(configs, mode="replica", found=found_for(live=REPLICA_LIVE))
    assert rm.report_lines(plan, [], None, "3s") == [
        "==> restore of db2 (replica) from backup1's copies of mariadb: then replication",
        f"    copy: db2@{SNAP_2}, taken 2026-12-05 07:00:02 UTC, at GTID 0-1-20",
        "    sent: nothing sent in this run (received in an earlier one)",
        "    took 3s",
    ]


# --- the run: every step on the right host --------------------------------------------------------------


@pytest.fixture
def wired(monkeypatch, fleet):
    """day2.restore_run.run against a stand-in inventory: records every engine.step of one host."""
    hosts = {
        name: SimpleNamespace(name=name, data=d) for name, d in {**fleet, "backup1": backup_data()}.items()
    }

    class Inventory:
        def __iter__(self):
            return iter(hosts.values())

        def get_host(self, name):
            return hosts[name]

        def get_active_hosts(self):
            return list(hosts.values())

    current = SimpleNamespace(name=None, data=None)
    for module in (restore, restore_run, rm, engine, kit):
        monkeypatch.setattr(module, "inventory", Inventory())
    for module in (restore, rm, engine):
        monkeypatch.setattr(module, "host", current)
    monkeypatch.setattr(runtime, "_once", {})
    monkeypatch.setattr(kit, "_reported", set())
    monkeypatch.setattr(
        kit, "state", SimpleNamespace(add_callback_handler=lambda handler: reports.append(handler))
    )
    monkeypatch.setattr(
        rm, "read_hosts", lambda plan: found_for(live=REPLICA_LIVE if plan.mode == "replica" else None)
    )
    monkeypatch.setattr(rm.transfer, "one_time_key", lambda comment: (HiddenValue(PRIVATE_KEY), PUBLIC_KEY))
    monkeypatch.setattr(engine, "secret", lambda key: HiddenValue(PASSWORD))
    steps, role_files, reports = [], [], []

    def step(applies, why_not, op, **kwargs):
        steps.append((applies, op, kwargs))
        return OperationMeta(f"op{len(steps)}", None)

    monkeypatch.setattr(engine, "step", step)
    monkeypatch.setattr(mariadb, "role_config", lambda cfg: role_files.append((current.name, cfg.role)))

    def deploy(name, **arguments):
        current.name, current.data = name, hosts[name].data
        steps.clear()
        restore_run.run(arguments)
        return list(steps)

    deploy.role_files, deploy.reports = role_files, reports
    return deploy


def acting(steps):
    return [op._inner.__name__ for applies, op, _ in steps if applies]


TARGET_BEFORE = [
    "server_stopped",
    "config_file",
    "authorized_key",
    "put_in_place",
    "marked",
    "dataset",
    "dataset",
]
TARGET_BEFORE += ["mounted", "directory", "directory"]


@pytest.mark.parametrize(
    "params, on_target, on_backup",
    [
        (
            {"mode": "standalone", "time": "2026-12-05 06:10:00+00", "wipe": True},
            TARGET_BEFORE
            + ["standalone", "binlogs_mounted", "replayed", "authorized_key_removed", "released"]
            + ["dataset_destroyed"]
            + ["replaced_destroyed"],
            [
                "source_key",
                "binlogs_snapshot",
                "held",
                "send",
                "send",
                "source_key_removed",
                "released",
                "snapshots_destroyed",
            ],
        ),
        (
            {"mode": "standalone"},
            TARGET_BEFORE + ["standalone", "authorized_key_removed", "released", "replaced_destroyed"],
            ["source_key", "held", "send", "source_key_removed", "released"],
        ),
        (
            {"mode": "replica", "wipe": True},
            TARGET_BEFORE
            + [
                "mariadb_replica",
                "read_only",
                "replicates_from",
                "authorized_key_removed",
                "released",
                "replaced_destroyed",
            ]
            + ["first_taken"],
            ["source_key", "held", "send", "source_key_removed", "released"],
        ),
    ],
)
def test_the_target_and_the_backup_host_pass_every_step(wired, params, on_target, on_backup):
    arguments = {"host": "db2", **params}
    target, backup_host = wired("db2", **arguments), wired("backup1", **arguments)
    assert [op for _, op, _ in target] == [op for _, op, _ in backup_host]  # one sequence of steps
    for applies, op, kwargs in target + backup_host:
        if applies:
            inspect.signature(op._inner).bind(**{k: v for k, v in kwargs.items() if k != "name"})
    assert acting(target) == on_target
    assert acting(backup_host) == on_backup
    assert wired.role_files == [("db2", "replica")]
    assert wired("db1", **arguments) == [] and wired("pg1", **arguments) == []
    [report] = wired.reports
    assert report.plan.target.name == "db2" and report.plan.copy is not None


def test_the_sends_and_the_replay_name_the_copy_and_the_binlogs(wired):
    arguments = {"host": "db2", "mode": "standalone", "time": "2026-12-05 06:10:00+00"}
    steps = {
        op._inner.__name__ + str(i): kwargs
        for i, (applies, op, kwargs) in enumerate(wired("backup1", **arguments))
        if applies
    }
    sends = [kwargs for name, kwargs in steps.items() if name.startswith("send")]
    assert sends[0]["snapshot"] == SNAP_1 and sends[0]["datasets"][0] == {
        "source": f"{COPIES}/db2/data",
        "seed": f"{DATA}-seed",
        "live": DATA,
    }
    assert sends[1]["snapshot"] == "dbzfs-restore-db2" and sends[1]["datasets"] == [
        {
            "source": "dbpool/binlogs",
            "seed": "dbpool/dbzfs-restore-binlogs",
            "live": "dbpool/dbzfs-restore-binlogs",
        }
    ]
    assert sends[0]["address"] == "10.99.0.12" and sends[0]["bind_address"] == "10.99.0.51"
    on_target = [(op._inner.__name__, kwargs) for applies, op, kwargs in wired("db2", **arguments) if applies]
    kwargs = dict(on_target)
    assert kwargs["put_in_place"]["position_from"] == {
        "host": "backup1",
        "snapshot": f"{COPIES}/db2/data@{SNAP_1}",
        "onto": DATA,
    }
    assert kwargs["replayed"] == {
        "name": kwargs["replayed"]["name"],
        **REPLAY_ARGS,
        "moment": datetime(2026, 12, 5, 6, 10, tzinfo=UTC),
    }
    assert kwargs["authorized_key"]["line"].startswith('from="10.99.0.51",restrict,')
    # held on the target from before the rename (its sanoid prunes by name), released at the end
    assert kwargs["put_in_place"]["hold"] == kwargs["released"]["tag"] == "dbzfs-restore-db2"
    assert kwargs["released"]["snapshots"] == [f"{DATA}@{SNAP_1}", f"{LOG}@{SNAP_1}"]


# --- the replay against real servers ---------------------------------------------------------------------


@pytest.fixture
def servers(tmp_path):
    primary, restored = Server(tmp_path / "primary", 1), Server(tmp_path / "restored", 2)
    yield primary, restored
    primary.stop()
    restored.stop()


def client_on_path(tmp_path: Path, server: Server) -> dict:
    """`mariadb` as the operation runs it (root, the local socket): here the restored server's."""
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    (stubs / "mariadb").write_text(f'#!/bin/bash\nexec /usr/bin/mariadb --socket={server.sock} "$@"\n')
    (stubs / "mariadb").chmod(0o755)
    return {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "TZ": "Pacific/Auckland"}


def test_the_operation_s_commands_replay_exactly_the_transactions_before_the_moment(tmp_path, servers):
    primary, restored = servers
    primary.sql(SCHEMA)
    rows(primary, 1, 100)
    copy_gtid = primary.sql("SELECT @@global.gtid_binlog_pos")  # the copy is taken here
    primary.sql("FLUSH BINARY LOGS")
    rows(primary, 101, 150)
    primary.sql("FLUSH BINARY LOGS")
    rows(primary, 151, 200)
    time.sleep(1.1)
    moment = datetime.now(UTC)
    time.sleep(1.1)
    rows(primary, 201, 300)
    primary.sql("DROP TABLE app.events")
    # what the backup host holds and the target receives: the files, not the index
    received = tmp_path / "received" / "mariadb" / "db1"
    received.mkdir(parents=True)
    for line in primary.sql("SHOW BINARY LOGS").splitlines():
        name = line.split("\t")[0]
        (received / name).write_bytes((primary.data / name).read_bytes())
    (received / "mariadb-bin.index").write_text("junk that is not a binlog\n")
    # the copy: the restored server at the copy's position
    restored.replay(sorted(received.glob("mariadb-bin.0*")), f"--stop-position={copy_gtid}")
    assert restored.sql("SELECT count(*) FROM app.events") == "100"
    restored.sql("SET GLOBAL read_only = ON, GLOBAL gtid_strict_mode = ON")  # as the restored host runs

    env = client_on_path(tmp_path, restored)  # the host's own zone is not UTC: TZ=UTC must win
    replay = ops.replay_command(str(received), copy_gtid, moment)
    subprocess.run(["bash", "-c", replay], env=env, check=True, capture_output=True, timeout=120)
    got = restored.sql("SELECT count(*), min(id), max(id) FROM app.events")
    assert got == "200\t1\t200", got
    reached = subprocess.run(
        ["bash", "-c", ops.reached_command(str(received), copy_gtid, moment)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.strip()
    last = restored.sql("SELECT @@global.gtid_binlog_pos")
    second = moment.replace(microsecond=0)
    assert reached.startswith(f"dbzfs-restore: reached GTID {last} at "), reached
    when = datetime.strptime(reached.split(" at ")[1], "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)
    assert second.timestamp() - 5 < when.timestamp() < second.timestamp()

    # a replay cut and run again resumes from the server's own position: nothing twice
    resumed = ops.replay_command(str(received), copy_gtid, moment, resume=True)
    subprocess.run(["bash", "-c", resumed], env=env, check=True, capture_output=True, timeout=120)
    assert restored.sql("SELECT count(*) FROM app.events") == "200"


def test_the_copy_is_held_while_it_is_sent_and_released_after():
    snaps = ["bp/backup/mariadb/db2/data@autosnap_x", "bp/backup/mariadb/db2/log@autosnap_x"]
    held = [str(c) for c in ops.held._inner(snapshots=snaps, tag="dbzfs-restore-db2")]
    assert held == [
        f"zfs holds -H {s} | cut -f2 | grep -qxF dbzfs-restore-db2 || zfs hold dbzfs-restore-db2 {s}"
        for s in snaps
    ]
    released = [str(c) for c in ops.released._inner(snapshots=snaps, tag="dbzfs-restore-db2")]
    assert all(
        c.endswith(f"|| zfs release dbzfs-restore-db2 {s}") for c, s in zip(released, snaps, strict=True)
    )
