"""Realistic data for the benchmark and the compression migration, from a documented model of the
two workloads this toolkit is built for, generated deterministically from a seed. Filler columns
of blanks would compress far better than any real table and overstate every ratio; these rows
carry the mix of repetitive structure and random bytes that real ones do.

Models (`MODELS`):

- `ca`: a certificate authority's tables, after the shape of Let's Encrypt's: `accounts` (an ACME
  account: its public key as a JWK in JSON, a contact, created, status), `orders` (account,
  identifiers as JSON, created, expires, status) and `certificates` (serial, account, SHA-256
  digest, the DER body, issued, expires). A DER body (about 900 bytes) is built as an ECDSA X.509
  certificate is: fixed issuer, algorithm identifiers, extensions and URLs (compressible),
  a random serial, subject names, a P-256 public key, two SCTs from a handful of CT logs and
  signatures (random: about a third of the bytes), with correct DER lengths throughout.
- `events`: an analytics event table, after the shape of Heap's: user id (a few heavy users,
  many light ones), event id, time (increasing, with bursts), event type (a skewed vocabulary)
  and properties as JSON (path and query, referrer, browser, OS, country, IP address, session,
  screen, time on page; a value for purchases).

Output: SQL for one engine (`--engine mariadb|postgresql`): the tables' DDL, then multi-row
INSERTs of BATCH rows; only the types and the binary literals differ between the engines.

    python -m bench.datagen --model ca --engine postgresql --rows 100000 | psql -d bench
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

MODELS = ("ca", "events")
ENGINES = ("mariadb", "postgresql")
BATCH = 500
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

DDL = {
    ("ca", "postgresql"): """CREATE TABLE accounts (id bigint PRIMARY KEY, jwk jsonb NOT NULL,
  contact text, created_at timestamptz NOT NULL, status text NOT NULL);
CREATE TABLE orders (id bigint PRIMARY KEY, account_id bigint NOT NULL, identifiers jsonb NOT NULL,
  created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL, status text NOT NULL);
CREATE TABLE certificates (serial text PRIMARY KEY, account_id bigint NOT NULL, digest text NOT NULL,
  der bytea NOT NULL, issued_at timestamptz NOT NULL, expires_at timestamptz NOT NULL);
""",
    ("ca", "mariadb"): """CREATE TABLE accounts (id BIGINT PRIMARY KEY, jwk JSON NOT NULL,
  contact VARCHAR(255), created_at DATETIME(6) NOT NULL, status VARCHAR(16) NOT NULL);
CREATE TABLE orders (id BIGINT PRIMARY KEY, account_id BIGINT NOT NULL, identifiers JSON NOT NULL,
  created_at DATETIME(6) NOT NULL, expires_at DATETIME(6) NOT NULL, status VARCHAR(16) NOT NULL);
CREATE TABLE certificates (serial VARCHAR(40) PRIMARY KEY, account_id BIGINT NOT NULL,
  digest VARCHAR(64) NOT NULL, der MEDIUMBLOB NOT NULL, issued_at DATETIME(6) NOT NULL,
  expires_at DATETIME(6) NOT NULL);
""",
    ("events", "postgresql"): """CREATE TABLE events (user_id bigint NOT NULL, event_id bigint NOT NULL,
  time timestamptz NOT NULL, type text NOT NULL, properties jsonb NOT NULL,
  PRIMARY KEY (user_id, event_id));
""",
    ("events", "mariadb"): """CREATE TABLE events (user_id BIGINT NOT NULL, event_id BIGINT NOT NULL,
  time DATETIME(6) NOT NULL, type VARCHAR(32) NOT NULL, properties JSON NOT NULL,
  PRIMARY KEY (user_id, event_id));
