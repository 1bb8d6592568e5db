"""`./dbzfs upgrade` (day2/upgrade_run.py) with pyinfra and the gates stood in for: the steps run in
the plan's order, each with an inventory of the group's data at that step, the gates after each,
the stop at the first failure with that step's inventory kept, the report, and the refusals."""

import json
import subprocess
from pathlib import Path

import pytest

from day2 import kit, upgrade_run
from validation import REPO_ROOT, load_inventory_isolated

LAB = str(REPO_ROOT / "inventories" / "lab.py")
REAL_RUN = subprocess.run


class Ran:
    def __init__(self, fail_at=None):
        self.calls: list[list[str]] = []
        self.inventories: list[dict] = []
        self.fail_at = fail_at

    def __call__(self, argv, **kwargs):
        argv = [str(a) for a in argv]
        if "--dump-data" in argv:
            return REAL_RUN(argv, **kwargs)  # the inventory loader
        if argv[1:3] == ["-m", "validation"]:
            return subprocess.CompletedProcess(argv, 0, "", "")
        self.calls.append(argv)
        self.inventories.append(load_inventory_isolated(argv[1]))
        rc = 1 if self.fail_at is not None and len(self.calls) == self.fail_at else 0
        out = "writes were refused for 4.2 s\n" if "switchover.py" in argv[2] else ""
        return subprocess.CompletedProcess(argv, rc, out, "")


@pytest.fixture
def lab_on_12(tmp_path):
    path = tmp_path / "lab12.py"
    hosts = load_inventory_isolated(LAB)
    path.write_text(
        kit.overridden_inventory_text(LAB, {n: {"debian_release": "12"} for n in hosts}, "a test")
    )
    return str(path)


@pytest.fixture
def stand_ins(monkeypatch):  # (pyinfra's runs, the gates asked), with Gates.failing to fail one
    ran = Ran()
    monkeypatch.setattr(subprocess, "run", ran)
    gated = []

    class Gates:
        failing: dict = {}

        def __init__(self, *a, **k):
            pass

        def _asked(self, gate, step):
            gated.append((f"before: {gate}", step.host))
            return self.failing.get((gate, step.host), (True, "ok"))

        def server(self, step):
            return self._asked("server", step)

        def pool(self, step):
            return self._asked("pool", step)

        def replication(self, step):
            return self._asked("replication", step)

        def wait(self, gate, step):
            gated.append((gate, step.host))
            return True, "ok", 0.0

        def run(self, name, command):
            return 0, f"dbpool/datastore@dbzfs-upgrade-bookworm-to-trixie\t{2**30}\n"

    monkeypatch.setattr(upgrade_run, "Gates", Gates)
    yield ran, gated
    Gates.failing.clear()


def test_a_mariadb_group_runs_its_steps_in_order_with_each_steps_data(lab_on_12, stand_ins, tmp_path):
    ran, gated = stand_ins
    report = tmp_path / "report.json"
    assert upgrade_run.main([lab_on_12, "--group", "db1", "--report", str(report)]) == 0
    runbooks = [c[2] for c in ran.calls]
    assert runbooks == [
        "runbooks/upgrade_release.py",
        "deploy.py",
        "runbooks/switchover.py",
        "runbooks/upgrade_release.py",
        "deploy.py",
        "runbooks/switchover.py",
    ]
    # db2 is moved from its own release step on; db1 until its own, a replica meanwhile
    assert ran.inventories[0]["db2"]["debian_release"] == "13"
    assert ran.inventories[0]["db1"]["debian_release"] == "12"
    assert ran.inventories[3]["db1"]["debian_release"] == "13"
    assert ran.inventories[3]["db1"]["role"] == "replica" and ran.inventories[3]["db1"]["primary"] == "db2"
    assert ran.inventories[5]["db2"]["role"] == "primary"  # the switch back runs with the data before it
    assert "--limit" in ran.calls[0] and ran.calls[0][ran.calls[0].index("--limit") + 1] == "db2"
    assert ("checks", "db2") in gated and ("pool", "db1") in gated
    summary = json.loads(report.read_text())
    assert [s["refused_s"] for s in summary["steps"] if s["step"] == "switchover"] == [4.2, 4.2]
    assert summary["snapshots"][0]["used"] == 2**30 and summary["stopped"] is None


