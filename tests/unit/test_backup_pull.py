"""host_scripts/backup_pull.py: the commands it runs (exact argv, through a fake runner that
plays the database hosts and the backup host's pool), what it makes of their answers, its report,
its metrics and its config checks."""

import ast
import json
import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from host_scripts import backup_pull as b

from tests.unit.test_zfs_metrics import check_with_promtool, parse_exposition

NOW = datetime(2026, 12, 4, 22, 37, 12, tzinfo=UTC)
KEY = "/etc/dbzfs/backup/id_ed25519"
KNOWN = "/etc/dbzfs/backup/known_hosts"
DATA = "dbpool/datastore/mysql"
LOG = "dbpool/datastore/mysql-log"
COPIES = "backup/backup/mariadb"
SSH = [
    "ssh",
    "-i",
    KEY,
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=accept-new",
    "-o",
    f"UserKnownHostsFile={KNOWN}",
    "-o",
    "ConnectTimeout=20",
]
LIST = ["zfs", "list", "-H", "-p", "-t", "snapshot", "-o", "name,guid,creation", "-s", "creation", "-d", "1"]


def syncoid(address, dataset, target):
    """The command the script must build, spelled out (checked against syncoid 2.1.0's options)."""
    return [
        "syncoid",
        "--no-sync-snap",
        "--no-privilege-elevation",
        "--no-rollback",
        "--sendoptions=w p",
        "--recvoptions=u o canmount=off x mountpoint",
        "--compress=none",
        "--sshkey",
        KEY,
        "--sshoption=BatchMode=yes",
        "--sshoption=StrictHostKeyChecking=accept-new",
        f"--sshoption=UserKnownHostsFile={KNOWN}",
        "--sshoption=ConnectTimeout=20",
        f"dbzfs-backup@{address}:{dataset}",
        target,
    ]


def remote_list(address, dataset):
    return [*SSH, f"dbzfs-backup@{address}", *LIST, dataset]


def local_list(dataset):
    return [*LIST, dataset]


def snap(hour, guid, kind="hourly", day=4):
    when = datetime(2026, 12, day, hour, 0, 4, tzinfo=UTC)
    return b.Snapshot(f"autosnap_{when:%Y-%m-%d_%H:%M:%S}_{kind}", str(guid), int(when.timestamp()))


class Fleet:
    """The database hosts (over ssh) and the backup host's pool, as the commands see them."""

    def __init__(self):
        self.calls = []
        self.timeouts = []
        self.sources = {}  # (address, dataset) -> [Snapshot]
        self.pool = {"backup/backup": [], COPIES: []}  # dataset -> [Snapshot]
        self.down = set()  # addresses ssh cannot reach
        self.fail = {}  # argv[0] -> Result
        self.written = {}  # dataset -> bytes written to its head since its newest snapshot
        self.tokens = {}  # dataset -> its receive_resume_token (an interrupted receive)

    def __call__(self, argv, timeout=None):
        self.calls.append(list(argv))
        self.timeouts.append(timeout)
        if argv[0] in self.fail:
            return self.fail[argv[0]]
        if argv[0] == "ssh":
            return self.ssh(argv)
        if argv[0] == "syncoid":
            return self.syncoid(argv[-2], argv[-1])
        assert argv[0] == "zfs", argv
        if argv[1] == "list":
            return self.listing(argv[-1], self.pool.get(argv[-1]))
        if argv[1] == "create":
            assert argv[2:5] == ["-p", "-o", "canmount=off"]
            self.pool.setdefault(argv[5], [])
            return b.Result(0, "", "")
        if argv[1] == "get" and "receive_resume_token" in argv:
            assert argv == b.resume_token_command(argv[-1])
            return b.Result(0, f"{self.tokens.get(argv[-1], '-')}\n", "")
        if argv[1] == "get":
            assert argv[2:] == ["-H", "-p", "-o", "value", "written", argv[-1]]
            return b.Result(0, f"{self.written.get(argv[-1], 0)}\n", "")
        if argv[1] == "rollback":
            dataset, _, snapshot = argv[2].partition("@")
            assert snapshot == self.pool[dataset][-1].name, "rolled back past the newest copy"
            self.written[dataset] = 0
            return b.Result(0, "", "")
        if argv[1] == "rename":
            self.pool[argv[3]] = self.pool.pop(argv[2])
            return b.Result(0, "", "")
        raise AssertionError(f"unexpected command {argv}")

    def ssh(self, argv):
        login = next(a for a in argv if "@" in a)
        address = login.split("@")[1]
        if address in self.down:
            return b.Result(255, "", f"ssh: connect to host {address} port 22: Connection timed out\n")
        remote = argv[argv.index(login) + 1 :]
        assert remote[:-1] == LIST
        return self.listing(remote[-1], self.sources.get((address, remote[-1])))

    @staticmethod
    def listing(dataset, snapshots):
        if snapshots is None:
            return b.Result(1, "", f"cannot open '{dataset}': dataset does not exist\n")
        return b.Result(0, "".join(f"{dataset}@{s.name}\t{s.guid}\t{s.creation}\n" for s in snapshots), "")

    def syncoid(self, source, target):
        """What syncoid --no-sync-snap does: everything to a new target (or one left without a
        snapshot by an interrupted first receive, which it resumes), else what is newer than the
        newest snapshot in common (same name and guid), else it refuses."""
        address, dataset = source.split("@")[1].split(":")
        there = self.sources[(address, dataset)]
        if not self.pool.get(target):  # no target, or an interrupted first receive it resumes
            self.pool[target] = list(there)
            return b.Result(0, "INFO: Sending oldest full snapshot ...\n", "")
        here = {(s.name, s.guid) for s in self.pool[target]}
        common = [i for i, s in enumerate(there) if (s.name, s.guid) in here]
        if not common:
            return b.Result(
                2,
                f"NEWEST SNAPSHOT: {there[-1].name}\n\nCRITICAL ERROR: Target {target} exists but has no "
                f"snapshots matching with {dataset}!\n",
                "",
            )
        self.pool[target] += there[common[-1] + 1 :]
        return b.Result(0, "", "")


