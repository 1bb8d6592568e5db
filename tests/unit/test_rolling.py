"""The rolling converge's plan, gate verdicts and reading of pyinfra's output (day2/rolling.py)."""

import functools

import pytest

from day2 import rolling
from model.hostdata import HostConfig
from validation import REPO_ROOT, load_inventory_isolated


@functools.cache
def lab_hosts():
    return load_inventory_isolated("inventories/lab.py")


def test_each_group_rolls_its_replicas_before_its_primary():
    steps = rolling.plan(lab_hosts())
    assert [(s.host, s.role) for s in steps] == [
        ("db2", "replica"),
        ("db1", "primary"),
        ("pg2", "replica"),
        ("pg1", "primary"),
    ]
    assert steps[0].group == "mariadb" and steps[0].primary == "db1"
    assert steps[1].primary is None


def test_a_primary_rolls_through_a_switchover_to_its_replica_by_default():
    steps = rolling.plan(lab_hosts())
    assert [(s.host, s.switch_to) for s in steps] == [
        ("db2", None),
        ("db1", "db2"),
        ("pg2", None),
        ("pg1", "pg2"),
    ]


def test_in_place_primaries_and_groups_without_replicas_roll_where_they_are():
    hosts = {name: dict(data) for name, data in lab_hosts().items()}
    hosts["db1"]["roll_primary"] = "in_place"
    del hosts["pg2"]
    steps = rolling.plan(hosts)
    assert [(s.host, s.switch_to) for s in steps] == [("db2", None), ("db1", None), ("pg1", None)]


def test_the_switchover_target_is_a_replica_this_roll_converged_first():
    replicas = [HostConfig.from_data(n, {"role": "replica", "primary": "p"}) for n in ("r1", "r2")]
    other = HostConfig.from_data("x", {"role": "replica", "primary": "elsewhere"})
    assert rolling.switchover_target("p", [other, *replicas], None) == "r1"
    assert rolling.switchover_target("p", replicas, {"r2", "p"}) == "r2"
    assert rolling.switchover_target("p", replicas, {"p"}) == "r1"  # --hosts left them all out
    assert rolling.switchover_target("p", [other], None) is None


def test_swapped_hosts_are_the_roles_after_the_switchover():
    swapped = rolling.swapped_hosts(lab_hosts(), "pg1", "pg2")
    assert (swapped["pg2"]["role"], swapped["pg2"]["primary"]) == ("primary", None)
    assert (swapped["pg1"]["role"], swapped["pg1"]["primary"]) == ("replica", "pg2")
    assert swapped["db1"] == lab_hosts()["db1"] and swapped["db2"] == lab_hosts()["db2"]
    assert swapped["pg1"]["ssh_port"] == lab_hosts()["pg1"]["ssh_port"]


def test_the_swapped_inventory_loads_as_pyinfra_loads_it(tmp_path):
    path = tmp_path / "pg1-switched-to-pg2.py"
    lab = str(REPO_ROOT / "inventories" / "lab.py")
    path.write_text(rolling.swapped_inventory_text(lab, "pg1", "pg2", ["pg1", "pg2"]))
    loaded = load_inventory_isolated(str(path))
    wanted = rolling.swapped_hosts(lab_hosts(), "pg1", "pg2")
    assert set(loaded) == set(wanted)
    keys = ("role", "primary", "engine", "ssh_port", "zfs_compression")
    for name, data in wanted.items():
        assert {k: loaded[name].get(k) for k in keys} == {k: data.get(k) for k in keys}, name
    assert [s.host for s in rolling.plan(loaded)] == ["db2", "db1", "pg1", "pg2"]


def test_refused_seconds_from_the_switchover_report():
    out = "==> switchover done\n    writes were refused for 6.2 s (pg1 shut down until pg2 took writes)\n"
    assert rolling.refused_seconds(out) == 6.2
    assert rolling.refused_seconds("nothing") is None


def test_hosts_limit_the_roll_and_keep_its_order():
    steps = rolling.plan(lab_hosts(), only={"pg1", "pg2"})
    assert [s.host for s in steps] == ["pg2", "pg1"]


def test_a_host_not_in_the_inventory_is_refused():
    with pytest.raises(ValueError, match="not in the inventory: nope"):
        rolling.plan(lab_hosts(), only={"db1", "nope"})


def test_replicas_of_a_primary():
    assert rolling.replicas_of(lab_hosts(), "db1") == ["db2"]
    assert rolling.replicas_of(lab_hosts(), "db2") == []


RUNNING = """*************************** 1. row ***************************
                Slave_IO_State: Waiting for master to send event
                   Master_Host: 10.99.0.11
              Slave_IO_Running: Yes
             Slave_SQL_Running: Yes
                Last_IO_Error:
         Seconds_Behind_Master: 0
"""


@pytest.mark.parametrize(
    "output, ok, detail",
    [
        (RUNNING, True, "replicating, 0 s behind"),
        (RUNNING.replace("Seconds_Behind_Master: 0", "Seconds_Behind_Master: 31"), False, "31 s behind"),
        (RUNNING.replace("Seconds_Behind_Master: 0", "Seconds_Behind_Master: NULL"), False, "NULL s behind"),
        (RUNNING.replace("Slave_IO_Running: Yes", "Slave_IO_Running: Connecting"), False, "IO Connecting"),
        (RUNNING.replace("10.99.0.11", "10.99.0.13"), False, "replicates from 10.99.0.13, not 10.99.0.11"),
        ("", False, "replicates from nobody"),
    ],
)
def test_mariadb_replica_verdict(output, ok, detail):
    passed, text = rolling.mariadb_replica_verdict(output, "10.99.0.11", 30)
    assert passed is ok and detail in text


