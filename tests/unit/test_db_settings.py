"""db_settings checks (engines/db_settings.py), offline: each class of problem with a bad input and
the exact report, the values each engine's parsers accept, the boolean normaliser, the memory check.
That the servers agree with these verdicts is tests/unit/test_db_settings_servers.py."""

import copy

import pytest

import engines
from engines import db_settings, db_settings_check
from model.hostdata import HostConfig
from validation import validate

from tests.unit.conftest import GIB

# The default release's servers (debian_release "13": MariaDB 11.8, PostgreSQL 17); the other
# release's files are checked by the tests that name a version.
V = {name: engines.get(name).version for name in db_settings.ENGINES}


def report(engine, name, value, host="h1", version=None):
    return [str(p) for p in db_settings.setting_problems(engine, name, value, version or V[engine], host)]


def host_problems(fleet, host, secrets, **data):
    fleet[host].update(data)
    return [str(p) for p in validate(fleet, secrets) if p.host == host]


# --- names -----------------------------------------------------------------------------------------


def test_unknown_names_with_did_you_mean():
    assert report("mariadb", "innodb_buffer_poll_size", "8G") == [
        "h1: db_settings['innodb_buffer_poll_size'] = '8G': unknown MariaDB 11.8 setting. Fix: did you "
        "mean 'innodb_buffer_pool_size' or 'innodb_buffer_pool_size_max' or 'innodb_buffer_pool_chunk_size'?"
    ]
    assert report("postgresql", "shared_buffer", "1GB") == [
        "h1: db_settings['shared_buffer'] = '1GB': unknown PostgreSQL 17 setting. Fix: did you mean "
        "'shared_buffers'?"
    ]


def test_unknown_names_without_a_close_one():
    assert report("postgresql", "zzz_nothing", 1) == [
        "h1: db_settings['zzz_nothing'] = 1: unknown PostgreSQL 17 setting. Fix: remove it, or take the "
        "name from pg_settings"
    ]
    assert report("mariadb", "zzz_nothing", 1) == [
        "h1: db_settings['zzz_nothing'] = 1: unknown MariaDB 11.8 setting. Fix: remove it, or take the "
        "name from `mariadbd --verbose --help`"
    ]


def test_a_name_is_per_engine():
    assert report("postgresql", "innodb_buffer_pool_size", "8G")[0].endswith(
        "unknown PostgreSQL 17 setting. Fix: remove it, or take the name from pg_settings"
    )
    assert "unknown MariaDB 11.8 setting" in report("mariadb", "shared_buffers", "8GB")[0]


@pytest.mark.parametrize(
    ("engine", "name", "message", "fix"),
    [
        (
            "mariadb",
            "innodb-buffer-pool-size",
            "MariaDB reads it as innodb_buffer_pool_size, but the toolkit matches overrides by their "
            "exact name",
            "write 'innodb_buffer_pool_size'",
        ),
        (
            "mariadb",
            "Max_Connections",
            "MariaDB reads it as max_connections, but the toolkit matches overrides by their exact name",
            "write 'max_connections'",
        ),
        (
            "mariadb",
            "skip_innodb_doublewrite",
            "skip_ sets or inverts innodb_doublewrite; the toolkit matches overrides by the option's "
            "own name",
            "write 'innodb_doublewrite' with ON or OFF",
        ),
        (
            "mariadb",
            "loose_max_connections",
            "loose_ is for options of plugins the server may not load; max_connections is the server's",
            "write 'max_connections'",
        ),
        (
            "mariadb",
            "max_connect_err",
            "an abbreviation of max_connect_errors: MariaDB takes it only while no other option starts so",
            "write 'max_connect_errors'",
        ),
        (
            "postgresql",
            "Work_Mem",
            "PostgreSQL reads it as work_mem, but the toolkit matches overrides by their exact name",
            "write 'work_mem'",
        ),
    ],
)
def test_other_spellings_of_a_name_are_refused(engine, name, message, fix):
    # The server would take them, but render.py replaces a sized line by the exact name only and the
    # memory check reads exact names: another spelling would leave both lines in the file.
    assert report(engine, name, 1) == [f"h1: db_settings[{name!r}] = 1: {message}. Fix: {fix}"]


