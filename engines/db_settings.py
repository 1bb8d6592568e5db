"""What each server accepts of db_settings, a host's overrides of server settings (a flat mapping,
rendered last into my.cnf's [mysqld] for MariaDB or into postgresql.conf for PostgreSQL, the version
the host's debian_release ships: model/releases.py). Pure: no pyinfra, no servers; it reads only its
data files. engines/db_settings_check.py checks a host's overrides with it (validation) and adds up
their memory.

    setting_issues(engine, name, value, version)
                                           (message, fix) of each problem with one override
    as_bool(engine, value)                 True / False, or None when the engine would not read value
                                           as a boolean (PostgreSQL's "of", "n", "fa", MariaDB's "1")

What each server accepts comes from engines/data/<engine>-<version>-settings.json, generated from the
real servers by `python -m engines.db_settings_generate` (engines/db_settings_generate.py); a unit
test regenerates them from the installed binaries and compares. The value parsers follow the
servers' own: PostgreSQL's parse_bool, parse_int and parse_real with units, case-insensitive enum
names (guc.c); MariaDB's my_getopt (ON/OFF/TRUE/FALSE/1/0, integers with one K/M/G/T/P/E suffix,
enum and set names by unambiguous prefix or number, optimizer_switch-style flag=on|off|default).
A value is a problem when the server would refuse it, or ignore it, or replace it with a warning
(MariaDB clamps an out-of-range number and ignores a plugin's bad boolean with a warning only).

Not checked, because only the running server knows: string settings whose content a server checks
(time zones, library names, character sets), and relations between settings.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import engines
from model import keys, releases
from model.sizing import GIB, KIB, MIB

if TYPE_CHECKING:
    from model.problems import Problem

ENGINES = keys.choices("engine")  # "mariadb", "postgresql"
# Every server version a supported Debian release ships, per engine: {"mariadb": ("10.11", "11.8"), ...}
VERSIONS = {
    name: tuple(
        sorted(
            {r.version(name) for r in releases.RELEASES.values()}, key=lambda v: tuple(map(int, v.split(".")))
        )
    )
    for name in ENGINES
}
NAMES_FROM = {"mariadb": "`mariadbd --verbose --help`", "postgresql": "pg_settings"}
DATA_DIR = Path(__file__).resolve().parent / "data"

# The per-connection buffers sizing.MARIADB_PER_CONNECTION estimates (3 MiB with their defaults); an
# override changes a connection's worst case by its difference from the default (in the data file).
MARIADB_PER_CONNECTION_BUFFERS = (
    "sort_buffer_size",
    "join_buffer_size",
    "read_buffer_size",
    "read_rnd_buffer_size",
    "thread_stack",
    "net_buffer_length",
)

# Settings the toolkit sets itself, where an override would break the deploy or the replication
# group: setting -> (why, fix). Everything else may be overridden.
# What replaces a deprecated MariaDB setting (MariaDB 11's release notes; docs/releases.md).
MARIADB_REPLACED = {
    "innodb_flush_method": "set innodb_data_file_buffering and innodb_data_file_write_through "
    "(and innodb_log_file_buffering, innodb_log_file_write_through) instead",
    "innodb_file_per_table": "remove it: every table has its own file",
}
MARIADB_OWNED = {
    "datadir": (
        "the data lives on the engine's data dataset, which the storage role mounts and the server waits for",
        "remove it; move the dataset with zfs_dataset_properties (mountpoint)",
    ),
    "innodb_data_home_dir": (
        "InnoDB's files live on the engine's data dataset",
        "remove it; move the dataset with zfs_dataset_properties (mountpoint)",
    ),
    "innodb_log_group_home_dir": (
        "the redo log lives on the engine's log dataset",
        "remove it; move the dataset with zfs_dataset_properties (mountpoint)",
    ),
    "log_bin": (
        "the binary logs live on the log dataset, and GTID replication needs them",
        "remove it",
    ),
    "relay_log": ("the relay logs live on the log dataset", "remove it"),
    "server_id": (
        "it comes from the host's server_id, checked unique in its replication group",
        "set the host's server_id instead",
    ),
    "port": ("replicas, the roles and the checks connect to port 3306", "remove it"),
    "socket": (
        "the roles and facts run SQL as root through Debian's socket (/run/mysqld/mysqld.sock)",
        "remove it",
    ),
    "user": ("the server runs as mysql, which owns the datasets", "remove it"),
    "read_only": (
        "it follows the host's role (a replica is read-only)",
        "change the host's role instead",
    ),
    "skip_grant_tables": (
        "it turns authentication off: anyone could log in, and the roles' account statements fail",
        "remove it",
    ),
    "innodb_page_size": (
        "the data dataset's recordsize and the doublewrite decision are made for 16k pages, and "
        "an existing datadir cannot change it",
        "remove it; set the data dataset's recordsize instead",
    ),
}
PG_OWNED = {
    "data_directory": (
        "the cluster lives on the engine's data dataset, which the storage role mounts and the "
        "server waits for",
        "remove it; move the dataset with zfs_dataset_properties (mountpoint)",
    ),
    "hba_file": (
        "the toolkit writes pg_hba.conf (its replicas, db_users, db_client_networks) next to postgresql.conf",
        "remove it; declare clients in db_users and db_client_networks",
    ),
    "config_file": ("the toolkit writes the postgresql.conf Debian's pg_ctlcluster reads", "remove it"),
    "external_pid_file": ("Debian's pg_ctlcluster and its systemd unit find the server by it", "remove it"),
    "unix_socket_directories": (
        "the roles and facts connect as postgres through /var/run/postgresql",
        "remove it",
    ),
    "port": ("standbys stream from port 5432, and the roles and checks connect there", "remove it"),
}
# Values that break the replication group: setting -> (values, why, fix).
PG_REFUSED_VALUES = {
    "wal_level": (
        ("minimal",),
        "standbys need the WAL of replica or logical, and the server does not start with minimal "
        "while max_wal_senders > 0",
        "use 'replica' (the default) or 'logical'",
    ),
}
# PostgreSQL reads these per transaction and ignores them in postgresql.conf: setting -> what to set.
PG_IGNORED_IN_FILE = {
    "transaction_isolation": "default_transaction_isolation",
    "transaction_read_only": "default_transaction_read_only",
    "transaction_deferrable": "default_transaction_deferrable",
}
MARIADB_BOOL_PREFIXES = ("skip_", "disable_", "enable_")
PG_CUSTOM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)+$")


@dataclass(frozen=True)
class Setting:
    """A server setting as the data file describes it."""

    name: str
    type: str  # bool, integer, real, enum, string; MariaDB also set, flagset, flag (takes no value)
    min: int | float | None = None
    max: int | float | None = None
    unit: str | None = None  # PostgreSQL: the unit of a bare number (pg_settings.unit)
    values: tuple[str, ...] = ()  # enum, set and flagset names
    aliases: tuple[str, ...] = ()  # PostgreSQL: enum spellings pg_settings does not list
    context: str | None = None  # PostgreSQL: pg_settings.context (internal: read-only)
    default: int | None = None  # MariaDB: MARIADB_PER_CONNECTION_BUFFERS only
    deprecated: bool = False  # MariaDB: --help says so, and the server warns when it is set


def label(engine: str, version: str) -> str:
    """ "MariaDB 11.8" """
    return f"{engines.ENGINES[engine].label} {version}"


def data_file(engine: str, version: str) -> Path:
    return DATA_DIR / f"{engine}-{version}-settings.json"


@functools.cache
def known(engine: str, version: str) -> dict[str, Setting]:
    """The settings of an engine's server version by name, from its data file."""
    data = json.loads(data_file(engine, version).read_text())
    return {
        name: Setting(name=name, **{k: tuple(v) if isinstance(v, list) else v for k, v in entry.items()})
        for name, entry in data["settings"].items()
    }


