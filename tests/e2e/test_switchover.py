"""Planned switchovers and back while a client writes (runbooks/switchover.py), for each engine:
the primary moves to the replica and returns, every write the client saw acknowledged is on both
servers with its payload, and a converge with the inventory updated as the runbook says changes
nothing (a converge with the inventory not updated refuses: test_topology's check).

The client runs in the first host of the pair (it survives a switchover) and writes one row per
statement over the private network to whichever server takes it, logging each acknowledged id;
the longest gap between two acknowledged writes is the client's view of the time writes were
refused. MariaDB's client tries each server in turn; PostgreSQL's is libpq's own multi-host
connection with `target_session_attrs=read-write`, as an application follows a moved primary."""

import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from lab import control, vm as vmmod

from tests.e2e.conftest import REPO
from tests.e2e.pyinfra_results import assert_changed_nothing

pytestmark = pytest.mark.e2e

SWITCHED = REPO / "tests" / "e2e" / "inventories" / "mariadb_switched.py"
RUNBOOK = "runbooks/switchover.py"
ADDRESSES = {"db1": "10.99.0.11", "db2": "10.99.0.12", "db3": "10.99.0.13"}
WRITER = r"""cat > /root/writer.sh <<'SH'
#!/bin/bash
# One row per statement to the first server that takes it; "ok ID HOST EPOCH" once acknowledged.
i=0
while [ ! -e /root/writer.stop ]; do
  i=$((i + 1)); acked=0
  for h in 10.99.0.11 10.99.0.12; do
    if mariadb -h "$h" -u switchtest -pswitchtest --connect-timeout=2 -e \
        "INSERT INTO switchtest.t (id, payload) VALUES ($i, SHA2('row $i', 256))" 2>/dev/null; then
      echo "ok $i $h $(date +%s.%N)" >> /root/writer.log; acked=1; break
    fi
  done
  [ "$acked" = 1 ] || echo "refused $i - $(date +%s.%N)" >> /root/writer.log
done
echo done >> /root/writer.log
SH
rm -f /root/writer.log /root/writer.stop; setsid nohup bash /root/writer.sh >/dev/null 2>&1 < /dev/null &"""
STOP_WRITER = (
    "touch /root/writer.stop; for i in $(seq 60); do grep -qx done /root/writer.log && break; sleep 1; done"
)
# Ids whose payload is the one the client wrote (a torn or wrong row would not match).
INTACT = "SELECT id FROM switchtest.t WHERE payload = SHA2(CONCAT('row ', id), 256)"
SETUP = (
    "CREATE DATABASE IF NOT EXISTS switchtest; "
    "CREATE TABLE IF NOT EXISTS switchtest.t (id INT PRIMARY KEY, payload CHAR(64) NOT NULL); "
    "CREATE USER IF NOT EXISTS 'switchtest'@'10.99.0.0/255.255.255.0' IDENTIFIED BY 'switchtest'; "
    "GRANT SELECT, INSERT ON switchtest.* TO 'switchtest'@'10.99.0.0/255.255.255.0'"
)


def sql(lab, name, statement):
    return lab.check(name, f'mariadb -NB -e "{statement}"').strip()


def acked(lab):
    return [
        line.split()
        for line in lab.check("db1", "cat /root/writer.log 2>/dev/null || true").splitlines()
        if line.startswith("ok ")
    ]