""",
}

# --- DER, just enough of it ---------------------------------------------------------------------


def tlv(tag: int, body: bytes) -> bytes:
    n = len(body)
    if n < 0x80:
        length = bytes([n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(raw)]) + raw
    return bytes([tag]) + length + body


def seq(*parts: bytes) -> bytes:
    return tlv(0x30, b"".join(parts))


def oid(dotted: str) -> bytes:
    first, second, *rest = (int(x) for x in dotted.split("."))
    out = bytearray([40 * first + second])
    for value in rest:
        chunk = [value & 0x7F]
        value >>= 7
        while value:
            chunk.append(0x80 | (value & 0x7F))
            value >>= 7
        out += bytes(reversed(chunk))
    return tlv(0x06, bytes(out))


def name(*rdns: tuple[str, str]) -> bytes:
    return seq(*(tlv(0x31, seq(oid(o), tlv(0x13, v.encode()))) for o, v in rdns))


def utc_time(when: datetime) -> bytes:
    return tlv(0x17, when.strftime("%y%m%d%H%M%SZ").encode())


ECDSA_SHA256 = seq(oid("1.2.840.10045.4.3.2"))
ISSUER = name(("2.5.4.6", "US"), ("2.5.4.10", "Let's Encrypt"), ("2.5.4.3", "E6"))
# A handful of CT logs sign every certificate: their ids repeat across the table.
CT_LOGS = [hashlib.sha256(f"ct log {i}".encode()).digest() for i in range(6)]


def ext(dotted: str, value: bytes, critical: bool = False) -> bytes:
    return seq(oid(dotted), *([tlv(0x01, b"\xff")] if critical else []), tlv(0x04, value))


def certificate_der(rng: random.Random, serial: bytes, names: list[str], issued: datetime) -> bytes:
    key = b"\x04" + rng.randbytes(64)  # an uncompressed P-256 point
    spki = seq(seq(oid("1.2.840.10045.2.1"), oid("1.2.840.10045.3.1.7")), tlv(0x03, b"\x00" + key))
    scts = b"".join(
        tlv(
            0x04,
            b"\x00"
            + rng.choice(CT_LOGS)
            + int(issued.timestamp() * 1000).to_bytes(8, "big")
            + b"\x00\x00\x04\x03\x00\x47"
            + rng.randbytes(71),
        )
        for _ in range(2)
    )
    extensions = [
        ext("2.5.29.15", tlv(0x03, b"\x07\x80"), critical=True),  # key usage
        ext("2.5.29.37", seq(oid("1.3.6.1.5.5.7.3.1"), oid("1.3.6.1.5.5.7.3.2"))),
        ext("2.5.29.19", seq(), critical=True),
        ext("2.5.29.14", tlv(0x04, rng.randbytes(20))),  # subject key id
        ext("2.5.29.35", seq(tlv(0x80, hashlib.sha1(ISSUER).digest()))),  # authority key id
        ext(
            "1.3.6.1.5.5.7.1.1",
            seq(
                seq(oid("1.3.6.1.5.5.7.48.1"), tlv(0x86, b"http://e6.o.lencr.org")),
                seq(oid("1.3.6.1.5.5.7.48.2"), tlv(0x86, b"http://e6.i.lencr.org/")),
            ),
        ),
        ext("2.5.29.17", seq(*(tlv(0x82, n.encode()) for n in names))),  # subject alt names
        ext("2.5.29.32", seq(seq(oid("2.23.140.1.2.1")))),
        ext("1.3.6.1.4.1.11129.2.4.2", tlv(0x04, scts)),
    ]
    tbs = seq(
        tlv(0xA0, tlv(0x02, b"\x02")),
        tlv(0x02, serial),
        ECDSA_SHA256,
        ISSUER,
        seq(utc_time(issued), utc_time(issued + timedelta(days=90))),
        name(("2.5.4.3", names[0])),
        spki,
        tlv(0xA3, seq(*extensions)),
    )
    signature = seq(tlv(0x02, b"\x00" + rng.randbytes(32)), tlv(0x02, b"\x00" + rng.randbytes(32)))
    return seq(tbs, ECDSA_SHA256, tlv(0x03, b"\x00" + signature))


# --- the models ---------------------------------------------------------------------------------

WORDS = (
    "app api www mail shop blog dev staging cdn static img docs status beta portal login auth "
    "admin cloud data files media news store support test web wiki"
).split()
TLDS = ["com", "org", "net", "io", "de", "fr", "co.uk", "nl", "jp", "dev"]


def domain(rng: random.Random) -> str:
    base = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(5, 12)))
    return f"{base}.{rng.choice(TLDS)}"


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S.%f")


def ca_rows(rng: random.Random, rows: int) -> Iterator[tuple[str, tuple]]:
    """("accounts" | "orders" | "certificates", row): one account per 20 certificates, an order
    per certificate."""
    accounts = max(1, rows // 20)
    for i in range(1, accounts + 1):
        created = EPOCH + timedelta(seconds=i * 37 + rng.randint(0, 30))
        jwk = {"kty": "EC", "crv": "P-256", "x": rng.randbytes(32).hex(), "y": rng.randbytes(32).hex()}
        contact = f"mailto:admin@{domain(rng)}" if rng.random() < 0.6 else None
        status = "valid" if rng.random() < 0.98 else "deactivated"
        yield "accounts", (i, json.dumps(jwk), contact, stamp(created), status)
    for i in range(1, rows + 1):
        account = 1 + int(accounts * rng.random() ** 3)  # a few accounts issue most
        issued = EPOCH + timedelta(seconds=i * 13 + rng.randint(0, 12))
        base = domain(rng)
        names = [base] + [f"{w}.{base}" for w in rng.sample(WORDS, rng.choice((0, 1, 1, 2, 3)))]
        identifiers = json.dumps([{"type": "dns", "value": n} for n in names])
        yield "orders", (i, account, identifiers, stamp(issued), stamp(issued + timedelta(days=7)), "valid")
        serial = b"\x03" + rng.randbytes(17)
        der = certificate_der(rng, serial, names, issued)
        digest = hashlib.sha256(der).hexdigest()
        expires = issued + timedelta(days=90)
        yield "certificates", (serial.hex(), account, digest, der, stamp(issued), stamp(expires))


EVENT_TYPES = [("pageview", 60), ("click", 22), ("submit", 6), ("scroll", 6), ("signup", 3), ("purchase", 3)]
BROWSERS = [("Chrome", "131.0"), ("Safari", "18.1"), ("Firefox", "133.0"), ("Edge", "131.0")]
OSES = ["Windows", "macOS", "iOS", "Android", "Linux"]
COUNTRIES = ["US", "DE", "GB", "FR", "IN", "BR", "JP", "CA", "NL", "AU"]
REFERRERS = [
    "",
    "https://www.google.com/",
    "https://news.ycombinator.com/",
    "https://t.co/",
    "https://www.bing.com/",
]
PATHS = ["/", "/pricing", "/docs", "/blog", "/login", "/signup", "/products", "/cart", "/checkout"]
SCREENS = ["1920x1080", "1440x900", "390x844", "2560x1440", "1366x768"]


def events_rows(rng: random.Random, rows: int) -> Iterator[tuple[str, tuple]]:
    users = max(1, rows // 50)
    types = [t for t, _ in EVENT_TYPES]
    weights = [w for _, w in EVENT_TYPES]
    when = EPOCH
    sessions: dict[int, str] = {}
    for i in range(1, rows + 1):
        when += timedelta(milliseconds=rng.choice((5, 20, 80, 300, 1500, 9000)))
        user = 1 + int(users * rng.random() ** 2)
        if user not in sessions or rng.random() < 0.05:
            sessions[user] = rng.randbytes(8).hex()
        kind = rng.choices(types, weights)[0]
        browser, version = rng.choice(BROWSERS)
        path = rng.choice(PATHS)
        if path == "/products":
            path += f"/{rng.randint(1, 5000)}"
        query = ""
        if rng.random() < 0.3:
            query = f"?utm_source={rng.choice(WORDS)}&gclid={rng.randbytes(12).hex()}"
        props = {
            "path": path,
            "query": query,
            "referrer": rng.choice(REFERRERS),
            "browser": browser,
            "browser_version": version,
            "os": rng.choice(OSES),
            "country": rng.choice(COUNTRIES),
            "ip": ".".join(str(rng.randint(1, 254)) for _ in range(4)),
            "session_id": sessions[user],
            "screen": rng.choice(SCREENS),
            "time_on_page_ms": rng.randint(0, 600_000),
        }
        if kind == "purchase":
            props["value"] = round(rng.uniform(5, 500), 2)
            props["currency"] = "USD"
        if kind == "click":
            props["target"] = f"button#{rng.choice(WORDS)}-{rng.randint(1, 40)}"
        yield "events", (user, i, stamp(when), kind, json.dumps(props, separators=(",", ":")))


GENERATORS = {"ca": ca_rows, "events": events_rows}


# --- SQL ----------------------------------------------------------------------------------------


def literal(value: object, engine: str) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"X'{value.hex()}'" if engine == "mariadb" else f"'\\x{value.hex()}'"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("'", "''")
    if engine == "mariadb":
        text = text.replace("\\", "\\\\")
    return f"'{text}'"


def sql(
    model: str, engine: str, rows: int, seed: int = 1, ddl: bool = True, batch: int = BATCH
) -> Iterator[str]:
    """The statements, each ending with ";" and a newline: DDL (optional), then INSERTs of `batch`
    rows. Every statement ends a line, and no value holds a newline."""
    if model not in MODELS or engine not in ENGINES:
        raise ValueError(f"model one of {MODELS}, engine one of {ENGINES}")
    if ddl:
        yield DDL[(model, engine)]
    pending: dict[str, list[str]] = {}

    def flush(table: str) -> str:
        values = ",\n".join(pending.pop(table))
        return f"INSERT INTO {table} VALUES\n{values};\n"

    for table, row in GENERATORS[model](random.Random(seed), rows):
        pending.setdefault(table, []).append("(" + ", ".join(literal(v, engine) for v in row) + ")")
        if len(pending[table]) >= batch:
            yield flush(table)
    for table in list(pending):
        yield flush(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.datagen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=MODELS, required=True)
    parser.add_argument("--engine", choices=ENGINES, required=True)
    parser.add_argument("--rows", type=int, required=True, help="certificates (ca) or events")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-ddl", action="store_true", help="INSERTs only (the tables exist)")
    args = parser.parse_args(argv)
    for statement in sql(args.model, args.engine, args.rows, args.seed, ddl=not args.no_ddl):
        sys.stdout.write(statement)
    return 0


if __name__ == "__main__":
    sys.exit(main())