def config(tmp_path, *hosts, **overrides):
    sources = [
        {
            "host": host,
            "address": f"10.99.0.1{host[-1]}",
            "cluster": "mariadb",
            "engine": "mariadb",
            "datasets": {"data": DATA, "log": LOG},
        }
        for host in hosts
    ]
    raw = {
        "target": "backup/backup",
        "user": "dbzfs-backup",
        "ssh_key": KEY,
        "known_hosts": KNOWN,
        "metrics": str(tmp_path / "dbzfs_backup.prom"),
        "sources": sources,
        **overrides,
    }
    path = tmp_path / "sources.json"
    path.write_text(json.dumps(raw))
    return str(path)


def pull(fleet, path, *options):
    return b.main(["--config", path, *options], runner=fleet, now=NOW)


def metrics(tmp_path):
    text = (tmp_path / "dbzfs_backup.prom").read_text()
    check_with_promtool(text)
    return {
        (name, dict(labels).get("source"), dict(labels).get("dataset")): value
        for (name, labels), value in parse_exposition(text).items()
    }


# --- the pulls --------------------------------------------------------------------------------------


def test_a_first_pull_creates_the_parent_and_sends_everything(tmp_path, capsys):
    fleet = Fleet()
    fleet.sources[("10.99.0.12", DATA)] = [snap(21, 11), snap(22, 12)]
    fleet.sources[("10.99.0.12", LOG)] = [snap(21, 21), snap(22, 22)]
    assert pull(fleet, config(tmp_path, "db2")) == 0
    data, log = f"{COPIES}/db2/data", f"{COPIES}/db2/log"
    assert fleet.calls == [
        remote_list("10.99.0.12", DATA),
        local_list(data),
        ["zfs", "create", "-p", "-o", "canmount=off", f"{COPIES}/db2"],
        syncoid("10.99.0.12", DATA, data),
        local_list(data),
        remote_list("10.99.0.12", LOG),
        local_list(log),
        ["zfs", "create", "-p", "-o", "canmount=off", f"{COPIES}/db2"],
        syncoid("10.99.0.12", LOG, log),
        local_list(log),
    ]
    # A full send takes as long as it takes; the listings do not hang the run.
    assert [t for argv, t in zip(fleet.calls, fleet.timeouts, strict=True) if argv[0] == "syncoid"] == [
        None
    ] * 2
    assert all(t for argv, t in zip(fleet.calls, fleet.timeouts, strict=True) if argv[0] != "syncoid")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "backup_pull: db2 data: pulled 2 new snapshots; 2 copies, newest autosnap_2026-12-04_22:00:04_hourly",
        "backup_pull: db2 log: pulled 2 new snapshots; 2 copies, newest autosnap_2026-12-04_22:00:04_hourly",
        "backup_pull: 2 pulled, 0 failed",
    ]