@functools.cache
def _folded(engine: str, version: str) -> dict[str, str]:
    """Lower-case name (underscores for MariaDB's dashes) -> the name as the data spells it."""
    return {name.lower(): name for name in known(engine, version)}


def _problem(host: str, key: str, value: object, message: str, fix: str) -> Problem:
    from model.problems import Problem

    return Problem(host, key, value, message, fix)


# --- what the server reads ----------------------------------------------------------------------


def server_text(engine: str, value: object) -> str:
    """The text the server parses for a db_settings value, as roles.render writes it (PostgreSQL
    reads a quoted string without its quotes; my.cnf strips blanks and one pair of quotes)."""
    if isinstance(value, bool):
        return ("ON" if value else "OFF") if engine == "mariadb" else ("on" if value else "off")
    text = str(value)
    if engine == "mariadb":
        text = text.strip()
        if len(text) >= 2 and text[0] in "'\"" and text[-1] == text[0]:
            text = text[1:-1]
    return text


def _pg_bool(text: str) -> bool | None:
    # guc.c parse_bool: any case; a prefix of true, false, yes, no; on and off from two letters
    # ("o" alone is ambiguous); 1 and 0.
    low = text.lower()
    for word, result, shortest in (
        ("true", True, 1),
        ("false", False, 1),
        ("yes", True, 1),
        ("no", False, 1),
        ("on", True, 2),
        ("off", False, 2),
    ):
        if len(low) >= shortest and word.startswith(low):
            return result
    return {"1": True, "0": False}.get(low)