def test_a_failed_step_stops_the_upgrade_and_keeps_its_inventory(lab_on_12, stand_ins, capsys):
    ran, _ = stand_ins
    ran.fail_at = 2
    assert upgrade_run.main([lab_on_12, "--group", "mariadb"]) == 1
    out = capsys.readouterr().out
    assert "upgrade STOPPED: db2: deploy.py" in out
    kept = Path(out.split("the group's data at this step: ")[1].split()[0])
    assert load_inventory_isolated(str(kept))["db2"]["debian_release"] == "13"
    assert len(ran.calls) == 2


def test_dry_runs_only_the_release_steps_probes(lab_on_12, stand_ins):
    ran, gated = stand_ins
    assert upgrade_run.main([lab_on_12, "--group", "postgresql", "--dry"]) == 0
    assert [(c[2], c[-1]) for c in ran.calls] == [
        ("runbooks/upgrade_release.py", "--dry"),
        ("runbooks/upgrade_release.py", "--dry"),
    ]
    assert [g for g in gated if not g[0].startswith("before: ")] == []


def test_a_group_on_the_new_release_is_nothing_to_do(stand_ins, capsys, tmp_path):
    ran, _ = stand_ins
    hosts = load_inventory_isolated(LAB)
    on_13 = tmp_path / "lab13.py"
    on_13.write_text(
        kit.overridden_inventory_text(LAB, {n: {"debian_release": "13"} for n in hosts}, "a test")
    )
    assert upgrade_run.main([str(on_13), "--group", "pg1"]) == 0
    assert "nothing to do" in capsys.readouterr().out and ran.calls == []


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--group", "nope"], "names no replication group"),
        (["--group", "db1", "--data", "max-lag=60"], "not an argument of ./dbzfs upgrade"),
    ],
)
def test_refusals_touch_nothing(lab_on_12, stand_ins, capsys, argv, says):
    ran, _ = stand_ins
    assert upgrade_run.main([lab_on_12, *argv]) == 2
    assert says in capsys.readouterr().out and ran.calls == []


def test_a_stopped_upgrade_says_how_to_resume_and_resumes_from_that_step(lab_on_12, stand_ins, capsys):
    ran, _ = stand_ins
    ran.fail_at = 3  # the switchover
    assert upgrade_run.main([lab_on_12, "--group", "mariadb"]) == 1
    assert "--group mariadb --from 3" in capsys.readouterr().out
    ran.fail_at, ran.calls, ran.inventories = None, [], []
    assert upgrade_run.main([lab_on_12, "--group", "mariadb", "--from", "3"]) == 0
    assert [c[2] for c in ran.calls][0] == "runbooks/switchover.py" and len(ran.calls) == 4
    assert ran.inventories[0]["db2"]["debian_release"] == "13"  # the data of step 3, as before
    assert upgrade_run.main([lab_on_12, "--group", "mariadb", "--from", "9"]) == 2


def test_a_group_not_healthy_and_caught_up_is_refused_before_any_step(lab_on_12, stand_ins, capsys):
    ran, gated = stand_ins
    upgrade_run.Gates.failing[("replication", "db2")] = (False, "db2: 95 s behind db1 (max_lag 30)")
    assert upgrade_run.main([lab_on_12, "--group", "mariadb"]) == 2
    out = capsys.readouterr().out
    assert "db2: replication: db2: 95 s behind db1" in out and "no host was touched" in out
    assert ran.calls == []
    assert ("before: server", "db1") in gated and ("before: pool", "db2") in gated
    assert ("before: replication", "db1") not in gated  # the primary replicates from nobody


def test_the_dry_run_refuses_an_unhealthy_group_as_the_run_does(lab_on_12, stand_ins):
    ran, _ = stand_ins
    upgrade_run.Gates.failing[("pool", "pg1")] = (False, "DEGRADED")
    assert upgrade_run.main([lab_on_12, "--group", "postgresql", "--dry"]) == 2 and ran.calls == []