def test_later_pulls_are_incremental_and_say_when_there_is_nothing_new(tmp_path, capsys):
    fleet = Fleet()
    fleet.sources[("10.99.0.12", DATA)] = [snap(20, 10), snap(21, 11), snap(22, 12)]
    fleet.pool[f"{COPIES}/db2"] = []
    fleet.pool[f"{COPIES}/db2/data"] = [snap(19, 9), snap(20, 10)]  # 19:00 pruned on the source since
    path = config(tmp_path, "db2")
    with open(path) as f:
        raw = json.load(f)
    raw["sources"][0]["datasets"] = {"data": DATA}
    Path(path).write_text(json.dumps(raw))
    assert pull(fleet, path) == 0
    target = f"{COPIES}/db2/data"
    assert fleet.calls == [
        remote_list("10.99.0.12", DATA),
        local_list(target),
        b.written_command(target),
        syncoid("10.99.0.12", DATA, target),
        local_list(target),
    ]
    assert [s.guid for s in fleet.pool[target]] == ["9", "10", "11", "12"]
    assert "db2 data: pulled 2 new snapshots; 4 copies, newest autosnap_2026-12-04_22:00:04_hourly" in (
        capsys.readouterr().out
    )
    fleet.calls.clear()
    assert pull(fleet, path) == 0
    assert [argv[0] for argv in fleet.calls] == ["ssh", "zfs", "zfs", "syncoid", "zfs"]
    assert "db2 data: up to date; 4 copies" in capsys.readouterr().out


def test_a_source_without_snapshots_is_skipped_and_not_a_failure(tmp_path, capsys):
    fleet = Fleet()
    # db1 is the primary: snapshots are taken on the replica; a seed's snapshot does not count.
    fleet.sources[("10.99.0.11", DATA)] = [b.Snapshot("dbzfs-seed-full", "5", 1796421604)]
    fleet.sources[("10.99.0.11", LOG)] = []
    assert pull(fleet, config(tmp_path, "db1")) == 0
    assert fleet.calls == [remote_list("10.99.0.11", DATA), remote_list("10.99.0.11", LOG)]
    out = capsys.readouterr().out
    assert f"db1 data: no snapshots: {DATA} has no autosnap_* snapshot, skipped" in out
    assert "2 no snapshots, 0 failed" in out
    # No series: a host that takes no snapshots raises no alert.
    assert metrics(tmp_path) == {
        ("dbzfs_backup_last_run_timestamp_seconds", None, None): NOW.timestamp(),
        ("dbzfs_backup_run_success", None, None): 1,
    }


def test_an_unreachable_source_fails_alone(tmp_path, capsys):
    fleet = Fleet()
    fleet.down.add("10.99.0.11")
    fleet.pool[f"{COPIES}/db1"] = []
    fleet.pool[f"{COPIES}/db1/data"] = [snap(20, 10)]  # copies from before it went away
    fleet.sources[("10.99.0.12", DATA)] = [snap(22, 12)]
    fleet.sources[("10.99.0.12", LOG)] = [snap(22, 22)]
    assert pull(fleet, config(tmp_path, "db1", "db2")) == 1
    # One attempt for db1 (not one per dataset), its copies still listed for the metrics.
    assert fleet.calls[:3] == [
        remote_list("10.99.0.11", DATA),
        local_list(f"{COPIES}/db1/data"),
        local_list(f"{COPIES}/db1/log"),
    ]
    assert [argv for argv in fleet.calls if argv[0] == "syncoid"] == [
        syncoid("10.99.0.12", DATA, f"{COPIES}/db2/data"),
        syncoid("10.99.0.12", LOG, f"{COPIES}/db2/log"),
    ]
    out = capsys.readouterr().out
    reason = (
        "ssh to dbzfs-backup@10.99.0.11 failed: ssh: connect to host 10.99.0.11 port 22: Connection timed out"
    )
    assert f"db1 data: FAILED: {reason}" in out
    assert f"db1 log: FAILED: {reason}" in out
    assert "db2 data: pulled 1 new snapshot;" in out
    assert out.splitlines()[-1] == "backup_pull: 2 pulled, 2 failed"
    m = metrics(tmp_path)
    assert m[("dbzfs_backup_pull_success", "db1", "data")] == 0
    assert m[("dbzfs_backup_pull_success", "db1", "log")] == 0
    assert m[("dbzfs_backup_pull_success", "db2", "data")] == 1
    assert m[("dbzfs_backup_copies", "db1", "data")] == 1  # its age still watched
    assert m[("dbzfs_backup_newest_copy_timestamp_seconds", "db1", "data")] == snap(20, 10).creation
    assert ("dbzfs_backup_copies", "db1", "log") not in m  # no copies yet
    assert m[("dbzfs_backup_run_success", None, None)] == 0


