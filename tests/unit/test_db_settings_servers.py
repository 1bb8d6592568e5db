"""The db_settings checks agree with the real servers of every supported Debian release: this
machine's own for Debian 12 (MariaDB 10.11, PostgreSQL 15: scripts/bootstrap) and those in the
Debian 13 root scripts/servers-chroot builds (MariaDB 11.8, PostgreSQL 17, run under chroot); a
missing server fails these tests, it never skips them:

- the data files in engines/data/ are what `python -m engines.db_settings_generate` makes from the
  servers, so a new server version that changes a setting fails here until the files are
  regenerated (and the diff reviewed);
- for a sample of each type of setting (boolean, integer with and without a unit, real, enum, set),
  a value the offline check accepts is accepted by the server, and one it refuses is refused: the
  value goes into a lab host's config as roles/render.py writes it, and mariadbd --verbose --help or
  postgres -C reads the file (MariaDB "refuses" with an error, or with a warning that it ignored,
  adjusted or deprecated the value).
"""

import difflib
import os
import shutil

import pytest

from engines import db_settings, db_settings_generate
from model import releases
from model.hostdata import HostConfig
from roles.render import render_host

from tests.unit.real_servers import Servers

RELEASES = sorted(releases.RELEASES)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("engine", db_settings.ENGINES)
def test_data_files_match_the_servers(engine, release):
    servers = Servers(release)
    servers.require(servers.mariadbd if engine == "mariadb" else f"{servers.pg_bin}/postgres")
    path = db_settings.data_file(engine, releases.get(release).version(engine))
    generated = db_settings_generate.generate(engine, release)
    checked_in = path.read_text()
    diff = "".join(
        difflib.unified_diff(
            checked_in.splitlines(True), generated.splitlines(True), str(path), "generated", n=0
        )
    )
    assert generated == checked_in, (
        f"{path} differs from Debian {release}'s server: run python -m engines.db_settings_generate "
        f"and review the diff\n{diff[:5000]}"
    )


def rendered(fleet, host: str, name: str, value, release: str) -> str:
    """The host's config file with db_settings = {name: value}, as the deploy writes it."""
    for data in fleet.values():
        data["debian_release"] = release
    fleet[host]["db_settings"] = {name: value}
    cfgs = {n: HostConfig.from_data(n, d) for n, d in fleet.items()}
    cfg = cfgs[host]
    files = render_host(cfg, cfg.sizing(), [c for c in cfgs.values() if c.cluster == cfg.cluster])
    return files["my.cnf.j2" if cfg.engine == "mariadb" else "postgresql.conf.j2"]


def mariadbd_accepts(servers: Servers, cnf_text: str) -> tuple[bool, str]:
    tmp = servers.scratch("dbzfs-settings-")
    try:
        (tmp / "my.cnf").write_text(cnf_text)
        user = ["--user=mysql"] if os.geteuid() == 0 else []
        cnf = servers.inside(tmp / "my.cnf")
        result = servers.run(
            [servers.require(servers.mariadbd), f"--defaults-file={cnf}", *user, "--verbose", "--help"]
        )
    finally:
        shutil.rmtree(tmp)
    complaints = [
        line
        for line in result.stderr.splitlines()
        if ("ERROR" in line or "Warning" in line)
        and "max_open_files" not in line
        and "mysql.plugin" not in line
    ]
    return result.returncode == 0 and not complaints, result.stderr


@pytest.fixture(scope="module", params=RELEASES, ids=lambda r: f"debian{r}")
def pg(request):
    """(servers, a scratch directory postgres reads its files from) for one release."""
    servers = Servers(request.param)
    # Under the root's /tmp, owned by its postgres: postgres runs as postgres and refuses root.
    path = servers.scratch("dbzfs-settings-test-", owner="postgres")
    (path / "pg_hba.conf").write_text("local all postgres peer\n")
    (path / "pg_ident.conf").write_text("")
    yield servers, path
    shutil.rmtree(path)