def test_names_the_data_cannot_know_pass():
    # a plugin's option behind loose_ (the server ignores it when the plugin is not loaded), an
    # extension's setting
    assert report("mariadb", "loose_server_audit_logging", "ON") == []
    assert report("postgresql", "auto_explain.log_min_duration", "1s") == []


def test_a_name_must_be_a_string():
    assert report("postgresql", 5, "x") == [
        "h1: db_settings[5] = 'x': not a setting name. Fix: use the setting's name, a string"
    ]


# --- values of each type ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["on", "OFF", "true", "f", "fa", "yes", "n", "of", "1", "0", True, False, 1]
)
def test_postgresql_booleans(value):
    assert report("postgresql", "full_page_writes", value) == []


@pytest.mark.parametrize("value", ["o", "nope", "2", "", "offf", "ja", 2, 0.0])
def test_postgresql_not_booleans(value):
    assert report("postgresql", "full_page_writes", value) == [
        f"h1: db_settings['full_page_writes'] = {value!r}: not a boolean. Fix: on or off (PostgreSQL "
        "also takes true/false, yes/no, 1/0 and their prefixes)"
        if isinstance(value, str)
        else f"h1: db_settings['full_page_writes'] = {value}: not a boolean. Fix: on or off (PostgreSQL "
        "also takes true/false, yes/no, 1/0 and their prefixes)"
    ]


@pytest.mark.parametrize("value", ["ON", "off", "TRUE", "false", "1", "0", True, False, 0])
def test_mariadb_booleans(value):
    assert report("mariadb", "innodb_doublewrite", value, version="10.11") == []


@pytest.mark.parametrize("value", ["ON", "off", "fast", "0", "1", "2", True, False])
def test_mariadb_11_doublewrite_is_an_enum(value):
    # MariaDB 11.8 made innodb_doublewrite an enum (OFF, ON, fast): names and their numbers only
    assert report("mariadb", "innodb_doublewrite", value, version="11.8") == []
    assert report("mariadb", "innodb_doublewrite", "TRUE", version="11.8") == [
        "h1: db_settings['innodb_doublewrite'] = 'TRUE': not one of OFF, ON, fast. Fix: use one of "
        "['OFF', 'ON', 'fast']"
    ]


@pytest.mark.parametrize("value", ["yes", "of", "2", "", "no"])
def test_mariadb_not_booleans(value):
    assert report("mariadb", "innodb_doublewrite", value, version="10.11") == [
        f"h1: db_settings['innodb_doublewrite'] = {value!r}: not a boolean. Fix: ON or OFF (MariaDB also "
        "takes TRUE/FALSE and 1/0)"
    ]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("shared_buffers", "8GB"),
        ("shared_buffers", "1.5GB"),
        ("shared_buffers", "8 GB"),
        ("shared_buffers", 16),  # the minimum, in 8kB blocks
        ("work_mem", "64kB"),
        ("work_mem", "1e3"),  # 1000 kB
        ("work_mem", "0x100"),  # strtol: hex
        ("work_mem", 65536),
        ("checkpoint_timeout", "1h"),
        ("checkpoint_timeout", "29999ms"),  # 29.999 s, rounded to 30 s
        ("log_rotation_age", "90s"),  # 1.5 min, rounded to 2
        ("max_connections", 500),
        ("vacuum_cost_delay", "500us"),
        ("random_page_cost", 1.1),
        ("random_page_cost", "4"),
    ],
)
def test_postgresql_numbers(name, value):
    assert report("postgresql", name, value) == []