@pytest.mark.parametrize(
    "old",
    [
        [snap(20, 90), snap(21, 91)],  # re-created: new guids
        [snap(22, 99)],  # same name, another dataset's snapshot: syncoid matches name and guid
    ],
)
def test_copies_of_a_recreated_source_are_set_aside_then_pulled_in_full(tmp_path, capsys, old):
    fleet = Fleet()
    fleet.sources[("10.99.0.12", DATA)] = [snap(22, 12), snap(23, 13)]
    fleet.sources[("10.99.0.12", LOG)] = [snap(23, 23)]
    fleet.pool[f"{COPIES}/db2"] = []
    fleet.pool[f"{COPIES}/db2/data"] = list(old)
    fleet.pool[f"{COPIES}/db2/log"] = [snap(22, 22), snap(23, 23)]  # the log was not re-created
    assert pull(fleet, config(tmp_path, "db2")) == 0
    data, aside = f"{COPIES}/db2/data", f"{COPIES}/db2/data-until-20261204T223712Z"
    assert fleet.calls[:5] == [
        remote_list("10.99.0.12", DATA),
        local_list(data),
        ["zfs", "rename", data, aside],
        syncoid("10.99.0.12", DATA, data),
        local_list(data),
    ]
    assert [argv[1] for argv in fleet.calls if argv[0] == "zfs"].count("rename") == 1
    assert fleet.pool[aside] == old  # nothing destroyed
    assert [s.guid for s in fleet.pool[data]] == ["12", "13"]
    out = capsys.readouterr().out
    assert (
        f"db2 data: pulled 2 new snapshots; full send: the copies shared no snapshot with {DATA}, "
        f"set aside as {aside}; 2 copies" in out
    )
    assert "db2 log: up to date; 2 copies" in out


def test_copies_the_source_no_longer_has_are_never_rolled_back(tmp_path, capsys):
    """The source pruned its hourlies while the pulls failed (36 kept): the dailies are still
    shared, but the newest copies would have to be rolled back."""
    fleet = Fleet()
    fleet.sources[("10.99.0.12", DATA)] = [
        snap(0, 1, "daily"),
        snap(0, 50, "daily", day=6),
        snap(1, 51, day=6),
    ]
    fleet.sources[("10.99.0.12", LOG)] = [snap(1, 61, day=6)]
    fleet.pool[f"{COPIES}/db2"] = []
    copies = [snap(0, 1, "daily"), snap(0, 2), snap(1, 3)]  # the daily and the hourly of 00:00:04
    fleet.pool[f"{COPIES}/db2/data"] = list(copies)
    assert pull(fleet, config(tmp_path, "db2")) == 1
    target = f"{COPIES}/db2/data"
    assert fleet.calls[:3] == [remote_list("10.99.0.12", DATA), local_list(target), local_list(target)]
    assert [argv[-1] for argv in fleet.calls if argv[0] == "syncoid"] == [f"{COPIES}/db2/log"]
    assert fleet.pool[target] == copies
    out = capsys.readouterr().out
    assert (
        "db2 data: FAILED: 2 copies after autosnap_2026-12-04_00:00:04_daily"
        " (autosnap_2026-12-04_00:00:04_hourly ... autosnap_2026-12-04_01:00:04_hourly)"
        " are no longer on the source; pulling would roll them back."
        f" Keep them: `zfs rename {target} {target}-until-...`, or drop them:"
        f" `zfs rollback -r {target}@autosnap_2026-12-04_00:00:04_daily`; then pull again" in out
    )
    assert metrics(tmp_path)[("dbzfs_backup_copies", "db2", "data")] == 3