def _mariadb_bool(text: str) -> bool | None:
    # my_getopt get_bool_argument: any case.
    return {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}.get(text.lower())


def as_bool(engine: str, value: object) -> bool | None:
    """What the engine reads a db_settings value as when the setting is a boolean: True, False, or
    None when it is no boolean spelling of that engine (or value is None: not set)."""
    if value is None or isinstance(value, (Mapping, list, tuple, set)):
        return None
    text = server_text(engine, value)
    return _pg_bool(text) if engine == "postgresql" else _mariadb_bool(text)


# --- PostgreSQL numbers (guc.c parse_int, parse_real, convert_to_base_unit) ---------------------

_C_SPACE = " \t\n\v\f\r"
_STRTOL = re.compile(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_STRTOD = re.compile(
    r"[ \t\n\v\f\r]*[+-]?(?:(?P<hex>0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?)"
    r"|(?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)|(?P<inf>[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
    r"|(?P<nan>[nN][aA][nN]))"
)
# Units in bytes and microseconds, largest first as in guc.c's conversion tables.
_PG_MEMORY_UNITS = (("TB", 1024**4), ("GB", 1024**3), ("MB", 1024**2), ("kB", 1024), ("B", 1))
_PG_TIME_UNITS = (
    ("d", 86_400_000_000),
    ("h", 3_600_000_000),
    ("min", 60_000_000),
    ("s", 1_000_000),
    ("ms", 1_000),
    ("us", 1),
)
# pg_settings.unit -> (the units it takes, the unit's size in those units' measure).
_PG_BASE_UNITS = {
    "B": (_PG_MEMORY_UNITS, 1),
    "kB": (_PG_MEMORY_UNITS, 1024),
    "8kB": (_PG_MEMORY_UNITS, 8192),
    "MB": (_PG_MEMORY_UNITS, 1024**2),
    "ms": (_PG_TIME_UNITS, 1_000),
    "s": (_PG_TIME_UNITS, 1_000_000),
    "min": (_PG_TIME_UNITS, 60_000_000),
}
PG_UNIT_BYTES = {"B": 1, "kB": KIB, "8kB": 8 * KIB, "MB": MIB}


def _rint(x: float) -> float:
    return float(round(x)) if math.isfinite(x) else x  # round half to even, as rint()


def _strtod(text: str) -> tuple[float, str] | None:
    match = _STRTOD.match(text)
    if not match or match.group("nan"):
        return None
    number = match.group(0)
    if match.group("hex"):
        try:
            value = float.fromhex(number)
        except OverflowError:
            return None  # strtod's ERANGE
    else:
        value = float(number)
        mantissa = re.split("[eE]", match.group("dec") or "")[0]
        if match.group("dec") and (math.isinf(value) or (value == 0 and re.search("[1-9]", mantissa))):
            return None  # strtod's ERANGE: overflow or underflow
    return value, text[match.end() :]


def _pg_number(text: str, integer: bool) -> tuple[float, str] | None:
    """The number at the start of text and what follows it, as parse_int (strtol with base 0, or
    strtod at a '.' or an exponent) or parse_real (strtod) reads it; None when there is none."""
    if integer:
        match = _STRTOL.match(text)
        if match:
            sign, digits = match.groups()
            base = 16 if digits[:2] in ("0x", "0X") else 8 if len(digits) > 1 and digits[0] == "0" else 10
            value = int(digits[2:] if base == 16 else digits, base) * (-1 if sign == "-" else 1)
            rest = text[match.end() :]
            if -(2**63) <= value < 2**63 and rest[:1] not in (".", "e", "E"):
                return float(value), rest
        elif text[:1] not in (".", "e", "E"):
            return None
    return _strtod(text)


def _pg_to_base(value: float, rest: str, unit: str | None) -> float | None:
    """value with the unit written after it (rest), in the setting's unit; None when rest is not a
    unit the setting takes."""
    rest = rest.lstrip(_C_SPACE)
    if not rest:
        return value
    if unit not in _PG_BASE_UNITS:
        return None
    written = re.match(r"[^ \t\n\v\f\r]{1,3}", rest).group(0)
    if rest[len(written) :].strip(_C_SPACE):
        return None  # guc.c reads at most 3 characters of unit, then only blanks
    table, base = _PG_BASE_UNITS[unit]
    for i, (name, size) in enumerate(table):
        if name == written:
            converted = value * float(Fraction(size, base))
            if i + 1 < len(table):  # "30.1GB": to a whole number of the next smaller unit
                smaller = float(Fraction(table[i + 1][1], base))
                converted = _rint(converted / smaller) * smaller
            return converted
    return None


def pg_parse(setting: Setting, text: str) -> float | None:
    """A PostgreSQL integer or real setting's value in its unit, as the server reads text (an
    integer is rounded); None when the server would refuse the syntax."""
    parsed = _pg_number(text, setting.type == "integer")
    if parsed is None:
        return None
    value = _pg_to_base(parsed[0], parsed[1], setting.unit)
    if value is None or math.isnan(value):
        return None
    return _rint(value) if setting.type == "integer" else value


# --- MariaDB numbers and names (my_getopt, typelib find_type) ----------------------------------

_MARIADB_SUFFIXES = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50, "e": 1 << 60}
_MARIADB_REAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def mariadb_int(text: str) -> int | None:
    """An integer option's value as my_getopt reads it: strtoll, then one K/M/G/T/P/E suffix
    (powers of 1024; what follows the suffix letter is ignored); None when refused."""
    match = re.match(r"[+-]?[0-9]+", text)
    number, rest = (int(match.group(0)), text[match.end() :]) if match else (0, text)
    if not -(2**63) <= number < 2**64:
        return None
    if not rest:
        return number
    multiplier = _MARIADB_SUFFIXES.get(rest[0].lower())
    return None if multiplier is None else number * multiplier