@pytest.mark.parametrize(
    ("name", "value", "message", "fix"),
    [
        (
            "shared_buffers",
            "12xB",
            "not an integer",
            "an integer of 8kB blocks, or with a unit: B, kB, MB, GB, TB (e.g. '512MB')",
        ),
        (
            "shared_buffers",
            "8gb",  # units are case-sensitive
            "not an integer",
            "an integer of 8kB blocks, or with a unit: B, kB, MB, GB, TB (e.g. '512MB')",
        ),
        (
            "shared_buffers",
            "100kB",
            "out of range: 12 x 8kB (96 KiB) is outside 16 x 8kB (128 KiB)..1073741823 x 8kB (8 TiB)",
            "a value within 16 x 8kB (128 KiB)..1073741823 x 8kB (8 TiB), or remove it for the default",
        ),
        (
            "work_mem",
            "63kB",
            "out of range: 63kB is outside 64kB..2147483647kB",
            "a value within 64kB..2147483647kB, or remove it for the default",
        ),
        (
            "checkpoint_timeout",
            "10s",
            "out of range: 10s is outside 30s..86400s",
            "a value within 30s..86400s, or remove it for the default",
        ),
        (
            "checkpoint_timeout",
            "30 sec",
            "not an integer",
            "an integer of seconds, or with a unit: us, ms, s, min, h, d (e.g. '30s')",
        ),
        ("max_connections", "100MB", "not an integer", "an integer"),
        (
            "vacuum_cost_delay",
            "200ms",
            "out of range: 200ms is outside 0ms..100ms",
            "a value within 0ms..100ms, or remove it for the default",
        ),
        ("random_page_cost", "abc", "not a number", "a number, e.g. 0.5"),
        ("random_page_cost", "nan", "not a number", "a number, e.g. 0.5"),
    ],
)
def test_postgresql_numbers_refused(name, value, message, fix):
    shown = repr(value)
    assert report("postgresql", name, value) == [
        f"h1: db_settings[{name!r}] = {shown}: {message}. Fix: {fix}"
    ]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("innodb_buffer_pool_size", "8G"),
        ("innodb_buffer_pool_size", "8g"),
        ("innodb_buffer_pool_size", "8GB"),  # my_getopt reads one suffix letter
        ("innodb_buffer_pool_size", 8 * GIB),
        ("max_connections", "+500"),
        ("innodb_log_write_ahead_size", 4096),
        ("long_query_time", 0.5),
        ("long_query_time", ".5"),
        ("long_query_time", "1e2"),
    ],
)
def test_mariadb_numbers(name, value):
    assert report("mariadb", name, value) == []


@pytest.mark.parametrize(
    ("name", "value", "message", "fix"),
    [
        (
            "innodb_buffer_pool_size",
            "1.5G",
            "not an integer",
            "an integer, optionally with a K, M, G, T, P or E suffix (e.g. 8G)",
        ),
        (
            "max_connections",
            "0x10",
            "not an integer",
            "an integer, optionally with a K, M, G, T, P or E suffix (e.g. 8G)",
        ),
        (
            "max_connections",
            1,
            "out of range: 1 is outside 10..100000",
            "a value within 10..100000, or remove it for the default",
        ),
        (
            "innodb_log_write_ahead_size",
            16384,
            "out of range: 16384 is outside 512..4096",
            "a value within 512..4096, or remove it for the default",
        ),
        ("long_query_time", "1k", "not a number", "a decimal number without a unit, e.g. 0.5"),
        (
            "long_query_time",
            -1,
            "out of range: -1 is outside 0..31536000",
            "a value within 0..31536000, or remove it for the default",
        ),
    ],
)
def test_mariadb_numbers_refused(name, value, message, fix):
    shown = value if isinstance(value, int) else repr(value)
    assert report("mariadb", name, value) == [f"h1: db_settings[{name!r}] = {shown}: {message}. Fix: {fix}"]


def test_postgresql_enums():
    for name, value in [
        ("wal_level", "logical"),
        ("wal_level", "archive"),  # an older name of replica, not in pg_settings
        ("huge_pages", "yes"),  # on/off enums take the boolean spellings
        ("synchronous_commit", "REMOTE_APPLY"),
        ("log_min_messages", "debug"),
    ]:
        assert report("postgresql", name, value) == [], (name, value)
    assert report("postgresql", "log_statement", "on") == [
        "h1: db_settings['log_statement'] = 'on': not one of none, ddl, mod, all. Fix: use one of "
        "['none', 'ddl', 'mod', 'all']"
    ]
    assert report("postgresql", "wal_compression", "fa")[0].startswith(
        "h1: db_settings['wal_compression'] = 'fa': not one of pglz, lz4, zstd, on, off. Fix:"
    )


def test_mariadb_enums():
    # the name in any case, an unambiguous prefix, or its number
    for value in ["ROW", "row", "M", 2]:
        assert report("mariadb", "binlog_format", value) == [], value
    for value in ["xx", 9, "O_D"]:
        name = "innodb_flush_method" if value == "O_D" else "binlog_format"
        assert report("mariadb", name, value), value
    assert report("mariadb", "binlog_format", "xx") == [
        "h1: db_settings['binlog_format'] = 'xx': not one of MIXED, STATEMENT, ROW. Fix: use one of "
        "['MIXED', 'STATEMENT', 'ROW']"
    ]