def test_a_target_without_snapshots_is_left_to_syncoid_to_resume(tmp_path):
    """An interrupted first receive leaves the target with a resume token and no snapshot."""
    fleet = Fleet()
    fleet.sources[("10.99.0.12", DATA)] = [snap(22, 12)]
    fleet.sources[("10.99.0.12", LOG)] = [snap(22, 22)]
    fleet.pool[f"{COPIES}/db2"] = []
    fleet.pool[f"{COPIES}/db2/data"] = []
    fleet.pool[f"{COPIES}/db2/log"] = []
    fleet.tokens = {f"{COPIES}/db2/data": "1-abc-def", f"{COPIES}/db2/log": "1-abc-ghi"}
    assert pull(fleet, config(tmp_path, "db2")) == 0
    assert [argv[0] if argv[0] != "zfs" else argv[1] for argv in fleet.calls] == [
        "ssh",
        "list",
        "get",
        "syncoid",
        "list",
    ] * 2


def test_a_failed_syncoid_is_reported_with_the_end_of_what_it_said(tmp_path, capsys):
    fleet = Fleet()
    fleet.sources[("10.99.0.12", DATA)] = [snap(22, 12)]
    fleet.sources[("10.99.0.12", LOG)] = [snap(22, 22)]
    stderr = "".join(f"line {i}\n" for i in range(8)) + "cannot receive: out of space\n"
    fleet.fail["syncoid"] = b.Result(2, "NEWEST SNAPSHOT: x\nINFO: Sending...\n", stderr)
    assert pull(fleet, config(tmp_path, "db2")) == 1
    out = capsys.readouterr().out
    assert (
        "db2 data: FAILED: syncoid failed: line 4 | line 5 | line 6 | line 7 | cannot receive: out of space"
        in out
    )
    assert metrics(tmp_path)[("dbzfs_backup_pull_success", "db2", "log")] == 0


def test_a_source_dataset_that_is_missing_fails_that_dataset_only(tmp_path, capsys):
    fleet = Fleet()
    fleet.sources[("10.99.0.12", LOG)] = [snap(22, 22)]
    assert pull(fleet, config(tmp_path, "db2")) == 1
    out = capsys.readouterr().out
    assert (
        f"db2 data: FAILED: listing the snapshots of {DATA} on db2 failed: cannot open '{DATA}': "
        "dataset does not exist" in out
    )
    assert "db2 log: pulled 1 new snapshot;" in out


# --- --only, --dry-run ------------------------------------------------------------------------------


def test_only_pulls_the_hosts_named_and_leaves_the_metrics_alone(tmp_path, capsys):
    fleet = Fleet()
    fleet.sources[("10.99.0.12", DATA)] = [snap(22, 12)]
    fleet.sources[("10.99.0.12", LOG)] = [snap(22, 22)]
    path = config(tmp_path, "db1", "db2", "db3")
    assert pull(fleet, path, "--only", "db2") == 0
    assert all(
        "10.99.0.11" not in " ".join(argv) and "10.99.0.13" not in " ".join(argv) for argv in fleet.calls
    )
    assert len([argv for argv in fleet.calls if argv[0] == "syncoid"]) == 2
    assert not (tmp_path / "dbzfs_backup.prom").exists()
    assert pull(Fleet(), path, "--only", "db9") == 2
    assert "--only db9: not in 'sources'" in capsys.readouterr().err


