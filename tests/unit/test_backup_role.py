"""roles/backup.py: what the backup host pulls from where, the files it writes, the database hosts'
access for its key, the data's validation, and the `zfs allow` operation against fact stubs."""

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyinfra.facts.files import FileContents

from facts.zfs import ZfsAllowed, parse_allowed
from host_scripts import backup_pull
from model.hostdata import HostConfig
from model.secrets import Secrets
from operations import snapshots as snapshot_ops, zfs as zfs_ops
from roles import backup, pgbackrest
from validation import validate

from tests.unit.conftest import backup_data
from tests.unit.fact_stubs import run_operation

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def key_pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("key") / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(path)], check=True)
    return path.read_text(), " ".join(path.with_suffix(".pub").read_text().split()[:2])


@pytest.fixture
def with_backup(fleet):
    return {**fleet, "backup1": backup_data()}


def configs(fleet):
    return [HostConfig.from_data(name, data) for name, data in fleet.items()]


def secrets_with(key_pair, **more):
    # the PostgreSQL hosts' key to the pgBackRest repository too (roles/pgbackrest.py)
    values = {"replication_password": "r", backup.SECRET: key_pair[0], pgbackrest.SECRET: key_pair[0]}
    return Secrets({**values, **more}, "test")


def test_the_backup_host_pulls_every_database_host_s_data_and_log(with_backup):
    hosts = configs(with_backup)
    me = next(h for h in hosts if h.is_backup_host)
    config = json.loads(backup.pull_config_text(me, hosts))
    assert config["target"] == "dbpool/backup" and config["user"] == backup.USER
    assert [s["host"] for s in config["sources"]] == ["db1", "db2", "pg1", "pg2"]
    db2 = config["sources"][1]
    assert db2 == {
        "host": "db2",
        "address": "10.99.0.12",
        "cluster": "mariadb",
        "engine": "mariadb",
        "datasets": {"data": "dbpool/datastore/mysql", "log": "dbpool/datastore/mysql-log"},
    }
    assert backup.copy_of(me, hosts[1], "data") == "dbpool/backup/mariadb/db2/data"


def test_the_backup_host_s_sanoid_prunes_each_group_by_its_engine_s_counts(with_backup):
    with_backup["backup1"]["backup_retention"] = {
        "mariadb": {"hourly": 10, "daily": 7},
        "postgresql": {"daily": 3},
    }
    hosts = configs(with_backup)
    me = next(h for h in hosts if h.is_backup_host)
    texts = backup.files_text(me, hosts)
    conf = texts[backup.SANOID_CONF]
    assert "[dbpool/backup/mariadb]\n\tuse_template = mariadb\n\trecursive = yes\n" in conf
    assert "[dbpool/backup/postgresql]\n\tuse_template = postgresql\n" in conf
    mariadb = conf.split("[template_mariadb]")[1].split("[template_")[0]
    assert "\tautosnap = no\n" in mariadb and "\thourly = 10\n" in mariadb and "\tdaily = 7\n" in mariadb
    assert "\tmonthly = 0\n" in mariadb  # every kind: none of sanoid's own defaults
    assert "\tdaily = 3\n" in conf.split("[template_postgresql]")[1]
    assert f"ExecStart=/usr/bin/python3 {backup.SCRIPT} --config {backup.CONFIG}" in texts[backup.UNIT_PATH]
    assert "OnUnitActiveSec=15min" in texts[backup.TIMER_PATH]


def test_the_database_hosts_let_the_key_in_from_the_backup_hosts_only(key_pair, with_backup):
    public = backup.public_key(key_pair[0])
    assert public == key_pair[1]
    backups = [h for h in configs(with_backup) if h.is_backup_host]
    line = backup.authorized_keys_text(public, backups)
    assert line == f'restrict,from="10.99.0.51" {public} dbzfs-backup@backup1\n'


def test_a_key_that_is_not_one_is_refused_without_showing_it():
    with pytest.raises(ValueError, match="not an OpenSSH private key") as info:
        backup.public_key("-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-key\n")
    assert "not-a-key" not in str(info.value)


def test_a_valid_fleet_with_a_backup_host(key_pair, with_backup):
    assert validate(with_backup, secrets_with(key_pair)) == []


def problems(fleet, secrets):
    return {(p.host, p.key): p for p in validate(fleet, secrets)}


def test_the_backup_key_must_be_there_and_be_a_key(key_pair, with_backup):
    found = problems(with_backup, Secrets({"replication_password": "r"}, "test"))
    assert ("backup1", f"secrets.{backup.SECRET}") in found
    found = problems(with_backup, secrets_with(("not a key", "")))
    problem = found[("backup1", f"secrets.{backup.SECRET}")]
    assert "not an OpenSSH private key" in problem.message and "not a key" not in str(problem)


def test_a_backup_host_runs_no_database(key_pair, with_backup):
    with_backup["backup1"].update(engine="mariadb", server_id=9)
    found = problems(with_backup, secrets_with(key_pair))
    assert "runs no database" in found[("backup1", "engine")].message
    assert ("backup1", "server_id") in found