def test_mariadb_sets_and_flags():
    assert report("mariadb", "sql_mode", "STRICT_TRANS_TABLES,NO_ZERO_DATE") == []
    assert report("mariadb", "sql_mode", "") == []
    [problem] = report("mariadb", "sql_mode", "STRICT_TRANS_TABLES, NO_ZERO_DATE")
    assert problem.startswith(
        "h1: db_settings['sql_mode'] = 'STRICT_TRANS_TABLES, NO_ZERO_DATE': ' NO_ZERO_DATE' is not one of "
        "its values. Fix: a comma-separated list without blanks of REAL_AS_FLOAT, PIPES_AS_CONCAT,"
    )
    assert report("mariadb", "optimizer_switch", "mrr=on,mrr_sort_keys=off") == []
    assert report("mariadb", "optimizer_switch", "default") == []
    [problem] = report("mariadb", "optimizer_switch", "mrr=maybe")
    assert problem.startswith(
        "h1: db_settings['optimizer_switch'] = 'mrr=maybe': 'mrr=maybe' is not flag=on|off|default for one "
        "of its flags. Fix: comma-separated without blanks, e.g. 'index_merge=off'; the flags: index_merge,"
    )


def test_strings():
    assert report("postgresql", "log_line_prefix", "%m [%p] ") == []
    assert report("mariadb", "init_connect", "SET NAMES utf8mb4") == []
    assert report("mariadb", "init_connect", "SET NAMES utf8mb4 # x") == [
        "h1: db_settings['init_connect'] = 'SET NAMES utf8mb4 # x': my.cnf reads '#' as the start of a "
        "comment and would cut the value there. Fix: quote the value inside the string, e.g. \"'a#b'\""
    ]
    assert report("mariadb", "init_connect", "'SET @a = \"#\"'") == []
    assert report("postgresql", "log_line_prefix", "a\nb") == [
        "h1: db_settings['log_line_prefix'] = 'a\\nb': contains a line break, which would end the config "
        "line. Fix: one line only"
    ]


def test_an_option_that_takes_no_value():
    assert report("mariadb", "bootstrap", 1) == [
        "h1: db_settings['bootstrap'] = 1: an option without a value: db_settings always writes one. "
        "Fix: remove it"
    ]


def test_not_a_single_value():
    assert report("postgresql", "work_mem", ["8MB"]) == [
        "h1: db_settings['work_mem'] = ['8MB']: list is not a setting value. Fix: a string, number or "
        "boolean; remove the key for the default"
    ]


def test_postgresql_read_only_and_ignored_settings():
    assert report("postgresql", "block_size", 16384) == [
        "h1: db_settings['block_size'] = 16384: read-only: PostgreSQL reports it, it cannot be set. "
        "Fix: remove it"
    ]
    assert report("postgresql", "transaction_isolation", "serializable") == [
        "h1: db_settings['transaction_isolation'] = 'serializable': PostgreSQL ignores it in "
        "postgresql.conf (it is per transaction). Fix: set 'default_transaction_isolation'"
    ]


# --- settings the toolkit owns --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "name"),
    [("mariadb", n) for n in db_settings.MARIADB_OWNED] + [("postgresql", n) for n in db_settings.PG_OWNED],
)
def test_owned_settings_are_refused(engine, name):
    why, fix = (db_settings.MARIADB_OWNED if engine == "mariadb" else db_settings.PG_OWNED)[name]
    assert name in db_settings.known(engine, V[engine])  # the list names real settings
    assert report(engine, name, "x") == [
        f"h1: db_settings[{name!r}] = 'x': set by the toolkit: {why}. Fix: {fix}"
    ]


def test_owned_settings_examples():
    assert report("mariadb", "datadir", "/var/lib/mysql") == [
        "h1: db_settings['datadir'] = '/var/lib/mysql': set by the toolkit: the data lives on the engine's "
        "data dataset, which the storage role mounts and the server waits for. Fix: remove it; move the "
        "dataset with zfs_dataset_properties (mountpoint)"
    ]
    assert report("postgresql", "port", 5433) == [
        "h1: db_settings['port'] = 5433: set by the toolkit: standbys stream from port 5432, and the roles "
        "and checks connect there. Fix: remove it"
    ]