def _find_type(text: str, names: tuple[str, ...]) -> int | None:
    """Index of text in names as MariaDB's find_type reads it: the whole name or an unambiguous
    prefix, any case; None when none or ambiguous."""
    low = text.lower()
    for i, name in enumerate(names):
        if name.lower() == low:
            return i
    prefixed = [i for i, name in enumerate(names) if name.lower().startswith(low)]
    return prefixed[0] if low and len(prefixed) == 1 else None


def _mariadb_enum_ok(text: str, names: tuple[str, ...]) -> bool:
    if _find_type(text, names) is not None:
        return True
    number = re.fullmatch(r"\+?([0-9]*)", text)  # or the value's number (strtoul; "" is 0)
    return bool(number) and int(number.group(1) or 0) < len(names)


def _mariadb_set_bad(text: str, names: tuple[str, ...]) -> str | None:
    """The first element of a set value (comma-separated, no blanks) MariaDB would refuse."""
    if not text:
        return None
    bad = next((e for e in text.split(",") if _find_type(e.rstrip(" "), names) is None), None)
    if bad is not None and re.fullmatch(r"[0-9]+", text) and int(text) >> 1 < 1 << (len(names) - 1):
        return None  # the set's bitmask as a number
    return bad


def _mariadb_flagset_bad(text: str, names: tuple[str, ...]) -> str | None:
    """The first element of a flag=on|off|default list (or "default") MariaDB would refuse."""
    if not text:
        return None
    default = len(names) - 1  # the list ends with "default"
    for element in text.split(","):
        flag, eq, state = element.partition("=")
        index = _find_type(flag, names)
        if eq:
            if index is None or index == default or _find_type(state, ("on", "off", "default")) is None:
                return element
        elif index != default:
            return element
    return None


# --- one setting ---------------------------------------------------------------------------------


def _amount(value: float, unit: str | None) -> str:
    whole = isinstance(value, int) or (value.is_integer() and abs(value) < 1e18)
    number = str(int(value)) if whole else f"{value:g}"
    if not unit:
        return number
    if unit == "8kB":  # blocks
        return f"{number} x 8kB ({_size(value * 8 * KIB)})"
    return f"{number}{unit}"


