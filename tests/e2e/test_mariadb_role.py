"""The mariadb role on the lab pair (db1 primary, db2 GTID replica) after the first converge: the
testinfra checks pass, a row written on the primary reaches the replica within seconds, a
killed replica catches up with nothing lost (catch-up time measured), and application users
from data work over the network with their password never shown. Leaves replication healthy."""

import re
import secrets as pysecrets
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from lab import control, vm as vmmod

from tests.e2e.pyinfra_results import grand_total

pytestmark = pytest.mark.e2e

PRIMARY, REPLICA = "db1", "db2"
TABLE = "dbzfs_e2e.rows"
REPLICATION_DEADLINE = 10  # seconds for one row to reach the replica
CATCH_UP_DEADLINE = 300  # seconds for a restarted replica (TCG guests are slow)


def sql(lab, name, statement):
    return lab.check(name, f"mariadb -NBe {_quote(statement)}").strip()


def _quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"


def wait_for(predicate, deadline, interval=0.5):
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline:
        if predicate():
            return time.monotonic() - t0
        time.sleep(interval)
    return None


def table_state(lab, name):
    """(row count, CHECKSUM TABLE) of the test table."""
    count = sql(lab, name, f"SELECT COUNT(*) FROM {TABLE}")
    checksum = sql(lab, name, f"CHECKSUM TABLE {TABLE} EXTENDED").split()[-1]
    return count, checksum


def replica_status(lab):
    out = lab.check(REPLICA, "mariadb -E -e 'SHOW SLAVE STATUS'")
    return {
        k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines() if ":" in line)
    }


@pytest.fixture(scope="module")
def pair(converged):
    sql(converged, PRIMARY, "CREATE DATABASE IF NOT EXISTS dbzfs_e2e")
    sql(
        converged,
        PRIMARY,
        f"CREATE TABLE IF NOT EXISTS {TABLE} (id BIGINT AUTO_INCREMENT "
        "PRIMARY KEY, token VARCHAR(64) NOT NULL, at TIMESTAMP(6) NOT NULL "
        "DEFAULT CURRENT_TIMESTAMP(6))",
    )
    return converged


def test_testinfra_checks_pass(converged):
    result = converged.testinfra("tests/infra/test_mariadb.py")
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout), result.stdout[-3000:]
    assert " failed" not in result.stdout and " skipped" not in result.stdout


def test_row_written_on_the_primary_reaches_the_replica(pair):
    token = pysecrets.token_hex(8)
    sql(pair, PRIMARY, f"INSERT INTO {TABLE} (token) VALUES ('{token}')")
    took = wait_for(
        lambda: sql(pair, REPLICA, f"SELECT COUNT(*) FROM {TABLE} WHERE token = '{token}'") == "1",
        REPLICATION_DEADLINE,
    )
    assert took is not None, (
        f"row {token} not on {REPLICA} after {REPLICATION_DEADLINE} s: {replica_status(pair)}"
    )
    print(f"\nrow replicated {PRIMARY} -> {REPLICA} in {took:.1f} s (polled over ssh)")


def test_replica_is_read_only(pair):
    # A plain account would be refused; root has READ_ONLY ADMIN, so check the setting itself.
    assert sql(pair, REPLICA, "SELECT @@global.read_only") == "1"


def test_killed_replica_catches_up_with_nothing_lost(pair, timings):
    # SIGKILL: no shutdown, InnoDB and the relay log recover at the next start. Debian's unit
    # would restart the server after 5 s (Restart=on-abnormal); the stop right after the kill
    # cancels that pending restart, so the primary writes while the replica is down.
    pair.check(REPLICA, "systemctl kill -s KILL mariadb.service && sleep 1 && systemctl stop mariadb.service")
    assert pair.run(REPLICA, "systemctl is-active mariadb.service").stdout.strip() != "active"
    assert pair.run(REPLICA, "pidof mariadbd").rc != 0
    for _batch in range(20):
        values = ", ".join(f"('{pysecrets.token_hex(8)}')" for _ in range(50))
        sql(pair, PRIMARY, f"INSERT INTO {TABLE} (token) VALUES {values}")
    sql(pair, PRIMARY, f"UPDATE {TABLE} SET token = CONCAT(token, '-u') WHERE id % 7 = 0")
    sql(pair, PRIMARY, f"DELETE FROM {TABLE} WHERE id % 11 = 0")
    expected = table_state(pair, PRIMARY)
    primary_gtid = sql(pair, PRIMARY, "SELECT @@global.gtid_binlog_pos")

    t0 = time.monotonic()
    pair.check(REPLICA, "systemctl start mariadb.service")

    def caught_up():
        r = pair.run(REPLICA, f"mariadb -NBe {_quote('SELECT @@global.gtid_slave_pos')}")
        return r.ok and r.stdout.strip() == primary_gtid

    took = wait_for(caught_up, CATCH_UP_DEADLINE, interval=1)
    assert took is not None, f"{REPLICA} did not reach {primary_gtid}: {replica_status(pair)}"
    catch_up = time.monotonic() - t0
    timings["mariadb replica catch-up"] = catch_up
    print(
        f"\n{REPLICA} caught up to {primary_gtid} in {catch_up:.1f} s after its restart ({expected[0]} rows)"
    )
    assert table_state(pair, REPLICA) == expected
    status = replica_status(pair)
    assert status["Slave_IO_Running"] == "Yes" and status["Slave_SQL_Running"] == "Yes", status
    assert status["Using_Gtid"] == "Slave_Pos"