def test_wal_level_minimal_breaks_replication():
    assert report("postgresql", "wal_level", "minimal") == [
        "h1: db_settings['wal_level'] = 'minimal': minimal breaks replication: standbys need the WAL of "
        "replica or logical, and the server does not start with minimal while max_wal_senders > 0. Fix: "
        "use 'replica' (the default) or 'logical'"
    ]
    assert report("postgresql", "wal_level", "MINIMAL")


# --- the boolean normaliser -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "postgresql", "mariadb"),
    [
        ("off", False, False),
        ("OFF", False, False),
        ("of", False, None),
        ("no", False, None),
        ("n", False, None),
        ("false", False, False),
        ("fa", False, None),
        ("f", False, None),
        ("0", False, False),
        (0, False, False),
        (False, False, False),
        ("on", True, True),
        ("yes", True, None),
        ("t", True, None),
        ("1", True, True),
        (True, True, True),
        ("o", None, None),
        ("2", None, None),
        ("", None, None),
        (None, None, None),
        (" off", None, False),  # my.cnf strips blanks, postgresql.conf's quoted string keeps them
    ],
)
def test_as_bool(value, postgresql, mariadb):
    assert db_settings.as_bool("postgresql", value) is postgresql
    assert db_settings.as_bool("mariadb", value) is mariadb


@pytest.mark.parametrize("off", ["off", "OFF", "of", "no", "n", "false", "fa", "f", "0", 0, False])
def test_full_page_writes_off_in_any_spelling_needs_8k_records(fleet, secrets, off):
    problems = host_problems(
        fleet,
        "pg1",
        secrets,
        zfs_dataset_properties={"datastore/postgresql": {"recordsize": "4k"}},
        db_settings={"full_page_writes": off},
    )
    value = repr(off) if isinstance(off, str) else off
    assert problems == [
        f"pg1: db_settings['full_page_writes'] = {value}: unsafe with recordsize 4096 < 8k on "
        "datastore/postgresql: a page could be torn across records. Fix: set the data dataset's recordsize "
        "to >= 8k or drop the override"
    ]


@pytest.mark.parametrize("on", ["on", "yes", "t", True])
def test_full_page_writes_on_is_fine_with_small_records(fleet, secrets, on):
    props = {"datastore/postgresql": {"recordsize": "4k"}}
    assert (
        host_problems(
            fleet, "pg1", secrets, zfs_dataset_properties=props, db_settings={"full_page_writes": on}
        )
        == []
    )


# --- memory ----------------------------------------------------------------------------------------


def test_overrides_that_fit_pass_validation(fleet, secrets):
    fleet["db1"]["db_settings"] = {"innodb_buffer_pool_size": "2G", "slow_query_log": "ON", "sql_mode": ""}
    # PostgreSQL's ARC takes what sizing leaves over: more work_mem needs a smaller zfs_arc_max
    fleet["pg1"]["db_settings"] = {
        "work_mem": "2MB",
        "full_page_writes": "on",
        "log_min_duration_statement": 500,
    }
    fleet["pg1"]["zfs_module_params"] = {"zfs_arc_max": 256 * 1024**2}
    assert validate(fleet, secrets) == []


def test_mariadb_memory_over_ram(fleet, secrets):
    assert host_problems(fleet, "db1", secrets, db_settings={"innodb_buffer_pool_size": "3G"}) == [
        "db1: db_settings['innodb_buffer_pool_size'] = '3G': MariaDB 11.8 memory with the overrides is more "
        "than the RAM (4 GiB): innodb_buffer_pool_size 3 GiB + innodb_log_buffer_size 32 MiB + 453 MiB for "
        "max_connections 151 x 3 MiB per connection + ARC 256 MiB + OS headroom 512 MiB = 4.22 GiB. Fix: "
        "take 229 MiB or more off the overrides (or off the ARC with zfs_module_params' zfs_arc_max), or "
        "remove them (sized: innodb_buffer_pool_size 2 GiB)"
    ]


def test_mariadb_per_connection_buffers_count(fleet, secrets):
    # 151 connections x (3 MiB + 62 MiB more sort buffer) = 9.58 GiB
    [problem] = host_problems(fleet, "db1", secrets, db_settings={"sort_buffer_size": "64M"})
    assert problem.startswith(
        "db1: db_settings['sort_buffer_size'] = '64M': MariaDB 11.8 memory with the overrides is more than "
        "the RAM (4 GiB): innodb_buffer_pool_size 2 GiB + innodb_log_buffer_size 32 MiB + 9.58 GiB for "
        "max_connections 151 x 65 MiB per connection"
    )
    assert problem.endswith("(sized: sort_buffer_size 2 MiB)")


