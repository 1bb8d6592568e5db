"""The roll's steps for a primary rolled through a switchover (day2/rolling_run.py), against
stand-ins for pyinfra and the gates: what runs, in which order, with which inventory, and where
the roll stops."""

import argparse
import functools
import runpy
import time

import pytest

from day2 import rolling, rolling_run
from validation import load_inventory_isolated


@functools.cache
def lab_hosts():
    return load_inventory_isolated("inventories/lab.py")


class FakeGates:
    failing: set = set()

    def __init__(self, inventory, hosts, ssh_config, max_lag, timeout):
        self.inventory, self.hosts, self.ssh_config = inventory, hosts, ssh_config
        self.max_lag, self.timeout = max_lag, timeout

    def wait(self, gate, step):
        calls.append(("gate", gate, step.host, step.role, self.inventory))
        ok = (gate, step.role) not in self.failing
        return ok, "fine" if ok else "db2: replication threads IO No, SQL No", 0.0

    def run(self, name, command):
        return 0, ""


calls: list = []


@pytest.fixture
def fakes(monkeypatch, tmp_path):
    calls.clear()
    FakeGates.failing = set()
    outcome = {"converge": 0, "switchover": 0}

    def converge(inventory, host, dry, deploy="deploy.py"):
        if dry and not outcome.get("dry_calls"):
            return 0, "", outcome.get("pending", 1)  # the primary's own check: anything to change?
        calls.append(("converge" if deploy == "deploy.py" else "rewrite", host, inventory))
        return outcome["converge"] if deploy == "deploy.py" else 0, "", 1

    def switchover(inventory, members, new_primary, max_lag, dry):
        calls.append(("switchover", new_primary, inventory, tuple(members), dry))
        return outcome["switchover"], "writes were refused for 3.5 s", 3.5

    monkeypatch.setattr(rolling_run, "converge", converge)
    monkeypatch.setattr(rolling_run, "switchover", switchover)
    monkeypatch.setattr(rolling_run, "Gates", FakeGates)
    monkeypatch.setattr(rolling_run, "rewrite", lambda args, gates, step, entry: None)
    return outcome


def run_primary(tmp_path, dry=False):
    args = argparse.Namespace(inventory="inventories/lab.py", dry=dry, max_lag=30)
    gates = FakeGates("inventories/lab.py", lab_hosts(), tmp_path / "ssh_config", 30, 20)
    step = next(s for s in rolling.plan(lab_hosts()) if s.host == "pg1")
    entry: dict = {"host": "pg1", "gates": {}}
    return rolling_run.via_switchover(args, gates, step, entry, tmp_path), entry


def test_a_primary_switches_over_converges_as_a_replica_and_switches_back(fakes, tmp_path):
    stopped, entry = run_primary(tmp_path)
    assert stopped is None
    switched = str(tmp_path / "pg1-switched-to-pg2.py")
    assert calls == [
        ("gate", "replication", "pg1", "primary", "inventories/lab.py"),
        ("switchover", "pg2", "inventories/lab.py", ("pg1", "pg2"), False),
        ("converge", "pg1", switched),
        *[("gate", g, "pg1", "replica", switched) for g in rolling.GATES],
        ("switchover", "pg1", switched, ("pg1", "pg2"), False),
        ("gate", "server", "pg1", "primary", "inventories/lab.py"),
        ("gate", "replication", "pg1", "primary", "inventories/lab.py"),
    ]
    assert entry["switchover"]["to"] == "pg2" and entry["switchover"]["refused_s"] == 3.5
    assert entry["switch_back"]["refused_s"] == 3.5 and set(entry["gates"]) == set(rolling.GATES)
    swapped = runpy.run_path(switched)
    assert dict(swapped["postgresql"])["pg1"]["primary"] == "pg2"


