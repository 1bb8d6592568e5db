"""bench/datagen.py: deterministic, realistic rows (not blank filler), and SQL that the real
servers load (PostgreSQL in single-user mode, mariadbd in bootstrap mode: no server to start)."""

import hashlib
import random
import subprocess
import zlib

import pytest

from bench import datagen

from tests.unit.real_servers import MARIADBD, PG_BIN, as_postgres, mariadb_install_db, require


def text(model, engine, rows, seed=1, **kw):
    return "".join(datagen.sql(model, engine, rows, seed, **kw))


def test_the_same_seed_gives_the_same_data_and_another_seed_other_data():
    assert text("ca", "postgresql", 50) == text("ca", "postgresql", 50)
    assert text("events", "mariadb", 50) != text("events", "mariadb", 50, seed=2)


def test_ca_tables_have_an_order_per_certificate_and_an_account_per_twenty():
    rows = list(datagen.ca_rows(random.Random(1), 200))
    count = {t: sum(1 for table, _ in rows if table == t) for t in ("accounts", "orders", "certificates")}
    assert count == {"accounts": 10, "orders": 200, "certificates": 200}
    accounts = {r[1] for t, r in rows if t == "certificates"}
    assert accounts <= set(range(1, 11)) and len(accounts) > 1


def walk(der: bytes) -> int:
    """Parse DER TLVs to the end (constructed ones recursively); the number of elements."""
    count, i = 0, 0
    while i < len(der):
        tag, n = der[i], der[i + 1]
        i += 2
        if n & 0x80:
            size = n & 0x7F
            n = int.from_bytes(der[i : i + size], "big")
            i += size
        assert i + n <= len(der), "a length runs past its parent"
        if tag & 0x20:
            count += walk(der[i : i + n])
        i += n
        count += 1
    assert i == len(der)
    return count


def test_certificates_are_well_formed_der_with_their_names_and_serial():
    rows = [r for t, r in datagen.ca_rows(random.Random(3), 30) if t == "certificates"]
    for serial, _account, digest, der, _issued, _expires in rows:
        assert walk(der) > 60 and 700 < len(der) < 1200
        assert bytes.fromhex(serial) in der and digest == hashlib.sha256(der).hexdigest()
    orders = [r for t, r in datagen.ca_rows(random.Random(3), 30) if t == "orders"]
    assert b"lencr.org" in rows[0][3] and orders[0][2].count('"dns"') >= 1


def test_compressibility_is_that_of_real_data_not_filler():
    rng = random.Random(4)
    der = b"".join(r[3] for t, r in datagen.ca_rows(rng, 2000) if t == "certificates")
    props = "".join(r[4] for _, r in datagen.events_rows(rng, 20000)).encode()
    ratio = {"der": len(der) / len(zlib.compress(der)), "props": len(props) / len(zlib.compress(props))}
    # Public keys, serials and signatures are random; names, OIDs and URLs repeat. JSON events
    # repeat their keys and vocabularies but carry ids, addresses and times.
    assert 1.5 < ratio["der"] < 4 and 3 < ratio["props"] < 12, ratio


def test_literals_quote_and_escape_per_engine():
    assert datagen.literal("it's a\\b", "postgresql") == "'it''s a\\b'"
    assert datagen.literal("it's a\\b", "mariadb") == "'it''s a\\\\b'"
    assert datagen.literal(b"\x01\xff", "mariadb") == "X'01ff'"
    assert datagen.literal(b"\x01\xff", "postgresql") == "'\\x01ff'"
    assert datagen.literal(None, "mariadb") == "NULL" and datagen.literal(7, "postgresql") == "7"
    with pytest.raises(ValueError):
        list(datagen.sql("ca", "oracle", 1))


CHECKS = {
    "ca": ("SELECT count(*), sum(length(der)) FROM certificates", "(SELECT count(*) FROM certificates)"),
    "events": ("SELECT count(*) FROM events", "(SELECT count(*) FROM events)"),
}


def test_postgresql_loads_both_models(postgres_dir):
    scratch = postgres_dir
    data = scratch / "data"
    subprocess.run(
        as_postgres(
            [require(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--no-sync", "-E", "UTF8"]
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    script = text("ca", "postgresql", 120) + text("events", "postgresql", 300)
    script += "SELECT 'certs=' || count(*) FROM certificates;\nSELECT 'events=' || count(*) FROM events;\n"
    done = subprocess.run(
        as_postgres([require(PG_BIN / "postgres"), "--single", "-D", str(data), "-j", "postgres"]),
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=scratch,
    )
    out = done.stdout + done.stderr
    assert "ERROR" not in out and '"certs=120"' in out and '"events=300"' in out, out[-3000:]


def test_mariadb_loads_both_models(tmp_path):
    data = tmp_path / "data"
    mariadb_install_db(data, "--auth-root-authentication-method=normal", "--skip-test-db")
    out = tmp_path / "counts.txt"
    # bootstrap mode takes statements of at most 60,000 bytes: small batches
    script = "CREATE DATABASE bench;\nUSE bench;\n"
    script += text("ca", "mariadb", 120, batch=20) + text("events", "mariadb", 300, batch=50)
    script += (
        f"SELECT (SELECT count(*) FROM certificates), (SELECT count(*) FROM events) INTO OUTFILE '{out}';\n"
    )
    done = subprocess.run(
        [require(MARIADBD), "--no-defaults", "--bootstrap", f"--datadir={data}", "--user=root"],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "ERROR" not in done.stderr, done.stderr[-3000:]
    assert out.read_text().split() == ["120", "300"]
