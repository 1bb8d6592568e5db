"""A planned MariaDB switchover and back while a client writes (runbooks/switchover.py): the
primary moves to db2 and returns to db1, every write the client saw acknowledged is on both
servers with its payload, a converge with the inventory updated as the runbook says changes
nothing, and a converge with the inventory not updated refuses (test_topology's check).

The client runs in db1 (it survives a switchover) and writes one row per statement over the
private network to whichever server takes it, logging each acknowledged id; the longest gap
between two acknowledged writes is the client's view of the time writes were refused."""

import re
import time

import pytest

from tests.e2e.conftest import REPO
from tests.e2e.pyinfra_results import assert_changed_nothing

pytestmark = pytest.mark.e2e

SWITCHED = REPO / "tests" / "e2e" / "inventories" / "mariadb_switched.py"
RUNBOOK = "runbooks/switchover.py"
ADDRESSES = {"db1": "10.99.0.11", "db2": "10.99.0.12"}
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
        for line in lab.check("db1", "cat /root/writer.log").splitlines()
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