def test_postgresql_memory_over_ram_names_every_override(fleet, secrets):
    assert host_problems(fleet, "pg1", secrets, db_settings={"work_mem": "64MB", "max_connections": 100}) == [
        "pg1: db_settings = {'max_connections': 100, 'work_mem': '64MB'}: PostgreSQL 17 memory with the "
        "overrides is more than the RAM (4 GiB): shared_buffers 1 GiB + wal_buffers 16 MiB + 13.5 GiB for "
        "(max_connections 100 + max_worker_processes 8) x work_mem 64 MiB x max_parallel_workers_per_gather "
        "2 + maintenance_work_mem 256 MiB + 255 MiB for autovacuum_max_workers 3 x autovacuum_work_mem "
        "85 MiB + ARC 960 MiB + OS headroom 512 MiB = 16.45 GiB. Fix: take 12.45 GiB or more off the "
        "overrides (or off the ARC with zfs_module_params' zfs_arc_max), or remove them (sized: "
        "max_connections 300, work_mem 1.66 MiB)"
    ]


def test_arc_max_override_counts_and_zero_is_the_modules_default(fleet, secrets):
    [problem] = host_problems(fleet, "pg1", secrets, zfs_module_params={"zfs_arc_max": 0})
    assert problem.startswith(
        "pg1: zfs_module_params['zfs_arc_max'] = 0: PostgreSQL 17 memory with the overrides is more than the "
        "RAM (4 GiB): "
    )
    assert "+ ARC 3 GiB (the zfs module ignores zfs_arc_max 0 and takes its default) +" in problem
    assert db_settings_check.effective_arc_max(0, 4 * GIB) == 3 * GIB  # max(RAM - 1 GiB, 5/8 RAM)
    assert db_settings_check.effective_arc_max(64 * GIB, 512 * GIB) == 64 * GIB
    assert db_settings_check.effective_arc_max(8 * GIB, 512 * GIB) == 511 * GIB  # not above arc_min (RAM/32)


def test_memory_problems_takes_the_live_hardware(fleet):
    # The deploy calls it with the host's facts: the same override fits a bigger host.
    fleet["db1"]["db_settings"] = {"innodb_buffer_pool_size": "3G"}
    cfg = HostConfig.from_data("db1", fleet["db1"])
    assert len(db_settings_check.memory_problems(cfg, 4 * GIB, 2)) == 1
    assert db_settings_check.memory_problems(cfg, 8 * GIB, 2) == []


def test_memory_without_overrides_is_the_sized_budget(fleet):
    # The check counts what model.sizing budgets: with nothing overridden it is the budget, which fits.
    hosts = copy.deepcopy(fleet)
    hw_grid = [(4 * GIB, 2), (16 * GIB, 8), (512 * GIB, 64), (2 * 1024 * GIB, 128)]
    for name in ("db1", "pg1"):
        cfg = HostConfig.from_data(name, hosts[name])
        for ram, cpus in hw_grid:
            use = db_settings_check.memory_use(cfg, ram, cpus)
            assert use.total == cfg.sizing(ram, cpus).budget.total <= ram
            assert use.overrides == {}
            assert db_settings_check.memory_problems(cfg, ram, cpus) == []


def test_invalid_overrides_are_left_to_their_own_problem(fleet, secrets):
    problems = host_problems(fleet, "db1", secrets, db_settings={"innodb_buffer_pool_size": "1.5T!"})
    assert [p.split(": ")[2] for p in problems] == ["not an integer. Fix"]


# --- the data files ------------------------------------------------------------------------------


def test_data_files_are_read_offline():
    # ./dbzfs validate needs no server: the checks read the checked-in files only.
    for engine, versions in db_settings.VERSIONS.items():
        for version in versions:
            path = db_settings.data_file(engine, version)
            assert path.parent.name == "data" and path.exists()
            assert len(db_settings.known(engine, version)) > 300
    assert db_settings.known("postgresql", V["postgresql"])["shared_buffers"].unit == "8kB"
    assert db_settings.known("mariadb", V["mariadb"])["sort_buffer_size"].default == 2 * 1024**2