def test_every_host_needs_an_address_the_backup_host_can_use(key_pair, with_backup):
    with_backup["pg2"]["replication_address"] = None
    with_backup["backup1"]["replication_address"] = None
    found = problems(with_backup, secrets_with(key_pair))
    assert "pulls from it there" in found[("pg2", "replication_address")].message
    assert "from that address only" in found[("backup1", "replication_address")].message


def test_the_backup_retention_keeps_something_of_each_engine(key_pair, with_backup):
    with_backup["backup1"]["backup_retention"] = {"mariadb": {"hourly": 0}, "postgresql": {"daily": 3}}
    found = problems(with_backup, secrets_with(key_pair))
    assert "keeps no copy" in found[("backup1", "backup_retention['mariadb']")].message
    with_backup["backup1"]["backup_retention"] = {"mariadb": {"daily": 3}, "postgresql": {"dayly": 3}}
    found = problems(with_backup, secrets_with(key_pair))
    assert "did you mean 'daily'" in found[("backup1", "backup_retention['postgresql']['dayly']")].fix
    with_backup["backup1"].update(
        backup_retention={"mariadb": {"daily": 1}, "postgresql": {"daily": 1}}, backup_pull_minutes=0
    )
    found = problems(with_backup, secrets_with(key_pair))
    assert ("backup1", "backup_pull_minutes") in found


ALLOW_OUTPUT = """\
---- Permissions on dbpool/datastore ---------------------------------
Local+Descendent permissions:
	user dbzfs-backup hold,send
	group staff snapshot
---- Permissions on dbpool -------------------------------------------
Local+Descendent permissions:
	user other send
""".splitlines()


def test_the_allow_fact_reads_the_dataset_s_own_permissions():
    assert parse_allowed(ALLOW_OUTPUT) == {"dbzfs-backup": ["hold", "send"]}
    assert parse_allowed([]) == {}
    assert parse_allowed(["MISSING"]) is None


@pytest.mark.parametrize(
    "live, wanted, expected",
    [
        ({}, ["send"], ["zfs allow -l -d -u dbzfs-backup send dbpool/datastore"]),
        ({"dbzfs-backup": ["send"]}, ["send"], []),
        (
            {"dbzfs-backup": ["destroy", "send"]},
            ["send"],
            [
                "zfs unallow -l -d -u dbzfs-backup dbpool/datastore",
                "zfs allow -l -d -u dbzfs-backup send dbpool/datastore",
            ],
        ),
        ({"dbzfs-backup": ["send"]}, [], ["zfs unallow -l -d -u dbzfs-backup dbpool/datastore"]),
        (None, [], []),  # no dataset yet: nothing to take away
    ],
)
def test_the_allow_operation_gives_exactly_the_permissions(live, wanted, expected):
    commands, host = run_operation(
        zfs_ops.allowed,
        {ZfsAllowed: live},
        dataset_name="dbpool/datastore",
        user="dbzfs-backup",
        permissions=wanted,
    )
    assert commands == expected
    assert bool(host.noops) == (not expected)


# --- the first pull (issue 45: a fleet converged with its backup host in one run) -------------------

PULL_ARGS = {"unit": backup.UNIT, "marker": backup.METRICS, "succeeded": backup.SUCCEEDED}
LAB_COPIES = [("db2", "data"), ("db2", "log"), ("pg2", "data"), ("pg2", "log")]
START = (
    'while [ "$(systemctl show -p ActiveState --value dbzfs-backup-pull.service)" = activating ]; '
    "do sleep 2; done; systemctl start dbzfs-backup-pull.service && journalctl -o cat -n 3 -u "
    "dbzfs-backup-pull.service"
)


def check_of(source, role, marker=backup.METRICS):
    return (
        f'grep -q -- \'^dbzfs_backup_copies{{source="{source}",dataset="{role}"}} [1-9]\' {marker} '
        f"|| {{ echo 'dbzfs-backup-pull.service ran, and {marker} shows no copy of the {role} dataset "
        f"of {source}' >&2; exit 1; }}"
    )


def run_metrics(*outcomes):
    """The metrics file a run of host_scripts/backup_pull.py leaves, as FileContents lines."""
    return backup_pull.metrics_text(list(outcomes), datetime(2026, 12, 6, 2, 9, tzinfo=UTC)).splitlines()


def pulled(source, role, copies=1):
    snaps = [backup_pull.Snapshot(f"autosnap_{i}_hourly", str(i), 1796000000 + i) for i in range(copies)]
    return backup_pull.Outcome(source, role, "pulled", f"{copies} new snapshots", snaps)


def test_the_copies_the_first_pull_must_leave_are_those_of_the_hosts_that_take_snapshots(with_backup):
    assert backup.expected_copies(configs(with_backup)) == LAB_COPIES
    # a taker outside the run (--limit backup1, or a replica declared but not converged yet) may
    # hold no snapshot yet: the backup host's converge does not wait for its copies
    assert backup.expected_copies(configs(with_backup), {"backup1", "db1", "db2", "pg1"}) == LAB_COPIES[:2]
    assert backup.expected_copies(configs(with_backup), {"backup1"}) == []
    for data in with_backup.values():
        data["snapshot_on"] = "primary"
    assert [h.name for h in backup.takers(configs(with_backup))] == ["db1", "pg1"]