def _unit_hint(setting: Setting) -> str:
    unit = setting.unit
    what = "an integer" if setting.type == "integer" else "a number"
    if unit in PG_UNIT_BYTES:
        named = {"8kB": "8kB blocks", "B": "bytes"}.get(unit, unit)
        return f"{what} of {named}, or with a unit: B, kB, MB, GB, TB (e.g. '512MB')"
    if unit in _PG_BASE_UNITS:
        named = {"ms": "milliseconds", "s": "seconds", "min": "minutes"}[unit]
        return f"{what} of {named}, or with a unit: us, ms, s, min, h, d (e.g. '30s')"
    return what if setting.type == "integer" else "a number, e.g. 0.5"


def _range(setting: Setting, value: float) -> tuple[str, str] | None:
    if setting.min is None or setting.min <= value <= setting.max:
        return None
    lo, hi = _amount(setting.min, setting.unit), _amount(setting.max, setting.unit)
    return (
        f"out of range: {_amount(value, setting.unit)} is outside {lo}..{hi}",
        f"a value within {lo}..{hi}, or remove it for the default",
    )


def _pg_value_issue(setting: Setting, text: str) -> tuple[str, str] | None:
    if setting.type == "bool" and _pg_bool(text) is None:
        return "not a boolean", "on or off (PostgreSQL also takes true/false, yes/no, 1/0 and their prefixes)"
    if setting.type in ("integer", "real"):
        value = pg_parse(setting, text)
        if value is None:
            return ("not an integer" if setting.type == "integer" else "not a number"), _unit_hint(setting)
        return _range(setting, value)
    if setting.type == "enum" and text.lower() not in {v.lower() for v in setting.values + setting.aliases}:
        return f"not one of {', '.join(setting.values)}", f"use one of {list(setting.values)}"
    return None


def _mariadb_value_issue(setting: Setting, text: str) -> tuple[str, str] | None:
    kind = setting.type
    if kind == "flag":
        return "an option without a value: db_settings always writes one", "remove it"
    if kind == "bool" and _mariadb_bool(text) is None:
        return "not a boolean", "ON or OFF (MariaDB also takes TRUE/FALSE and 1/0)"
    if kind == "integer":
        value = mariadb_int(text)
        if value is None:
            return "not an integer", "an integer, optionally with a K, M, G, T, P or E suffix (e.g. 8G)"
        return _range(setting, value)
    if kind == "real":
        if not _MARIADB_REAL.fullmatch(text):
            return "not a number", "a decimal number without a unit, e.g. 0.5"
        return _range(setting, float(text))
    if kind == "enum" and not _mariadb_enum_ok(text, setting.values):
        return f"not one of {', '.join(setting.values)}", f"use one of {list(setting.values)}"
    if kind == "set":
        bad = _mariadb_set_bad(text, setting.values)
        if bad is not None:
            return (
                f"{bad!r} is not one of its values",
                f"a comma-separated list without blanks of {', '.join(setting.values)}, or '' for none",
            )
    if kind == "flagset":
        bad = _mariadb_flagset_bad(text, setting.values)
        if bad is not None:
            return (
                f"{bad!r} is not flag=on|off|default for one of its flags",
                f"comma-separated without blanks, e.g. '{setting.values[0]}=off'; the flags: "
                f"{', '.join(setting.values[:-1])}",
            )
    return None


def _close(engine: str, version: str, name: str) -> str:
    folded = _folded(engine, version)
    low = name.replace("-", "_").lower() if engine == "mariadb" else name.lower()
    close = difflib.get_close_matches(low, list(folded), n=3, cutoff=0.75)
    close = close or sorted(key for key in folded if key.startswith(low))[:3]
    if close:
        return f"did you mean {' or '.join(repr(folded[n]) for n in close)}?"
    return f"remove it, or take the name from {NAMES_FROM[engine]}"


