"""Generates engines/data/*-settings.json, what engines.db_settings knows about each server's settings,
from the servers themselves, every supported Debian release's (model/releases.py): this machine's
own (mariadb-server and postgresql, see scripts/bootstrap) and, for the other release, those in the
root scripts/servers-chroot builds, run there under chroot:

    python -m engines.db_settings_generate

MariaDB: the names my.cnf accepts are the options of `mariadbd --no-defaults --verbose --help`;
their types, ranges and enum values come from information_schema.SYSTEM_VARIABLES of a throwaway
server (an empty data directory under /tmp, --skip-grant-tables --skip-networking, stopped when
done), since --help shows none of them. An option the server has no variable for is typed from its
--help line ("=#" a number, "=name" a string, "One of: ..." an enum, no argument a boolean when the
--help table gives it TRUE/FALSE, else a flag that takes no value).

PostgreSQL: `postgres --describe-config` has no units and no enum values, so the settings come from
pg_settings of a throwaway cluster (initdb, then a single-user backend); --describe-config is
checked against it. Enums also accept spellings pg_settings does not list (guc.c marks them
hidden: on/off enums take true/false/yes/no/1/0, wal_level the pre-9.6 archive/hot_standby, the
message levels debug): `postgres -C` loads a file setting every enum to each candidate spelling and
names the ones it refuses; the data keeps what the server accepted.

The data holds nothing that depends on the machine (no current values), so a unit test can
regenerate it and compare with the checked-in files. Run as root: the servers run as mysql and
postgres, and postgres refuses to run as root.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engines import db_settings
from model import releases


def machine_release(root: Path = Path("/")) -> str:
    """The Debian major release a root runs (VERSION_ID of its os-release), "" when unknown."""
    try:
        text = (root / "etc/os-release").read_text()
    except OSError:
        return ""
    match = re.search(r'^VERSION_ID="?([0-9]+)', text, re.M)
    return match.group(1) if match else ""


def servers_root(release: str) -> Path:
    """Where a Debian release's database servers are: this machine itself when it runs that
    release, else the root scripts/servers-chroot builds for it (DBZFS_SERVERS_ROOT overrides)."""
    if machine_release() == release:
        return Path("/")
    codename = releases.get(release).codename
    return Path(os.environ.get("DBZFS_SERVERS_ROOT") or f"/var/lib/dbzfs/servers/{codename}")


def _local_pg_version() -> str:
    release = releases.RELEASES.get(machine_release())
    return release.postgresql if release else releases.get(releases.DEFAULT).postgresql


MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
MARIADB = shutil.which("mariadb") or "/usr/bin/mariadb"
PG_BIN = Path(f"/usr/lib/postgresql/{_local_pg_version()}/bin")

# Enum spellings pg_settings does not list, tried on every enum (only those the server accepts are
# kept).
PG_ENUM_CANDIDATES = ("on", "off", "true", "false", "yes", "no", "1", "0", "archive", "hot_standby", "debug")

SYSVARS_SQL = (
    "SELECT VARIABLE_NAME, VARIABLE_TYPE, NUMERIC_MIN_VALUE, NUMERIC_MAX_VALUE, ENUM_VALUE_LIST, "
    "COMMAND_LINE_ARGUMENT, DEFAULT_VALUE FROM information_schema.SYSTEM_VARIABLES "
    "ORDER BY VARIABLE_NAME"
)
PG_SETTINGS_SQL = (
    "COPY (SELECT name, vartype, unit, min_val, max_val, array_to_json(enumvals), context "
    "FROM pg_settings ORDER BY name) TO '{path}' WITH (FORMAT csv);\n"
)
MARIADB_TYPES = {
    "BOOLEAN": "bool",
    "INT": "integer",
    "INT UNSIGNED": "integer",
    "BIGINT": "integer",
    "BIGINT UNSIGNED": "integer",
    "DOUBLE": "real",
    "ENUM": "enum",
    "SET": "set",
    "FLAGSET": "flagset",
    "VARCHAR": "string",
}
DESCRIBE_TYPES = {"BOOLEAN": "bool", "INTEGER": "integer", "REAL": "real", "STRING": "string", "ENUM": "enum"}


class GenerateError(Exception):
    pass


def _binary(path: str | Path) -> str:
    if not os.access(path, os.X_OK):
        raise GenerateError(
            f"{path} is missing: install this release's mariadb-server and postgresql (scripts/bootstrap)"
        )
    return str(path)


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)
    if result.returncode != 0:
        raise GenerateError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr}{result.stdout}")
    return result


def _as(user: str, argv: list[str]) -> list[str]:
    """argv run as the server's own user (when we are root; as ourselves otherwise)."""
    return ["runuser", "-u", user, "--", *argv] if os.geteuid() == 0 else argv