def wait_for_writes(lab, more_than, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(acked(lab)) > more_than:
            return
        time.sleep(2)
    raise AssertionError(f"the client acknowledged no new write in {timeout} s")


def switch(lab, new_primary, inventory=None):
    result = lab.pyinfra("--data", f"new_primary={new_primary}", deploy=RUNBOOK, inventory=inventory)
    output = result.stdout + result.stderr
    assert result.rc == 0, output[-6000:]
    refused = re.search(r"writes were refused for ([0-9.]+) s", output)
    assert refused, output[-4000:]
    return float(refused.group(1)), output


def replicates_from(lab, name):
    status = lab.check(name, "mariadb -E -e 'SHOW SLAVE STATUS'")
    fields = {}
    for line in status.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields.get("Master_Host"), fields.get("Slave_IO_Running"), fields.get("Slave_SQL_Running")


def follows(lab, name, primary, timeout=60):
    """`name` replicates from `primary` with both threads running (the IO thread may still be
    connecting right after a switchover)."""
    deadline = time.monotonic() + timeout
    while True:
        status = replicates_from(lab, name)
        if status == (ADDRESSES[primary], "Yes", "Yes") or time.monotonic() > deadline:
            return status == (ADDRESSES[primary], "Yes", "Yes"), status
        time.sleep(2)


def test_switchover_to_db2_and_back_while_a_client_writes(converged, timings):
    lab = converged
    sql(lab, "db1", SETUP)
    lab.check("db1", WRITER)
    wait_for_writes(lab, 5)

    refused_to_db2, output = switch(lab, "db2")
    assert "db1: role 'replica', primary 'db2'" in output and "db2: role 'primary'" in output
    assert follows(lab, "db1", "db2")[0], follows(lab, "db1", "db2", timeout=0)
    assert replicates_from(lab, "db2") == (None, None, None)
    assert sql(lab, "db2", "SELECT @@global.read_only") == "0"
    assert sql(lab, "db1", "SELECT @@global.read_only") == "1"
    before = len(acked(lab))
    wait_for_writes(lab, before + 5)
    assert acked(lab)[-1][2] == ADDRESSES["db2"]

    # The operator updates the inventory as printed: a converge with it changes nothing.
    assert_changed_nothing(lab.pyinfra(inventory=SWITCHED))

    refused_to_db1, _ = switch(lab, "db1", inventory=SWITCHED)
    assert follows(lab, "db2", "db1")[0], follows(lab, "db2", "db1", timeout=0)
    before = len(acked(lab))
    wait_for_writes(lab, before + 5)
    lab.check("db1", STOP_WRITER)

    rows = acked(lab)
    position = sql(lab, "db1", "SELECT @@global.gtid_binlog_pos")
    assert sql(lab, "db2", f"SELECT MASTER_GTID_WAIT('{position}', 60)") == "0"
    for name in ("db1", "db2"):
        present = set(lab.check(name, f'mariadb -NB -e "{INTACT}"').split())
        missing = [r[1] for r in rows if r[1] not in present]
        assert not missing, f"{name} lost acknowledged writes: {missing[:20]}"
    checksums = {name: sql(lab, name, "CHECKSUM TABLE switchtest.t EXTENDED") for name in ("db1", "db2")}
    assert checksums["db1"].split()[-1] == checksums["db2"].split()[-1], checksums

    stamps = [float(r[3]) for r in rows]
    gap = max(b - a for a, b in zip(stamps, stamps[1:], strict=False))
    timings["switchover db1->db2: writes refused (runbook)"] = refused_to_db2
    timings["switchover db2->db1: writes refused (runbook)"] = refused_to_db1
    timings["switchovers: longest gap between acknowledged writes (client)"] = gap
    sql(lab, "db1", "DROP DATABASE switchtest; DROP USER 'switchtest'@'10.99.0.0/255.255.255.0'")


# --- PostgreSQL ---------------------------------------------------------------------------------

PG_SWITCHED = REPO / "tests" / "e2e" / "inventories" / "postgresql_switched.py"
PG_ADDRESSES = {"pg1": "10.99.0.21", "pg2": "10.99.0.22"}
PG_CONNINFO = (
    "host=10.99.0.21,10.99.0.22 port=5432 dbname=app user=app "
    "target_session_attrs=read-write connect_timeout=2"
)
PG_WRITER = (
    r"""cat > /root/pgwriter.sh <<'SH'
#!/bin/bash
# One row per transaction to whichever server takes writes; "ok ID ADDRESS EPOCH" once committed.
i=0
while [ ! -e /root/pgwriter.stop ]; do
  i=$((i + 1))
  if out=$(psql '"""
    + PG_CONNINFO
    + r"""' -X -q -A -t -v ON_ERROR_STOP=1 \
      -c "INSERT INTO t (id, payload) VALUES ($i, md5('row $i'))" \
      -c 'SELECT inet_server_addr()' 2>/dev/null); then
    echo "ok $i $out $(date +%s.%N)" >> /root/pgwriter.log
  else
    echo "refused $i - $(date +%s.%N)" >> /root/pgwriter.log; sleep 0.2
  fi
done
echo done >> /root/pgwriter.log
SH
rm -f /root/pgwriter.log /root/pgwriter.stop
setsid nohup bash /root/pgwriter.sh >/dev/null 2>&1 < /dev/null &"""
)
PG_STOP_WRITER = STOP_WRITER.replace("writer.", "pgwriter.")
PG_INTACT = "SELECT id FROM t WHERE payload = md5('row ' || id) ORDER BY id"
PG_TABLE_SUM = "SELECT count(*) || ' ' || md5(string_agg(id || ':' || payload, ',' ORDER BY id)) FROM t"


def psql(lab, name, statement, database="app"):
    return lab.check(
        name, f'cd / && runuser -u postgres -- psql -X -A -t -d {database} -c "{statement}"'
    ).strip()


def pg_acked(lab):
    return [
        line.split()
        for line in lab.check("pg1", "cat /root/pgwriter.log 2>/dev/null || true").splitlines()
        if line.startswith("ok ")
    ]


def pg_wait_for_writes(lab, more_than, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(pg_acked(lab)) > more_than:
            return
        time.sleep(2)
    raise AssertionError(f"the PostgreSQL client acknowledged no new write in {timeout} s")


def pg_streams(lab, name, primary, timeout=60):
    """`name` is a standby streaming from `primary` (status, sender, and the timeline it receives)."""
    sql = (
        "SELECT pg_is_in_recovery(), coalesce((SELECT status || ' ' || sender_host || ' ' || received_tli"
        " FROM pg_stat_wal_receiver), '')"
    )
    deadline = time.monotonic() + timeout
    while True:
        row = psql(lab, name, sql, database="postgres")
        ok = row.startswith("t|streaming " + PG_ADDRESSES[primary] + " ")
        if ok or time.monotonic() > deadline:
            return ok, row
        time.sleep(2)


def pg_slots(lab, name):
    rows = psql(
        lab, name, "SELECT slot_name || ':' || active FROM pg_replication_slots ORDER BY 1", "postgres"
    )
    return rows.split()


def timeline(lab, name):
    return int(psql(lab, name, "SELECT timeline_id FROM pg_control_checkpoint()", "postgres"))


def app_pgpass(lab, name):
    """The lab's application password in root's ~/.pgpass on `name`, for a client there; synced,
    so that a power loss of `name` (test_crash) keeps it."""
    password = yaml.safe_load(Path(control.lab_env()["DBZFS_SECRETS_FILE"]).read_text())["lab_app_password"]
    subprocess.run(
        vmmod.ssh_argv(lab.vms[name], ["umask 077; cat > /root/.pgpass && sync /root/.pgpass"]),
        input=f"*:*:app:app:{password}\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_postgresql_switchover_to_pg2_and_back_while_a_client_writes(converged, timings):
    lab = converged
    app_pgpass(lab, "pg1")
    psql(lab, "pg1", "CREATE TABLE t (id int PRIMARY KEY, payload text NOT NULL); ALTER TABLE t OWNER TO app")
    lab.check("pg1", PG_WRITER)
    pg_wait_for_writes(lab, 5)
    timeline_before = timeline(lab, "pg1")

    result = lab.pyinfra("--data", "new_primary=pg2", deploy=RUNBOOK)
    output = result.stdout + result.stderr
    assert result.rc == 0, output[-6000:]
    refused_to_pg2 = float(re.search(r"writes were refused for ([0-9.]+) s", output).group(1))
    assert "pg1: role 'replica', primary 'pg2'" in output and "pg2: role 'primary'" in output
    assert psql(lab, "pg2", "SELECT pg_is_in_recovery()", "postgres") == "f"
    ok, row = pg_streams(lab, "pg1", "pg2")
    assert ok, row
    # pg1 follows pg2's new timeline from its own shutdown checkpoint: no rewind, no rebuild.
    assert int(row.split()[-1]) == timeline_before + 1, row
    assert pg_slots(lab, "pg2") == ["pg1:true"], pg_slots(lab, "pg2")
    assert pg_slots(lab, "pg1") == [], "the old primary kept slots that would hold WAL for nobody"
    before = len(pg_acked(lab))
    pg_wait_for_writes(lab, before + 5)
    assert pg_acked(lab)[-1][2] == PG_ADDRESSES["pg2"]

    # The operator updates the inventory as printed: a converge with it changes nothing.
    assert_changed_nothing(lab.pyinfra(inventory=PG_SWITCHED))

    result = lab.pyinfra("--data", "new_primary=pg1", deploy=RUNBOOK, inventory=PG_SWITCHED)
    output = result.stdout + result.stderr
    assert result.rc == 0, output[-6000:]
    refused_to_pg1 = float(re.search(r"writes were refused for ([0-9.]+) s", output).group(1))
    ok, row = pg_streams(lab, "pg2", "pg1")
    assert ok, row
    assert pg_slots(lab, "pg1") == ["pg2:true"] and pg_slots(lab, "pg2") == []
    before = len(pg_acked(lab))
    pg_wait_for_writes(lab, before + 5)
    lab.check("pg1", PG_STOP_WRITER)

    rows = pg_acked(lab)
    position = psql(lab, "pg1", "SELECT pg_current_wal_lsn()", "postgres")
    deadline = time.monotonic() + 60
    replayed = f"SELECT pg_last_wal_replay_lsn() >= '{position}'"
    while psql(lab, "pg2", replayed, "postgres") != "t":
        assert time.monotonic() < deadline, f"pg2 did not replay pg1's WAL up to {position} in 60 s"
        time.sleep(1)
    for name in ("pg1", "pg2"):
        present = set(psql(lab, name, PG_INTACT).split())
        missing = [r[1] for r in rows if r[1] not in present]
        assert not missing, f"{name} lost acknowledged writes: {missing[:20]}"
    sums = {name: psql(lab, name, PG_TABLE_SUM) for name in ("pg1", "pg2")}
    assert sums["pg1"] == sums["pg2"], sums

    stamps = [float(r[3]) for r in rows]
    gap = max(b - a for a, b in zip(stamps, stamps[1:], strict=False))
    timings["switchover pg1->pg2: writes refused (runbook)"] = refused_to_pg2
    timings["switchover pg2->pg1: writes refused (runbook)"] = refused_to_pg1
    timings["postgresql switchovers: longest gap between acknowledged writes (client)"] = gap
    psql(lab, "pg1", "DROP TABLE t")
    lab.check("pg1", "rm -f /root/.pgpass /root/pgwriter.sh")