def _mariadb_name_issue(name: str, version: str) -> tuple[str, str] | None:
    """A MariaDB name that is not an option's own: spelt differently, a prefix form, unknown."""
    folded = _folded("mariadb", version)
    low = name.replace("-", "_").lower()
    if low in folded:
        return (
            f"MariaDB reads it as {folded[low]}, but the toolkit matches overrides by their exact name",
            f"write {folded[low]!r}",
        )
    if low.startswith("loose_"):
        rest = low[len("loose_") :]
        if rest in folded:
            return (
                f"loose_ is for options of plugins the server may not load; {folded[rest]} is the server's",
                f"write {folded[rest]!r}",
            )
        return None  # an option of a plugin loaded with plugin_load_add: the server ignores it if absent
    for prefix in MARIADB_BOOL_PREFIXES:
        rest = low[len(prefix) :]
        if low.startswith(prefix) and rest in folded:
            return (
                f"{prefix} sets or inverts {folded[rest]}; the toolkit matches overrides by the option's "
                "own name",
                f"write {folded[rest]!r} with ON or OFF",
            )
    starting = [n for key, n in folded.items() if key.startswith(low)]
    if len(starting) == 1:
        return (
            f"an abbreviation of {starting[0]}: MariaDB takes it only while no other option starts so",
            f"write {starting[0]!r}",
        )
    return f"unknown {label('mariadb', version)} setting", _close("mariadb", version, name)


def _pg_name_issue(name: str, version: str) -> tuple[str, str] | None:
    folded = _folded("postgresql", version)
    if name.lower() in folded:
        return (
            f"PostgreSQL reads it as {name.lower()}, but the toolkit matches overrides by their exact name",
            f"write {name.lower()!r}",
        )
    if PG_CUSTOM_NAME.match(name):
        return None  # an extension's setting (auto_explain.log_min_duration, ...): not known here
    return f"unknown {label('postgresql', version)} setting", _close("postgresql", version, name)


def setting_issues(engine: str, name: object, value: object, version: str) -> list[tuple[str, str]]:
    """(message, fix) for each problem with one db_settings entry, for that server version."""
    if not isinstance(name, str) or not name:
        return [("not a setting name", "use the setting's name, a string")]
    if value is None or isinstance(value, (Mapping, list, tuple, set, bytes)):
        return [
            (
                f"{type(value).__name__} is not a setting value",
                "a string, number or boolean; remove the key for the default",
            )
        ]
    text = server_text(engine, value)
    if "\n" in text or "\r" in text:
        return [("contains a line break, which would end the config line", "one line only")]
    raw = text if isinstance(value, bool) else str(value).strip()
    if engine == "mariadb" and "#" in raw and not (len(raw) >= 2 and raw[0] in "'\"" and raw[-1] == raw[0]):
        return [
            (
                "my.cnf reads '#' as the start of a comment and would cut the value there",
                "quote the value inside the string, e.g. \"'a#b'\"",
            )
        ]
    setting = known(engine, version).get(name)
    if setting is None:
        issue = _mariadb_name_issue(name, version) if engine == "mariadb" else _pg_name_issue(name, version)
        return [issue] if issue else []
    owned = (MARIADB_OWNED if engine == "mariadb" else PG_OWNED).get(name)
    if owned:
        return [(f"set by the toolkit: {owned[0]}", owned[1])]
    if engine == "mariadb":
        if setting.deprecated:
            return [
                (
                    f"deprecated in {label(engine, version)}: the server warns and will drop it",
                    MARIADB_REPLACED.get(name, "remove it"),
                )
            ]
        issue = _mariadb_value_issue(setting, text)
        return [issue] if issue else []
    if setting.context == "internal":
        return [("read-only: PostgreSQL reports it, it cannot be set", "remove it")]
    if name in PG_IGNORED_IN_FILE:
        return [
            (
                "PostgreSQL ignores it in postgresql.conf (it is per transaction)",
                f"set {PG_IGNORED_IN_FILE[name]!r}",
            )
        ]
    issue = _pg_value_issue(setting, text)
    if issue:
        return [issue]
    if name in PG_REFUSED_VALUES and text.lower() in PG_REFUSED_VALUES[name][0]:
        _, why, fix = PG_REFUSED_VALUES[name]
        return [(f"{text} breaks replication: {why}", fix)]
    return []


def setting_problems(engine: str, name: object, value: object, version: str, host: str = "") -> list[Problem]:
    """Problems with one db_settings entry (host names them)."""
    return [
        _problem(host, f"db_settings[{name!r}]", value, m, f)
        for m, f in setting_issues(engine, name, value, version)
    ]


def _size(n: float) -> str:
    for unit, name in ((1024**4, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if abs(n) >= unit:
            return f"{n / unit:.2f}".rstrip("0").rstrip(".") + f" {name}"
    return f"{int(n)} B"