def _scratch(owner: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="dbzfs-settings-"))
    if os.geteuid() == 0:
        shutil.chown(path, owner, owner)
    return path


def _major(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    if not match:
        raise GenerateError(f"no version in {text[:200]!r}")
    return match.group(1)


# --- MariaDB -------------------------------------------------------------------------------------


def mariadb_help() -> str:
    user = ["--user=mysql"] if os.geteuid() == 0 else []
    return _run([_binary(MARIADBD), "--no-defaults", *user, "--verbose", "--help"]).stdout


def parse_mariadb_help(text: str) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """(option name -> (argument signature, description), option name -> value in the --help
    table), names with underscores as SHOW VARIABLES spells them."""
    head, sep, table = text.partition("\n-----")
    if not sep:
        raise GenerateError("mariadbd --verbose --help printed no variables table")
    options = {}
    blocks = re.split(r"\n(?=  (?:-\S, )?--)", head)
    for block in blocks[1:]:
        match = re.match(r"  (?:-\S, )?--([A-Za-z0-9_-]+)(\[=#\]|\[=name\]|=#|=name)?", block)
        if not match:
            raise GenerateError(f"cannot read the option line {block.splitlines()[0]!r}")
        description = " ".join(block[match.end() :].split())
        options[match.group(1).replace("-", "_")] = (match.group(2) or "", description)
    values = {}
    for line in table.splitlines()[1:]:
        if not line.strip():
            break
        name, _, value = line.partition(" ")
        values[name.replace("-", "_")] = value.strip()
    return options, values


def mariadb_sysvars() -> dict[str, dict]:
    """information_schema.SYSTEM_VARIABLES of a throwaway server: lower-case name -> row."""
    tmp = _scratch("mysql")
    data, sock, log = tmp / "data", tmp / "mysqld.sock", tmp / "error.log"
    user = ["--user=mysql"] if os.geteuid() == 0 else []
    server = None
    try:
        data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(data, "mysql", "mysql")
        server = subprocess.Popen(
            [
                _binary(MARIADBD),
                "--no-defaults",
                *user,
                f"--datadir={data}",
                "--skip-grant-tables",
                "--skip-networking",
                f"--socket={sock}",
                f"--pid-file={tmp}/mysqld.pid",
                f"--log-error={log}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while not sock.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                text = log.read_text() if log.exists() else ""
                raise GenerateError(f"the throwaway mariadbd did not start:\n{text}")
            time.sleep(0.1)
        rows = _run(
            [_binary(MARIADB), "--no-defaults", f"--socket={sock}", "-uroot", "-N", "-B", "-e", SYSVARS_SQL]
        ).stdout
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)
    columns = ("name", "type", "min", "max", "values", "cmdline", "default")
    out = {}
    for line in rows.splitlines():
        row = dict(zip(columns, line.split("\t"), strict=True))
        out[row["name"].lower()] = {k: (None if v == "NULL" else v) for k, v in row.items()}
    return out


def _number(text: str, kind: str) -> int | float:
    return int(text) if kind == "integer" else float(text)


def _deprecated(entry: dict, description: str) -> dict:
    """The entry marked deprecated when --help says so: the server warns when a config sets it."""
    if re.search(r"\bdeprecated\b", description, re.I):
        entry["deprecated"] = True
    return entry


def mariadb_setting(signature: str, description: str, table_value: str | None, var: dict | None) -> dict:
    """One option's entry: its type and, where the server knows them, range and allowed values."""
    kind = MARIADB_TYPES[var["type"]] if var else None
    takes_name = signature in ("=name", "[=name]")
    if var and (kind != "bool" or not takes_name):
        entry: dict = {"type": kind}
        if kind in ("integer", "real"):
            entry["min"] = _number(var["min"], kind)
            entry["max"] = _number(var["max"], kind)
        if kind in ("enum", "set", "flagset"):
            if var["values"]:
                entry["values"] = var["values"].split(",")
            else:  # character sets, collations, locales: names the server has no list of here
                entry = {"type": "string"}
        if var["name"].lower() in db_settings.MARIADB_PER_CONNECTION_BUFFERS:
            entry["default"] = int(var["default"])
        return entry
    # No variable (or one that differs from the option, like log_bin: a path as an option, ON/OFF
    # as a variable): the --help line says what the option takes.
    if signature in ("=#", "[=#]"):
        return {"type": "integer"}
    if takes_name:
        one_of = re.search(r"One of: ([^.]*)", description)
        if one_of:
            listed = re.sub(r"\([^)]*\)", "", one_of.group(1))  # "FORCE (don't start if ...)"
            values = [v.strip() for v in listed.split(",")]
            return {"type": "enum", "values": values}
        return {"type": "string"}
    return {"type": "bool"} if table_value in ("TRUE", "FALSE") else {"type": "flag"}


def mariadb_data() -> dict:
    help_text = mariadb_help()
    version = _major(help_text, r"Ver (\d+\.\d+)\.")
    options, table = parse_mariadb_help(help_text)
    sysvars = mariadb_sysvars()
    settings = {
        name: _deprecated(
            mariadb_setting(signature, description, table.get(name), sysvars.get(name.lower())), description
        )
        for name, (signature, description) in options.items()
    }
    missing = set(db_settings.MARIADB_PER_CONNECTION_BUFFERS) - {
        n for n, e in settings.items() if "default" in e
    }
    if missing:
        raise GenerateError(f"no default for {sorted(missing)} in SYSTEM_VARIABLES")
    return {
        "engine": "mariadb",
        "version": version,
        "generated_by": "python -m engines.db_settings_generate: mariadbd --no-defaults --verbose --help, "
        "information_schema.SYSTEM_VARIABLES of a throwaway server",
        "settings": settings,
    }


# --- PostgreSQL ----------------------------------------------------------------------------------


def _postgres(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _as("postgres", [_binary(PG_BIN / "postgres"), *args]),
        capture_output=True,
        text=True,
        timeout=120,
        **kw,
    )


def pg_describe_config() -> dict[str, str]:
    """`postgres --describe-config`: name -> type (bool, integer, real, string, enum)."""
    result = _postgres("--describe-config")
    if result.returncode != 0:
        raise GenerateError(f"postgres --describe-config failed:\n{result.stderr}")
    return {f[0]: DESCRIBE_TYPES[f[3]] for f in (line.split("\t") for line in result.stdout.splitlines())}


def pg_settings(tmp: Path) -> list[dict]:
    """pg_settings of a throwaway cluster in tmp (left there for pg_enum_spellings)."""
    data = tmp / "data"
    _run(
        _as(
            "postgres",
            [_binary(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--no-sync", "--auth=trust"],
        ),
        timeout=300,
    )
    out = tmp / "settings.csv"
    result = _postgres("--single", "-D", str(data), "postgres", input=PG_SETTINGS_SQL.format(path=out))
    if result.returncode != 0 or not out.exists():
        raise GenerateError(f"the single-user backend did not write pg_settings:\n{result.stderr}")
    columns = ("name", "vartype", "unit", "min", "max", "enumvals", "context")
    with out.open(newline="") as f:
        return [dict(zip(columns, row, strict=True)) for row in csv.reader(f)]


def pg_enum_spellings(tmp: Path, enums: list[str]) -> dict[str, set[str]]:
    """Candidate spelling -> the enums whose value postgres accepts it as (postgres -C reads a file
    setting every enum to it and names each one it refuses)."""
    data = tmp / "data"
    accepted = {}
    for candidate in PG_ENUM_CANDIDATES:
        conf = tmp / "candidates.conf"
        lines = [
            f"data_directory = '{data}'",
            f"hba_file = '{data}/pg_hba.conf'",
            f"ident_file = '{data}/pg_ident.conf'",
        ]
        conf.write_text("\n".join(lines + [f"{name} = '{candidate}'" for name in enums]) + "\n")
        result = _postgres(f"--config-file={conf}", "-C", "port")
        refused = set(re.findall(r'invalid value for parameter "([a-z0-9_]+)"', result.stderr))
        other = [
            line
            for line in result.stderr.splitlines()
            if "LOG:" in line and "invalid value" not in line and "postgresql.auto.conf" not in line
        ]
        if other or (result.returncode != 0) != bool(refused):
            raise GenerateError(f"postgres -C with {candidate!r} for every enum:\n{result.stderr}")
        accepted[candidate] = set(enums) - refused
    return accepted


def postgresql_data() -> dict:
    version = _major(_postgres("--version").stdout, r"\(PostgreSQL\) (\d+)")
    described = pg_describe_config()
    tmp = _scratch("postgres")
    try:
        rows = pg_settings(tmp)
        enums = [r["name"] for r in rows if r["vartype"] == "enum" and r["context"] != "internal"]
        spellings = pg_enum_spellings(tmp, enums)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    settings = {}
    for row in rows:
        entry: dict = {"type": row["vartype"], "context": row["context"]}
        if row["vartype"] in ("integer", "real"):
            entry["min"] = _number(row["min"], row["vartype"])
            entry["max"] = _number(row["max"], row["vartype"])
            if row["unit"]:
                entry["unit"] = row["unit"]
        if row["vartype"] == "enum":
            entry["values"] = json.loads(row["enumvals"])
            listed = {v.lower() for v in entry["values"]}
            aliases = [
                c for c in PG_ENUM_CANDIDATES if row["name"] in spellings.get(c, ()) and c not in listed
            ]
            if aliases:
                entry["aliases"] = aliases
        settings[row["name"]] = entry
    wrong = {n: t for n, t in described.items() if settings.get(n, {}).get("type") != t}
    if wrong:
        raise GenerateError(f"--describe-config and pg_settings disagree on {wrong}")
    return {
        "engine": "postgresql",
        "version": version,
        "generated_by": "python -m engines.db_settings_generate: pg_settings of a throwaway cluster, "
        "checked against postgres --describe-config; enum spellings accepted by postgres -C",
        "settings": settings,
    }


# --- files ---------------------------------------------------------------------------------------

GENERATORS = {"mariadb": mariadb_data, "postgresql": postgresql_data}


def dump(data: dict) -> str:
    """The data file's text: one setting per line, sorted, so that a diff shows what changed."""
    lines = ["{"] + [
        f"  {json.dumps(k)}: {json.dumps(data[k])}," for k in ("engine", "version", "generated_by")
    ]
    lines.append('  "settings": {')
    items = sorted(data["settings"].items())
    for i, (name, entry) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"    {json.dumps(name)}: {json.dumps(entry, sort_keys=True)}{comma}")
    return "\n".join(lines + ["  }", "}", ""])


def generate(engine: str, release: str) -> str:
    """The data file's text for the engine's server of a Debian release, from that server: this
    machine's own, or the one in that release's root (run there under chroot)."""
    root = servers_root(release)
    if root != Path("/"):
        return _generate_in(root, engine, release)
    data = GENERATORS[engine]()
    wanted = releases.get(release).version(engine)
    if data["version"] != wanted:
        raise GenerateError(f"the installed {engine} is {data['version']}, Debian {release} ships {wanted}")
    return dump(data)


def _generate_in(root: Path, engine: str, release: str) -> str:
    """generate() run by the root's own python3 under chroot, on a copy of this code."""
    if machine_release(root) != release:
        raise GenerateError(
            f"{root} is not a Debian {release} root with its database servers: run scripts/servers-chroot"
        )
    top = Path(__file__).resolve().parent.parent
    work = Path(tempfile.mkdtemp(prefix="dbzfs-generate-", dir=root / "tmp"))
    try:
        for package in ("engines", "model"):
            shutil.copytree(top / package, work / package, ignore=shutil.ignore_patterns("__pycache__"))
        inside = f"/tmp/{work.name}"
        result = subprocess.run(
            [
                "chroot",
                str(root),
                "sh",
                "-c",
                f"cd {inside} && exec python3 -m engines.db_settings_generate --print {engine} {release}",
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if result.returncode != 0:
        raise GenerateError(f"generating in {root} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def write_all() -> list[Path]:
    written = []
    for release in sorted(releases.RELEASES):
        for engine in GENERATORS:
            path = db_settings.data_file(engine, releases.get(release).version(engine))
            path.parent.mkdir(exist_ok=True)
            path.write_text(generate(engine, release))
            written.append(path)
    return written


USAGE = (
    "usage: python -m engines.db_settings_generate  (writes engines/data/*-settings.json, every release's)\n"
    "       python -m engines.db_settings_generate --print ENGINE RELEASE  (one file's text, to stdout)"
)


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0
    if len(argv) == 3 and argv[0] == "--print" and argv[1] in GENERATORS and argv[2] in releases.RELEASES:
        try:
            sys.stdout.write(generate(argv[1], argv[2]))
        except GenerateError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    if argv:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        written = write_all()
    except GenerateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