def test_a_dry_run_lists_and_prints_what_it_would_change(tmp_path, capsys):
    fleet = Fleet()
    fleet.sources[("10.99.0.12", DATA)] = [snap(22, 12)]
    fleet.sources[("10.99.0.12", LOG)] = [snap(22, 22)]
    fleet.pool[f"{COPIES}/db2"] = []
    fleet.pool[f"{COPIES}/db2/log"] = [snap(20, 90)]  # to be set aside
    assert pull(fleet, config(tmp_path, "db2"), "--dry-run") == 0
    assert fleet.calls == [
        remote_list("10.99.0.12", DATA),
        local_list(f"{COPIES}/db2/data"),
        remote_list("10.99.0.12", LOG),
        local_list(f"{COPIES}/db2/log"),
    ]
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        f"backup_pull: dry run: zfs create -p -o canmount=off {COPIES}/db2",
        "backup_pull: dry run: " + shlex.join(syncoid("10.99.0.12", DATA, f"{COPIES}/db2/data")),
    ]
    assert f"backup_pull: dry run: zfs rename {COPIES}/db2/log {COPIES}/db2/log-until-20261204T223712Z" in out
    assert "backup_pull: db2 data: dry run" in out
    assert not (tmp_path / "dbzfs_backup.prom").exists()


# --- the metrics ------------------------------------------------------------------------------------


def test_metrics_text():
    outcomes = [
        b.Outcome("db2", "data", "pulled", "1 new snapshot", [snap(21, 11), snap(22, 12)]),
        b.Outcome("db2", "log", b.FAILED, "syncoid failed", []),
        b.Outcome("db1", "data", "none", "skipped"),
        b.Outcome("db3", "data", b.FAILED, "ssh failed", None),
    ]
    text = b.metrics_text(outcomes, NOW)
    check_with_promtool(text)
    series = parse_exposition(text)
    assert text.startswith(
        "# HELP dbzfs_backup_pull_success 1 when the last pull of the source's dataset succeeded, else 0.\n"
        "# TYPE dbzfs_backup_pull_success gauge\n"
        'dbzfs_backup_pull_success{source="db2",dataset="data"} 1\n'
        'dbzfs_backup_pull_success{source="db2",dataset="log"} 0\n'
        'dbzfs_backup_pull_success{source="db3",dataset="data"} 0\n'
    )
    labels = (("source", "db2"), ("dataset", "data"))
    assert series[("dbzfs_backup_newest_copy_timestamp_seconds", labels)] == snap(22, 12).creation
    assert series[("dbzfs_backup_copies", labels)] == 2
    assert series[("dbzfs_backup_copies", (("source", "db2"), ("dataset", "log")))] == 0
    assert {name for name, _ in series} == set(b.METRICS)
    assert not [key for key in series if dict(key[1]).get("source") == "db1"]
    assert series[("dbzfs_backup_last_run_timestamp_seconds", ())] == NOW.timestamp()
    assert series[("dbzfs_backup_run_success", ())] == 0


def test_metrics_are_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "dbzfs_backup.prom"
    path.write_text("old\n")
    seen = {}
    replace = os.replace

    def watched(source, destination):
        seen["temporary"] = Path(source)
        seen["text"] = Path(source).read_text()
        seen["mode"] = Path(source).stat().st_mode & 0o777
        assert path.read_text() == "old\n"  # node_exporter reads the old file until the rename
        replace(source, destination)

    monkeypatch.setattr(b.os, "replace", watched)
    b.write_metrics(str(path), "new\n")
    assert seen["temporary"].parent == tmp_path and seen["temporary"].name.startswith(".dbzfs_backup.prom.")
    assert seen["text"] == "new\n" and seen["mode"] == 0o644
    assert path.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dbzfs_backup.prom"]

    def broken(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(b.os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        b.write_metrics(str(path), "newer\n")
    assert path.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dbzfs_backup.prom"]  # no temporary left


# --- the config -------------------------------------------------------------------------------------


def source(**changes):
    item = {"host": "db2", "address": "10.99.0.12", "cluster": "mariadb", "engine": "mariadb"}
    item["datasets"] = {"data": DATA, "log": LOG}
    return {**item, **changes}


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"target": None}, "'target': missing"),
        ({"user": "db backup"}, "'user': 'db backup', expected an account name"),
        ({"ssh_key": "id_ed25519"}, "'ssh_key': 'id_ed25519', expected an absolute path"),
        ({"known_hosts": "/etc/known hosts"}, "'known_hosts'"),
        ({"sources": {"db2": {}}}, "'sources': missing or not a list"),
        ({"sources": ["db2"]}, "'sources'[0]: not a JSON object"),
        ({"sources": [source(host=None)]}, "'sources'[0] 'host': missing"),
        ({"sources": [source(address=None)]}, "'sources'[0] (db2) 'address': missing"),
        ({"sources": [source(address="fd00::12")]}, "(db2) 'address': 'fd00::12', expected an IPv4 address"),
        ({"sources": [source(cluster="a/b")]}, "(db2) 'cluster': 'a/b'"),
        ({"sources": [source(datasets={})]}, "(db2) 'datasets': missing or empty"),
        ({"sources": [source(datasets={"wal": DATA})]}, "(db2) 'datasets': unknown role 'wal'"),
        ({"sources": [source(datasets={"data": "pool/my data"})]}, "(db2) 'datasets' 'data': 'pool/my data'"),
        ({"sources": [source(datasets={"data": "pool/x;reboot"})]}, "'data': 'pool/x;reboot'"),
        ({"sources": [source(), source(address="10.99.0.13")]}, "'sources': host 'db2' listed twice"),
    ],
)
def test_config_errors_name_the_key(tmp_path, capsys, overrides, message):
    path = config(tmp_path, **overrides)
    raw = json.loads(Path(path).read_text())
    Path(path).write_text(json.dumps({k: v for k, v in raw.items() if v is not None}))
    fleet = Fleet()
    assert pull(fleet, path) == 2
    assert fleet.calls == []
    err = capsys.readouterr().err
    assert err.startswith(f"backup_pull: {path}: ") and message in err