def test_a_run_that_found_no_snapshot_yet_is_not_the_first_pull():
    """The timer's run at 02:09, before the database hosts' first snapshots (02:12): it succeeded
    with nothing to pull; the converge's first pull, after the snapshots, must still pull."""
    early = run_metrics(*(backup_pull.Outcome(h, r, "none", "skipped") for h, r in LAB_COPIES))
    assert backup.SUCCEEDED in early
    commands, host = run_operation(
        snapshot_ops.first_pull, {FileContents: early}, expected=LAB_COPIES, **PULL_ARGS
    )
    assert commands == [START, *(check_of(h, r) for h, r in LAB_COPIES)]
    assert host.noops == []


@pytest.mark.parametrize(
    "marker",
    [
        None,  # no run yet
        run_metrics(*(pulled(h, r) for h, r in LAB_COPIES[:2])),  # pg2 joined the fleet since
        run_metrics(
            *(pulled(h, r) for h, r in LAB_COPIES[:3]), backup_pull.Outcome("pg2", "log", "failed", "x", [])
        ),
        run_metrics(*(pulled(h, r) for h, r in LAB_COPIES), pulled("pg2", "log", 0)),  # pg2 log: 0 copies
    ],
)
def test_the_first_pull_runs_until_a_run_left_a_copy_of_every_host_that_takes_snapshots(marker):
    commands, _ = run_operation(
        snapshot_ops.first_pull, {FileContents: marker}, expected=LAB_COPIES, **PULL_ARGS
    )
    assert commands[0] == START


def test_once_a_run_holds_every_copy_the_converge_leaves_the_pulls_to_the_timer():
    done = run_metrics(*(pulled(h, r, 3) for h, r in LAB_COPIES), backup_pull.Outcome("db1", "data", "none"))
    commands, host = run_operation(
        snapshot_ops.first_pull, {FileContents: done}, expected=LAB_COPIES, **PULL_ARGS
    )
    assert commands == []
    assert host.noops == [
        f"{backup.UNIT}'s last run succeeded with copies of 4 dataset(s) ({backup.METRICS})"
    ]
    assert snapshot_ops.copies_held(done) == {pair: 3 for pair in LAB_COPIES}


def test_the_first_pull_s_checks_read_the_metrics_the_script_writes(tmp_path):
    """The grep of each dataset's copies, run by a real shell on the file backup_pull.py writes."""
    marker = tmp_path / "dbzfs_backup.prom"
    marker.write_text("\n".join(run_metrics(pulled("db2", "data", 2), pulled("db2", "log", 0))) + "\n")
    args = {**PULL_ARGS, "marker": str(marker)}
    commands, _ = run_operation(
        snapshot_ops.first_pull, {FileContents: None}, expected=LAB_COPIES[:2], **args
    )
    data, log = (subprocess.run(["sh", "-c", c], capture_output=True, text=True) for c in commands[1:])
    assert data.returncode == 0
    assert log.returncode == 1 and "shows no copy of the log dataset of db2" in log.stderr


def test_the_timer_starts_after_the_first_pull_which_follows_the_sources_first_snapshots(
    monkeypatch, with_backup
):
    hosts = configs(with_backup)
    calls = []
    monkeypatch.setattr(backup, "configs", lambda: hosts)
    monkeypatch.setattr(backup.engine, "active_names", lambda: {h.name for h in hosts})
    monkeypatch.setattr(
        backup.units, "current", lambda **kw: calls.append(("units", kw["units"], kw["loaded"]))
    )
    monkeypatch.setattr(
        backup.engine,
        "step",
        lambda applies, why, op, **kw: calls.append(("step", applies, op, kw.get("expected"))),
    )
    for name in ("backup1", "db2"):
        monkeypatch.setattr(
            backup.engine, "host_config", lambda name=name: next(h for h in hosts if h.name == name)
        )
        calls.clear()
        backup.schedule._inner()
        if name == "backup1":
            assert calls == [
                ("units", {"sanoid.timer": []}, [backup.UNIT, backup.TIMER, "sanoid.service"]),
                ("step", True, snapshot_ops.first_pull, LAB_COPIES),
                ("units", {backup.TIMER: []}, [backup.UNIT]),
            ]
        else:  # the same operation, a no-op: the backup host's pull waits for this host's snapshots
            assert calls == [("step", False, snapshot_ops.first_pull, [])]
    deploy = (REPO / "deploy.py").read_text()
    assert deploy.index("snapshots.schedule()") < deploy.index("backup.schedule()")


def test_the_timer_does_not_elapse_at_once_when_the_converge_starts_it(with_backup):
    hosts = configs(with_backup)
    timer = backup.files_text(next(h for h in hosts if h.is_backup_host), hosts)[backup.TIMER_PATH]
    assert "\nOnActiveSec=5min\n" in timer and "\nOnBootSec" not in timer