def test_replicas_behind_stop_the_roll_before_the_switchover(fakes, tmp_path):
    FakeGates.failing = {("replication", "primary")}
    stopped, entry = run_primary(tmp_path)
    assert stopped.startswith("pg1: gate replication did not pass within 20 s: db2")
    assert stopped.endswith("(before the switchover to pg2)")
    assert [c[0] for c in calls] == ["gate"]  # nothing changed


def test_a_failed_converge_after_the_switchover_says_how_to_switch_back(fakes, tmp_path):
    fakes["converge"] = 1
    stopped, _ = run_primary(tmp_path)
    assert [c[0] for c in calls] == ["gate", "switchover", "converge"]
    assert "pg2 is the primary now, pg1 its replica" in stopped
    kept = stopped.split(": ")[-2].split(" is the inventory")[0].split()[-1]
    assert runpy.run_path(kept)["postgresql"] and "new_primary=pg1" in stopped


def test_a_primary_with_nothing_to_change_stays_the_primary(fakes, tmp_path):
    fakes["pending"] = 0
    stopped, entry = run_primary(tmp_path)
    assert stopped is None and calls == [] and entry["changed"] == 0 and "s" not in entry["switchover"]


def test_a_dry_roll_asks_the_switchover_runbook_for_its_plan(fakes, tmp_path):
    fakes["dry_calls"] = True
    stopped, _ = run_primary(tmp_path, dry=True)
    assert stopped is None
    assert calls == [
        ("switchover", "pg2", "inventories/lab.py", ("pg1", "pg2"), True),
        ("converge", "pg1", "inventories/lab.py"),
    ]


def test_a_refused_switchover_stops_the_roll(fakes, tmp_path):
    fakes["switchover"] = 1
    stopped, _ = run_primary(tmp_path)
    assert stopped == "pg1: the switchover to pg2 failed (pyinfra exit 1, its output above)"
    assert [c[0] for c in calls] == ["gate", "switchover"]


def test_the_lag_sampler_asks_the_standbys_primary_until_the_rewrite_ends():
    asked = []

    class Answers(FakeGates):
        def run(self, name, command):
            asked.append(name)
            return 0, "4096"

    gates = Answers("inventories/lab.py", lab_hosts(), None, 30, 20)
    step = next(s for s in rolling.plan(lab_hosts()) if s.host == "pg2")
    sampler = rolling_run.LagSampler(gates, step, every=0.01)
    sampler.start()
    time.sleep(0.1)
    sampler.finish()
    assert set(asked) == {"pg1"} and len(sampler.samples) >= 2 and set(sampler.samples) == {4096.0}


def test_a_dataset_without_the_record_is_named_not_rewritten(monkeypatch, capsys, tmp_path):
    # pg2's data dataset carries no record of its blocks' compression (a replica seeded before the
    # seed recorded it): the roll says so, in its output and its report, and rewrites the other.
    data, wal = "dbpool/datastore/postgresql", "dbpool/datastore/postgresql-wal"
    sizes = (
        f"{data}\tused\t300\n{data}\tlogicalused\t900\n{data}\t{rolling.BLOCKS_COMPRESSION}\t-\n"
        f"{wal}\tused\t100\n{wal}\tlogicalused\t100\n{wal}\t{rolling.BLOCKS_COMPRESSION}\tlz4\n"
    )

    class Sizes(FakeGates):
        def run(self, name, command):
            return 0, sizes

    hosts = {**lab_hosts(), "pg2": {**lab_hosts()["pg2"], "zfs_compression": "zstd"}}
    gates = Sizes("inventories/lab.py", hosts, tmp_path / "ssh_config", 30, 20)
    step = next(s for s in rolling.plan(hosts) if s.host == "pg2")
    entry: dict = {}
    args = argparse.Namespace(inventory="inventories/lab.py", dry=True, max_lag=30)
    assert rolling_run.rewrite(args, gates, step, entry) is None
    assert entry["rewrite"] == {"datasets": [wal], "unrecorded": [data]}
    assert f"{data} has no record of its blocks' compression" in capsys.readouterr().out