def test_a_config_that_is_not_json_or_absent(tmp_path, capsys):
    path = tmp_path / "sources.json"
    path.write_text("{")
    assert pull(Fleet(), str(path)) == 2
    assert "not JSON" in capsys.readouterr().err
    assert pull(Fleet(), str(tmp_path / "absent.json")) == 2
    assert "No such file" in capsys.readouterr().err


def test_the_config_roles_backup_writes_is_accepted(tmp_path):
    loaded = b.load_config(Path(config(tmp_path, "db1", "db2")).read_text())
    assert [s.host for s in loaded.sources] == ["db1", "db2"]
    assert loaded.sources[1].datasets == {"data": DATA, "log": LOG}
    assert (
        b.load_config(json.dumps({**json.loads(Path(config(tmp_path)).read_text()), "metrics": None})).metrics
        is None
    )


# --- the pure parts ---------------------------------------------------------------------------------


def test_listings_are_read_for_the_dataset_asked_only():
    text = (
        f"{DATA}@autosnap_2026-12-04_22:00:04_hourly\t12\t1796421604\n"
        f"{DATA}-rewrite@autosnap_2026-12-04_22:00:04_hourly\t13\t1796421604\n"  # another dataset
        f"{DATA}@dbzfs-seed-full\t5\t1796400000\n"
        "garbage\n"
    )
    snapshots = b.parse_snapshots(text, DATA)
    assert snapshots == [
        b.Snapshot("autosnap_2026-12-04_22:00:04_hourly", "12", 1796421604),
        b.Snapshot("dbzfs-seed-full", "5", 1796400000),
    ]
    assert b.autosnaps(snapshots) == snapshots[:1]


def test_what_counts_as_a_snapshot_in_common():
    ours = [snap(21, 11), snap(22, 12)]
    assert b.shares_a_snapshot(ours, [snap(21, 11)])
    assert not b.shares_a_snapshot(ours, [snap(21, 99)])
    assert not b.shares_a_snapshot(ours, [b.Snapshot("renamed", "11", 0)])
    assert b.must_set_aside(ours, [snap(20, 10)])
    assert not b.must_set_aside(ours, [])  # an interrupted first receive
    assert not b.must_set_aside(ours, None)  # no target yet
    assert b.set_aside_name("p/c/db2/data", NOW) == "p/c/db2/data-until-20261204T223712Z"


def test_copies_after_the_newest_one_the_source_has():
    source = [snap(0, 1, "daily"), snap(0, 2), snap(1, 3)]
    assert b.gone_from_source(source, source) == []
    assert b.gone_from_source(source, source[:2]) == []  # behind: an incremental pull
    gone = [snap(2, 4), snap(3, 5)]
    assert b.gone_from_source(source, [*source, *gone]) == gone
    # Taken in the same second: the listing's order (createtxg) decides, not the creation time.
    assert b.gone_from_source(source[:1], source[:2]) == source[1:2]
    assert b.gone_from_source(source, [snap(5, 9)]) == []  # nothing shared: set aside instead


