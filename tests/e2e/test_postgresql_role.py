"""The PostgreSQL pair on the lab after the first converge: the testinfra checks pass, a row
written on the primary shows up on the standby within seconds, and a standby that was stopped
while the primary kept writing catches up through its slot with nothing lost. The pair is left
streaming (the second converge in test_idempotence.py must find nothing to do)."""

import time
import uuid

import pytest

from operations.postgresql import slot_name

from tests import labkit

pytestmark = pytest.mark.e2e

PRIMARY, STANDBY = "pg1", "pg2"
SLOT = slot_name(STANDBY)
UNIT = labkit.lab_postgresql().unit
TABLE = "dbzfs_e2e_rows"


def sql(lab, name, query):
    return lab.check(name, f'runuser -u postgres -- psql -AtX -v ON_ERROR_STOP=1 -c "{query}"').strip()


def wait_for(predicate, timeout, what):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        value = predicate()
        if value:
            return time.monotonic() - t0
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout} s")


def fingerprint(lab, name, batch):
    return sql(
        lab,
        name,
        f"SELECT count(*), md5(coalesce(string_agg(id::text || ':' || note, ',' "
        f"ORDER BY id), '')) FROM {TABLE} WHERE batch = '{batch}'",
    )


def streaming(lab):
    receiver = sql(lab, STANDBY, "SELECT status || '/' || slot_name FROM pg_stat_wal_receiver")
    slot = sql(lab, PRIMARY, f"SELECT active FROM pg_replication_slots WHERE slot_name = '{SLOT}'")
    return receiver == f"streaming/{SLOT}" and slot == "t"


@pytest.fixture(scope="module")
def pair(converged):
    sql(
        converged,
        PRIMARY,
        f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, "
        "batch text NOT NULL, note text NOT NULL, at timestamptz DEFAULT now())",
    )
    return converged


def test_testinfra_checks_pass(converged):
    result = converged.testinfra("tests/infra/test_postgresql.py")
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


def test_row_on_primary_readable_on_standby_within_seconds(pair):
    token = uuid.uuid4().hex
    sql(pair, PRIMARY, f"INSERT INTO {TABLE} (batch, note) VALUES ('single', '{token}')")
    seconds = wait_for(
        lambda: sql(pair, STANDBY, f"SELECT count(*) FROM {TABLE} WHERE note = '{token}'") == "1",
        10,
        f"row {token} on {STANDBY}",
    )
    print(f"row visible on {STANDBY} after {seconds:.1f} s")


def test_stopped_standby_catches_up_through_its_slot(pair, timings):
    batch = uuid.uuid4().hex[:12]
    pair.check(STANDBY, f"systemctl stop {UNIT}")
    try:
        wait_for(
            lambda: (
                sql(pair, PRIMARY, f"SELECT active FROM pg_replication_slots WHERE slot_name = '{SLOT}'")
                == "f"
            ),
            30,
            f"slot {SLOT} inactive after stopping {STANDBY}",
        )
        held = sql(pair, PRIMARY, f"SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = '{SLOT}'")
        # Writes, segment switches and checkpoints: without the slot, the WAL the standby still
        # needs would be removed (wal_recycle is off: old segments are deleted, not renamed).
        for i in range(5):
            sql(
                pair,
                PRIMARY,
                f"INSERT INTO {TABLE} (batch, note) SELECT '{batch}', "
                f"md5(g::text || '{i}') FROM generate_series(1, 2000) g",
            )
            sql(pair, PRIMARY, "SELECT pg_switch_wal()")
            sql(pair, PRIMARY, "CHECKPOINT")
        assert (
            sql(pair, PRIMARY, f"SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = '{SLOT}'")
            == held
        ), "the slot moved while its standby was down"
        assert (
            sql(pair, PRIMARY, f"SELECT count(*) FROM pg_ls_waldir() WHERE name = pg_walfile_name('{held}')")
            == "1"
        ), f"the WAL segment holding {held} is gone although slot {SLOT} holds it"
        expected = fingerprint(pair, PRIMARY, batch)
        assert expected.startswith("10000|")
        target = sql(pair, PRIMARY, "SELECT pg_current_wal_lsn()")
    finally:
        t0 = time.monotonic()
        pair.check(STANDBY, f"systemctl start {UNIT}")
        started = time.monotonic() - t0

    def caught_up():
        return sql(pair, STANDBY, f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn") == "t"

    wait_for(caught_up, 120, f"{STANDBY} replaying up to {target}")
    catch_up = time.monotonic() - t0
    timings["postgresql standby catch-up"] = catch_up
    print(
        f"{STANDBY}: started in {started:.1f} s, caught up with 10000 rows / 5 WAL segments in "
        f"{catch_up:.1f} s from start"
    )
    assert fingerprint(pair, STANDBY, batch) == expected, "rows lost or different on the standby"
    wait_for(lambda: streaming(pair), 30, f"{STANDBY} streaming again through slot {SLOT}")