@pytest.fixture
def app_data(tmp_path, monkeypatch):
    """Group data adding an application database and user to the lab's MariaDB hosts, and a
    secrets file (0600, outside the repo) with the lab's replication password and the user's."""
    group_data = tmp_path / "group_data"
    group_data.mkdir()
    (group_data / "mariadb.py").write_text(
        'databases = [{"name": "e2e_app"}]\n'
        'db_users = [{"name": "e2e_app", "password_secret": "e2e_app_password", '
        '"database": "e2e_app"}]\n'
        # the replica's own address: the client below connects from it, and the firewall's
        # rules (which let the group's members in already) stay as the lab's data has them, so
        # the deployed files still match that data (test_deployed_files)
        'db_client_networks = ["10.99.0.12/32"]\n'
    )
    lab_secrets_file = Path(control.lab_env()["DBZFS_SECRETS_FILE"])  # the lab's own
    lab_secrets = yaml.safe_load(lab_secrets_file.read_text())
    password = pysecrets.token_urlsafe(18)
    secrets_file = tmp_path / "secrets.yml"
    secrets_file.touch(mode=0o600)
    secrets_file.write_text(yaml.safe_dump({**lab_secrets, "e2e_app_password": password}))
    monkeypatch.setenv("DBZFS_SECRETS_FILE", str(secrets_file))
    return group_data, password


def test_application_user_from_data(pair, app_data):
    group_data, password = app_data
    result = pair.pyinfra("-v", "--limit", PRIMARY, "--limit", REPLICA, "--group-data", str(group_data))
    output = result.stdout + result.stderr
    result.check()
    assert password not in output
    # The user reached the replica through replication; it connects from the replica's
    # address with the password from an option file (never on a command line).
    vm = pair.vms[REPLICA]
    subprocess.run(
        vmmod.ssh_argv(vm, ["umask 077; mkdir -p /run/dbzfs-e2e; cat > /run/dbzfs-e2e/app.cnf"]),
        input=f'[client]\nuser = e2e_app\npassword = "{password}"\n',
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )
    try:
        out = pair.check(
            REPLICA,
            "mariadb --defaults-extra-file=/run/dbzfs-e2e/app.cnf "
            f"-h {pair.vms[PRIMARY].private_address} -NBe "
            "'CREATE TABLE IF NOT EXISTS e2e_app.t (id INT PRIMARY KEY); "
            "SELECT CURRENT_USER()' 2>&1 || true",
        )
        assert "CREATE command denied" in out  # DML only, no DDL: least privilege
        out = pair.check(
            REPLICA,
            "mariadb --defaults-extra-file=/run/dbzfs-e2e/app.cnf "
            f"-h {pair.vms[PRIMARY].private_address} -NBe "
            "'SELECT CURRENT_USER(); SHOW DATABASES'",
        )
        assert out.split() == ["e2e_app@10.99.0.12", "e2e_app", "information_schema"]
    finally:
        pair.run(REPLICA, "rm -rf /run/dbzfs-e2e")
    # A second converge with the same data changes nothing and restarts nothing.
    before = {name: uptime(pair, name) for name in (PRIMARY, REPLICA)}
    again = pair.pyinfra("--limit", PRIMARY, "--limit", REPLICA, "--group-data", str(group_data))
    again.check()
    assert grand_total(again.stdout + again.stderr)["changed"] == 0, again.stdout[-4000:]
    for name in (PRIMARY, REPLICA):
        assert uptime(pair, name) > before[name], f"{name} was restarted"


def uptime(lab, name):
    return int(
        sql(
            lab,
            name,
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'",
        )
    )


def test_config_change_restarts_the_server(pair, tmp_path):
    """InnoDB settings are read at start: a changed my.cnf restarts the server (here the
    replica, which then resumes replicating); converging back restores the sized value."""
    group_data = tmp_path / "group_data"
    group_data.mkdir()
    (group_data / "mariadb.py").write_text('db_settings = {"max_connections": 321}\n')
    sized = sql(pair, REPLICA, "SELECT @@global.max_connections")
    before = uptime(pair, REPLICA)
    t0 = time.monotonic()
    pair.pyinfra("--limit", REPLICA, "--group-data", str(group_data)).check()
    assert sql(pair, REPLICA, "SELECT @@global.max_connections") == "321"
    assert uptime(pair, REPLICA) < before + (time.monotonic() - t0)  # restarted
    pair.pyinfra("--limit", REPLICA).check()
    assert sql(pair, REPLICA, "SELECT @@global.max_connections") == sized
    took = wait_for(
        lambda: (
            replica_status(pair).get("Slave_SQL_Running") == "Yes"
            and replica_status(pair).get("Slave_IO_Running") == "Yes"
        ),
        60,
    )
    assert took is not None, replica_status(pair)