def postgres_reads(pg, conf_text: str, param: str):
    servers, tmp = pg
    conf = tmp / "postgresql.conf"
    inside = servers.inside(tmp)
    conf.write_text(conf_text.replace(f"/etc/postgresql/{servers.pg_version}/main", inside))
    servers.own(conf, "postgres")
    postgres = servers.require(f"{servers.pg_bin}/postgres")
    return servers.run([postgres, f"--config-file={inside}/postgresql.conf", "-C", param], user="postgres")


def sample(name, value, accepted):
    shown = "ok" if accepted is True else "refused" if accepted is False else "per-version"
    return pytest.param(name, value, accepted, id=f"{name}={value!r}-{shown}")


MARIADB_SAMPLES = [
    # booleans
    sample("innodb_doublewrite", "ON", True),
    sample("innodb_doublewrite", "off", True),
    sample("innodb_doublewrite", "TRUE", {"10.11": True, "other": False}),  # 11.8: an enum OFF/ON/fast
    sample("innodb_doublewrite", 0, True),
    sample("innodb_doublewrite", True, True),
    sample("innodb_doublewrite", "yes", False),
    sample("innodb_doublewrite", "of", {"10.11": False, "other": True}),  # 11.8: a prefix of OFF
    sample("innodb_doublewrite", 2, {"11.8": True, "other": False}),  # 11.8: fast
    sample("slow_query_log", "on", True),
    sample("slow_query_log", "maybe", False),
    # integers: K/M/G suffixes, ranges
    sample("innodb_buffer_pool_size", "1G", True),
    sample("innodb_buffer_pool_size", "512m", True),
    sample("innodb_buffer_pool_size", "1GB", True),
    sample("innodb_buffer_pool_size", "1.5G", False),
    sample("innodb_buffer_pool_size", "1M", False),
    sample("max_connections", 500, True),
    sample("max_connections", "1K", True),
    sample("max_connections", 1, False),
    sample("max_connections", "10x", False),
    sample("max_connections", "0x10", False),
    sample("max_connections", -5, False),
    sample("innodb_log_write_ahead_size", 4096, True),
    sample("innodb_log_write_ahead_size", 16384, False),
    # reals
    sample("long_query_time", 0.5, True),
    sample("long_query_time", ".5", True),
    sample("long_query_time", "1e2", True),
    sample("long_query_time", "abc", False),
    sample("long_query_time", -1, False),
    sample("long_query_time", "1k", False),
    # enums: any case, unambiguous prefix, number
    sample("binlog_format", "ROW", True),
    sample("binlog_format", "mixed", True),
    sample("binlog_format", "M", True),
    sample("binlog_format", 2, True),
    sample("binlog_format", 9, False),
    sample("binlog_format", "xx", False),
    sample("innodb_flush_method", "O_DIRECT", {"10.11": True, "other": False}),  # deprecated in 11.x
    sample("innodb_flush_method", "O_D", False),
    # sets and flag lists
    sample("sql_mode", "STRICT_TRANS_TABLES,NO_ZERO_DATE", True),
    sample("sql_mode", "STRICT_TRANS_TABLES, NO_ZERO_DATE", False),
    sample("sql_mode", "FOO", False),
    sample("optimizer_switch", "mrr=on,mrr_sort_keys=off", True),
    sample("optimizer_switch", "mrr=maybe", False),
    sample("optimizer_switch", "mr=on", False),
    # strings; names
    sample("init_connect", "SET NAMES utf8mb4", True),
    sample("bootstrap", 1, False),
    sample("innodb_buffer_poll_size", "1G", False),
]