def test_syncoids_refusal_printed_on_stdout_is_kept_in_the_reason():
    refused = b.Result(
        2,
        "NEWEST SNAPSHOT: x\n\nCRITICAL ERROR: Target t exists but has no snapshots matching with s!\n"
        "                Replication to target would require destroying existing\n",
        "",
    )
    assert b.failure_tail(refused) == "CRITICAL ERROR: Target t exists but has no snapshots matching with s!"
    assert b.failure_tail(b.Result(3, "", "")) == "exit status 3"


def test_the_default_runner_never_raises():
    assert b.run(["true"]) == b.Result(0, "", "")
    assert b.run(["sh", "-c", "echo out; echo err >&2; exit 3"]) == b.Result(3, "out\n", "err\n")
    assert b.run(["sleep", "5"], timeout=0.1).returncode == b.TIMED_OUT
    assert b.run(["/nonexistent/syncoid"]).returncode == 127


def test_the_script_uses_the_standard_library_only():
    tree = ast.parse(Path(b.__file__).read_text())
    modules = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    modules |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert modules <= sys.stdlib_module_names | {"__future__"}


def test_a_copy_whose_newest_snapshot_was_pruned_is_rolled_back_to_its_newest_copy(tmp_path, capsys):
    """The backup host's sanoid destroyed the newest copy (a kind it keeps none of): its blocks
    stay in the copy's head, and zfs receive would refuse ("modified since most recent
    snapshot"). The head goes back to the newest copy, destroying nothing, and the pull goes on."""
    fleet = Fleet()
    fleet.sources[("10.99.0.12", DATA)] = [snap(20, 10), snap(21, 11, kind="frequently"), snap(22, 12)]
    fleet.pool[f"{COPIES}/db2"] = []
    target = f"{COPIES}/db2/data"
    fleet.pool[target] = [snap(20, 10)]  # 21:00 frequently pulled, then pruned here
    fleet.written[target] = 94208
    path = config(tmp_path, "db2")
    raw = json.loads(Path(path).read_text())
    raw["sources"][0]["datasets"] = {"data": DATA}
    Path(path).write_text(json.dumps(raw))
    assert pull(fleet, path) == 0
    assert b.rollback_command(target, snap(20, 10).name) in fleet.calls
    assert fleet.calls.index(b.rollback_command(target, snap(20, 10).name)) < fleet.calls.index(
        syncoid("10.99.0.12", DATA, target)
    )
    assert fleet.written[target] == 0
    assert "rolled back to autosnap_2026-12-04_20:00:04_hourly, the newest copy" in capsys.readouterr().out


def test_copies_left_without_a_snapshot_are_set_aside_unless_a_receive_resumes(tmp_path, capsys):
    """A restored source held one snapshot, of a kind the backup host keeps none of: its sanoid
    pruned the only copy, and syncoid refuses a target without a snapshot it shares. An
    interrupted first receive (a resume token) is syncoid's to resume."""
    fleet = Fleet()
    fleet.sources[("10.99.0.12", DATA)] = [snap(22, 12)]
    fleet.sources[("10.99.0.12", LOG)] = [snap(22, 22)]
    fleet.pool[f"{COPIES}/db2"] = []
    fleet.pool[f"{COPIES}/db2/data"] = []
    fleet.pool[f"{COPIES}/db2/log"] = []
    fleet.tokens[f"{COPIES}/db2/log"] = "1-abc-def"
    assert pull(fleet, config(tmp_path, "db2")) == 0
    data, aside = f"{COPIES}/db2/data", f"{COPIES}/db2/data-until-20261204T223712Z"
    assert ["zfs", "rename", data, aside] in fleet.calls
    assert [argv[1] for argv in fleet.calls if argv[0] == "zfs"].count("rename") == 1  # not the log
    out = capsys.readouterr().out
    assert f"full send: the copies had no snapshot left of {DATA}, set aside as {aside}" in out
    assert [s.guid for s in fleet.pool[data]] == ["12"] and [
        s.guid for s in fleet.pool[f"{COPIES}/db2/log"]
    ] == ["22"]