@pytest.mark.parametrize(
    "output, ok, detail",
    [
        ("streaming t t", True, "everything received replayed"),
        ("streaming t f", False, "not everything received replayed"),
        ("none t t", False, "WAL receiver none"),
        ("none f f", False, "not in recovery"),
        ("", False, "unexpected answer"),
    ],
)
def test_postgresql_replica_verdict(output, ok, detail):
    passed, text = rolling.postgresql_replica_verdict(output)
    assert passed is ok and detail in text


@pytest.mark.parametrize(
    "output, ok, detail",
    [
        ("ONLINE\t12%", True, "ONLINE, 12% full"),
        ("DEGRADED\t12%", False, "DEGRADED, not ONLINE"),
        ("ONLINE\t80%", False, "80% full, at or over its threshold of 80%"),
        ("", False, "no pool"),
    ],
)
def test_pool_verdict(output, ok, detail):
    passed, text = rolling.pool_verdict(output, 80)
    assert passed is ok and detail in text


def test_server_verdict():
    assert rolling.server_verdict(0, "1\n") == (True, "answers")
    passed, text = rolling.server_verdict(1, "ERROR 2002 (HY000): Can't connect")
    assert not passed and "exit 1" in text and "Can't connect" in text


def test_changes_made_reads_the_grand_total():
    table = (
        "    Operation        Hosts   Success   Error   No Change\n"
        "    Grand total      169     117       -       52\n"
    )
    assert rolling.changes_made(table) == 117
    assert rolling.changes_made(table.replace("117", "-")) == 0
    assert rolling.changes_made("no table") is None


def test_changes_proposed_lists_what_would_change():
    table = (
        "--> Detected changes:\n"
        "    Operation                      Change         Conditional Change\n"
        "    MariaDB | my.cnf               1 (db2)        -\n"
        "    ZFS storage | Pool             -              -\n"
        "\n"
    )
    assert rolling.changes_proposed(table) == ["MariaDB | my.cnf: 1 (db2) / -"]


def test_ssh_config_from_the_inventorys_connection_data():
    text = rolling.ssh_config_text(lab_hosts(), "/repo")
    block = text.split("Host db1\n")[1].split("Host ")[0]
    assert "  HostName 127.0.0.1\n" in block and "  Port 2221\n" in block and "  User root\n" in block
    assert "  StrictHostKeyChecking no\n" in block and "  UserKnownHostsFile /dev/null\n" in block
    assert "  IdentityFile /" in block


@pytest.mark.parametrize(
    "dry, wanted, unwanted", [(True, ["--dry", "--diff"], "-y"), (False, ["-y"], "--dry")]
)
def test_a_dry_converge_keeps_pyinfras_change_detection(monkeypatch, dry, wanted, unwanted):
    """-y skips the "Detected changes" table, the only thing a --dry run shows."""
    import subprocess

    from day2 import rolling_run

    calls = []

    def run(argv, **kwargs):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(rolling_run.subprocess, "run", run)
    rolling_run.converge("inventories/lab.py", "db1", dry)
    [argv] = calls
    assert argv[1:5] == ["inventories/lab.py", "deploy.py", "--limit", "db1"]
    assert all(a in argv for a in wanted) and unwanted not in argv


def test_lag_during_a_rewrite_postgresql_asks_the_primary_in_bytes():
    command = rolling.lag_command("postgresql", "pg2", "pg2")
    assert "application_name = 'pg2'" in command and "slot_name = 'pg2'" in command
    assert rolling.lag_value("postgresql", 0, "1048576\n") == 1048576
    assert rolling.lag_value("postgresql", 0, "\n") is None  # no slot, no standby
    assert rolling.lag_value("postgresql", 2, "could not connect") is None
    with pytest.raises(ValueError):
        rolling.lag_command("postgresql", "pg2'; DROP", "pg2")


def test_lag_during_a_rewrite_mariadb_asks_the_replica_in_seconds():
    assert rolling.lag_command("mariadb", "db2", "db2") == rolling.replica_command("mariadb")
    assert rolling.lag_value("mariadb", 0, "   Seconds_Behind_Master: 7\n") == 7
    assert rolling.lag_value("mariadb", 0, "   Seconds_Behind_Master: NULL\n") is None
    assert rolling.lag_value("mariadb", 1, "") is None


def test_lag_summary_and_line():
    lag = rolling.lag_summary("postgresql", [0, 3 * 1024**2, None, None, 1024])
    assert lag == {"unit": "bytes", "max": 3 * 1024**2, "samples": 5, "unanswered": 2}
    assert rolling.lag_line(lag) == (
        "replication lag during it: at most 3.0 MiB of WAL behind (5 samples, 2 unanswered)"
    )
    small = rolling.lag_summary("postgresql", [0, 24576])
    assert "at most 24 KiB of WAL behind (2 samples, 0 unanswered)" in rolling.lag_line(small)
    unknown = rolling.lag_summary("mariadb", [None])
    assert rolling.lag_line(unknown).startswith("replication lag during it: unknown")