PG_SAMPLES = [
    # booleans: prefixes of on/off, true/false, yes/no; 1/0
    sample("full_page_writes", "of", True),
    sample("full_page_writes", "n", True),
    sample("full_page_writes", "fa", True),
    sample("full_page_writes", "0", True),
    sample("full_page_writes", "TRUE", True),
    sample("full_page_writes", True, True),
    sample("full_page_writes", "o", False),
    sample("full_page_writes", "nope", False),
    sample("full_page_writes", 2, False),
    sample("full_page_writes", "", False),
    # integers with a memory unit (8kB blocks, kB), rounding, ranges
    sample("shared_buffers", "256MB", True),
    sample("shared_buffers", "1.5GB", True),
    sample("shared_buffers", "1 GB", True),
    sample("shared_buffers", 16, True),
    sample("shared_buffers", 15, False),
    sample("shared_buffers", "100kB", False),
    sample("shared_buffers", "12xB", False),
    sample("shared_buffers", "1gb", False),
    sample("work_mem", "64kB", True),
    sample("work_mem", "1e3", True),
    sample("work_mem", "0x100", True),
    sample("work_mem", "63kB", False),
    sample("work_mem", "0x10", False),
    # integers with a time unit
    sample("checkpoint_timeout", "30s", True),
    sample("checkpoint_timeout", "1h", True),
    sample("checkpoint_timeout", "29999ms", True),
    sample("checkpoint_timeout", "29499ms", False),
    sample("checkpoint_timeout", "10s", False),
    sample("checkpoint_timeout", "30 sec", False),
    sample("log_rotation_age", "90s", True),
    # integers without a unit
    sample("max_connections", 500, True),
    sample("max_connections", "100MB", False),
    sample("max_connections", 0, False),
    # reals, with and without a unit
    sample("random_page_cost", 1.1, True),
    sample("random_page_cost", "abc", False),
    sample("random_page_cost", -1, False),
    sample("checkpoint_completion_target", 1.5, False),
    sample("vacuum_cost_delay", "2ms", True),
    sample("vacuum_cost_delay", "500us", True),
    sample("vacuum_cost_delay", "200ms", False),
    # enums: any case, the spellings pg_settings does not list
    sample("wal_level", "logical", True),
    sample("wal_level", "archive", True),
    sample("wal_level", "true", False),
    sample("huge_pages", "yes", True),
    sample("synchronous_commit", "REMOTE_APPLY", True),
    sample("synchronous_commit", "0", True),
    sample("log_statement", "on", False),
    sample("wal_compression", "fa", False),
    # strings; read-only and unknown names
    sample("log_line_prefix", "%m [%p] %u ", True),
    sample("block_size", 16384, False),
    sample("shared_buffer", "1GB", False),
]


def verdict(accepted, version: str) -> bool:
    """A sample's verdict: one for every version, or {version: verdict} where they differ."""
    return accepted.get(version, accepted["other"]) if isinstance(accepted, dict) else accepted


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(("name", "value", "accepted"), MARIADB_SAMPLES)
def test_mariadb_agrees(fleet, release, name, value, accepted):
    servers = Servers(release)
    accepted = verdict(accepted, servers.mariadb_version)
    assert (db_settings.setting_issues("mariadb", name, value, servers.mariadb_version) == []) is accepted
    ok, stderr = mariadbd_accepts(servers, rendered(fleet, "db1", name, value, release))
    assert ok is accepted, stderr


@pytest.mark.parametrize(("name", "value", "accepted"), PG_SAMPLES)
def test_postgresql_agrees(fleet, pg, name, value, accepted):
    servers = pg[0]
    accepted = verdict(accepted, servers.pg_version)
    assert (db_settings.setting_issues("postgresql", name, value, servers.pg_version) == []) is accepted
    result = postgres_reads(pg, rendered(fleet, "pg1", name, value, servers.release), "port")
    assert (result.returncode == 0) is accepted, result.stderr


def test_postgresql_ignores_transaction_settings_in_its_file(fleet, pg):
    # Why the check refuses them although postgres takes the file.
    servers = pg[0]
    result = postgres_reads(
        pg,
        rendered(fleet, "pg1", "transaction_isolation", "serializable", servers.release),
        "transaction_isolation",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "read committed"
    assert db_settings.setting_issues(
        "postgresql", "transaction_isolation", "serializable", servers.pg_version
    )
