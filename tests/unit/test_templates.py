"""Rendered configs are checked by the real servers: every host of the example fleets is parsed by
mariadbd / postgres, and a lab-sized host's files start a throwaway server whose live variables are
compared with the sized values. Needs mariadb-server and postgresql-15 (scripts/bootstrap)."""

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from engines import db_settings_generate
from model import releases
from model.hostdata import HostConfig
from roles.render import render_host
from validation import load_inventory

from tests.unit.real_servers import MARIADBD, PG_BIN, Servers, mariadbd_values, postgres_scratch, require

INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
LOCAL_RELEASE = db_settings_generate.machine_release()  # the servers installed on this machine
PROD = load_inventory("inventories/prod.py")


def configs(hosts: dict) -> dict:
    cfgs = {name: HostConfig.from_data(name, data) for name, data in hosts.items()}
    out = {}
    for name, cfg in cfgs.items():
        peers = [c for c in cfgs.values() if c.cluster == cfg.cluster]
        out[name] = (cfg, cfg.sizing(), render_host(cfg, cfg.sizing(), peers))
    return out


def as_postgres(*args, **kw):
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", *args],
        capture_output=True,
        text=True,
        timeout=kw.pop("timeout", 120),
        **kw,
    )


# --- parse checks for every example host ---------------------------------------------------------

MARIADB_HOSTS = [n for n, d in PROD.items() if d["engine"] == "mariadb"]
PG_HOSTS = [n for n, d in PROD.items() if d["engine"] == "postgresql"]


RELEASES = sorted(releases.RELEASES)


def released(hosts: dict, release: str) -> dict:
    """The example fleet on another Debian release (debian_release)."""
    return {name: {**data, "debian_release": release} for name, data in hosts.items()}


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name", MARIADB_HOSTS)
def test_my_cnf_parsed_by_mariadbd(name, release):
    # by the release's own server: this machine's (Debian 12) or under chroot (Debian 13)
    cfg, sized, files = configs(released(PROD, release))[name]
    v = mariadbd_values(files["my.cnf.j2"] + files["mariadb-role.cnf.j2"], servers=Servers(release))
    assert v["innodb_doublewrite"] in ("FALSE", "OFF")  # 11.8: an enum
    assert v["innodb_use_native_aio"] == "FALSE"
    assert v["innodb_use_atomic_writes"] == "FALSE"
    assert v["innodb_flush_neighbors"] == "0"
    # through the page cache, no O_DSYNC: 10.11 says it with innodb_flush_method, 11.8 with two settings
    if cfg.server_version == "10.11":
        assert v["innodb_flush_method"] == "fsync"
        assert v["innodb_file_per_table"] == "TRUE"
    else:
        assert v["innodb_data_file_buffering"] == "TRUE"
        assert v["innodb_data_file_write_through"] == "FALSE"
        assert v["slave_connections_needed_for_purge"] == "0"
    assert int(v["innodb_log_write_ahead_size"]) == sized.database["innodb_log_write_ahead_size"]
    assert int(v["innodb_buffer_pool_size"]) == sized.database["innodb_buffer_pool_size"]
    assert int(v["innodb_log_file_size"]) == sized.database["innodb_log_file_size"]
    assert v["innodb_io_capacity"] == "1000" and v["innodb_io_capacity_max"] == "2500"
    assert v["server_id"] == str(cfg.server_id)
    assert v["datadir"] == "/datastore/mysql/"
    assert v["log_bin"] == "/datastore/mysql-log/binlog/mysql-bin"
    assert v["gtid_strict_mode"] == "TRUE"
    assert v["read_only"] == ("TRUE" if cfg.role == "replica" else "FALSE")


def pg_checked(conf_text: str, hba_text: str, params: list[str], servers: Servers) -> dict:
    tmp = servers.scratch("dbzfs-test-", owner="postgres")
    inside = servers.inside(tmp)
    try:
        conf_text = conf_text.replace(f"/etc/postgresql/{servers.pg_version}/main", inside)
        for file, text in (("postgresql.conf", conf_text), ("pg_hba.conf", hba_text), ("pg_ident.conf", "")):
            (tmp / file).write_text(text)
            servers.own(tmp / file, "postgres")
        values = {}
        postgres = servers.require(f"{servers.pg_bin}/postgres")
        for param in params:
            result = servers.run(
                [postgres, f"--config-file={inside}/postgresql.conf", "-C", param], user="postgres"
            )
            assert result.returncode == 0, result.stderr
            values[param] = result.stdout.strip()
        return values
    finally:
        shutil.rmtree(tmp)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name", PG_HOSTS)
def test_postgresql_conf_parsed_by_postgres(name, release):
    cfg, sized, files = configs(released(PROD, release))[name]
    servers = Servers(release)
    v = pg_checked(
        files["postgresql.conf.j2"],
        files["pg_hba.conf.j2"],
        [
            "full_page_writes",
            "wal_init_zero",
            "wal_recycle",
            "shared_buffers",
            "effective_cache_size",
            "work_mem",
            "max_connections",
            "wal_level",
            "hot_standby",
            "data_directory",
        ],
        servers,
    )
    assert v["full_page_writes"] == "off"
    assert v["wal_init_zero"] == "off" and v["wal_recycle"] == "off"
    # -C prints memory in the parameter's unit: 8kB pages for shared_buffers, kB for work_mem
    assert int(v["shared_buffers"]) * 8192 == sized.database["shared_buffers"]
    assert int(v["work_mem"]) * 1024 == sized.database["work_mem"]
    assert int(v["effective_cache_size"]) * 8192 == sized.database["effective_cache_size"]
    assert v["max_connections"] == "40"  # analytics workload
    assert v["wal_level"] == "replica" and v["hot_standby"] == "on"
    assert v["data_directory"] == f"/datastore/postgresql/{servers.pg_version}/main"


def test_pg_hba_allows_only_named_replicas():
    _, _, files = configs(PROD)["pg01"]
    rules = [
        line.split() for line in files["pg_hba.conf.j2"].splitlines() if line and not line.startswith("#")
    ]
    replication = [r for r in rules if r[1] == "replication"]
    assert replication == [
        ["host", "replication", "replicator", "10.30.0.12/32", "scram-sha-256"],
        ["host", "replication", "replicator", "10.30.0.13/32", "scram-sha-256"],
    ]
    assert all(r[-1] in ("peer", "scram-sha-256") for r in rules)
    assert not any("trust" in r or "md5" in r for r in rules)


def test_full_page_writes_stays_on_below_8k_records(fleet):
    fleet["pg1"]["zfs_dataset_properties"] = {"datastore/postgresql": {"recordsize": "4k"}}
    _, _, files = configs(fleet)["pg1"]
    assert "full_page_writes = on" in files["postgresql.conf.j2"]


def test_zfs_modprobe_conf(fleet):
    fleet["db1"]["zfs_module_params"] = {"zfs_txg_timeout": 10}
    for cfg, sized, files in configs(fleet).values():
        lines = [line for line in files["zfs.conf.j2"].splitlines() if line and not line.startswith("#")]
        assert all(re.fullmatch(r"options zfs [a-z_]+=\d+", line) for line in lines), lines
        params = dict(line.split()[2].split("=") for line in lines)
        assert int(params["zfs_arc_max"]) == sized.zfs["zfs_arc_max"]
        assert ("zfs_prefetch_disable" in params) == (cfg.engine == "mariadb")
    assert "options zfs zfs_txg_timeout=10" in configs(fleet)["db1"][2]["zfs.conf.j2"]


def _zed_settings(text: str) -> dict[str, str]:
    """zed.rc as ZED's zedlets see it: sourced by a shell."""
    out = subprocess.run(
        ["bash", "-c", "set -a; source /dev/stdin; env -0"],
        input=text.encode(),
        capture_output=True,
        check=True,
    ).stdout.decode()
    return dict(kv.split("=", 1) for kv in out.split("\0") if kv.startswith("ZED_"))


def test_zed_rc_mails_only_when_an_address_is_given(fleet):
    fleet["db1"]["zed_email"] = "dba-pager@example.com"
    out = configs(fleet)
    with_mail = _zed_settings(out["db1"][2]["zed.rc.j2"])
    assert with_mail["ZED_EMAIL_ADDR"] == "dba-pager@example.com"
    assert with_mail["ZED_EMAIL_OPTS"] == "-s '@SUBJECT@' @ADDRESS@"
    assert with_mail["ZED_NOTIFY_VERBOSE"] == "1"
    # Debian's zed.rc mails root; without an address ZED must not try (it logs "mail not installed").
    without = _zed_settings(out["pg1"][2]["zed.rc.j2"])
    assert "ZED_EMAIL_ADDR" not in without and without["ZED_SYSLOG_TAG"] == "zed"


def test_db_settings_override_without_duplicates(fleet):
    fleet["db1"]["db_settings"] = {"innodb_io_capacity": 2000, "slow_query_log": "ON"}
    fleet["pg1"]["db_settings"] = {"work_mem": "8MB", "log_min_duration_statement": 500}
    out = configs(fleet)
    my = out["db1"][2]["my.cnf.j2"]
    assert len(re.findall(r"^innodb_io_capacity\s*=", my, re.M)) == 1
    assert re.search(r"^innodb_io_capacity\s*= 2000$", my, re.M)
    assert re.search(r"^slow_query_log\s*= ON$", my, re.M)
    pg = out["pg1"][2]["postgresql.conf.j2"]
    assert pg.count("\nwork_mem = ") == 1 and "work_mem = '8MB'" in pg
    assert "log_min_duration_statement = 500" in pg


# --- throwaway servers on a lab-sized host ------------------------------------------------------


def lab_sized(fleet, name, tmp: Path) -> tuple:
    """The fleet's host with its datasets mounted under tmp instead of /datastore, on this machine's
    release (Debian 12: the servers started here; Debian 13's parse the configs above)."""
    for host_data in fleet.values():
        host_data["debian_release"] = LOCAL_RELEASE
    data = fleet[name]
    engine = data["engine"]
    data["zfs_dataset_properties"] = {
        ds: {"mountpoint": str(tmp) + props["mountpoint"]}
        for ds, props in data["zfs_datasets"][engine].items()
    }
    return configs(fleet)[name]


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.mark.parametrize("name", ["db1", "db2"])
def test_my_cnf_runs_a_real_mariadb(fleet, name):
    tmp = Path(tempfile.mkdtemp(prefix="dbzfs-mariadb-"))
    server = None
    try:
        cfg, sized, files = lab_sized(fleet, name, tmp)
        from roles.render import mariadb_paths

        paths = mariadb_paths(cfg)
        for key in ("datadir", "redo_dir", "binlog_dir", "relay_dir"):
            Path(paths[key]).mkdir(parents=True)
        cnf = tmp / "my.cnf"
        cnf.write_text(files["my.cnf.j2"] + files["mariadb-role.cnf.j2"])
        sock = tmp / "mysqld.sock"
        common = [f"--defaults-file={cnf}", "--user=root"]
        result = subprocess.run(
            [require(INSTALL_DB), *common, "--skip-test-db", "--auth-root-authentication-method=socket"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        server = subprocess.Popen(
            [
                require(MARIADBD),
                *common,
                "--skip-networking",
                f"--socket={sock}",
                f"--pid-file={tmp}/mysqld.pid",
                f"--log-error={tmp}/error.log",
            ]
        )
        wait_for(sock.exists, 120, f"mariadbd socket (log: {tmp}/error.log)")
        query = subprocess.run(
            [
                "mariadb",
                "--no-defaults",
                f"--socket={sock}",
                "-uroot",
                "-N",
                "-B",
                "-e",
                "SHOW GLOBAL VARIABLES",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert query.returncode == 0, query.stderr
        v = dict(line.split("\t", 1) for line in query.stdout.splitlines() if "\t" in line)
        assert v["innodb_doublewrite"] == "OFF"
        assert v["innodb_use_native_aio"] == "OFF"
        assert v["innodb_flush_neighbors"] == "0"
        assert v["innodb_flush_method"] == "fsync"
        assert v["innodb_log_write_ahead_size"] == "4096"
        assert int(v["innodb_buffer_pool_size"]) == sized.database["innodb_buffer_pool_size"]
        assert int(v["innodb_io_capacity"]) == sized.database["innodb_io_capacity"]
        assert v["innodb_log_group_home_dir"] == paths["redo_dir"]
        assert v["log_bin"] == "ON" and v["gtid_strict_mode"] == "ON"
        assert v["server_id"] == str(cfg.server_id)
        assert v["read_only"] == ("ON" if cfg.role == "replica" else "OFF")
        assert any(p.name.startswith("mysql-bin.") for p in Path(paths["binlog_dir"]).iterdir())
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("name", ["pg1", "pg2"])
def test_postgresql_conf_runs_a_real_postgres(fleet, name):
    tmp = postgres_scratch("dbzfs-test-")
    started = False
    try:
        cfg, sized, files = lab_sized(fleet, name, tmp)
        from roles.render import postgresql_paths

        paths = postgresql_paths(cfg)
        etc, run = tmp / "etc", tmp / "run"
        for d in (etc, run, Path(paths["data_directory"]).parent, Path(paths["wal_directory"]).parent):
            d.mkdir(parents=True, exist_ok=True)
            shutil.chown(d, "postgres", "postgres")
        conf = files["postgresql.conf.j2"].replace(f"/etc/postgresql/{cfg.server_version}/main", str(etc))
        conf = conf.replace("/var/run/postgresql", str(run))
        (etc / "postgresql.conf").write_text(conf)
        (etc / "pg_hba.conf").write_text(files["pg_hba.conf.j2"])
        (etc / "pg_ident.conf").write_text("")
        init = as_postgres(
            require(PG_BIN / "initdb"),
            "-D",
            paths["data_directory"],
            f"--waldir={paths['wal_directory']}",
            "--auth-local=peer",
            "--auth-host=scram-sha-256",
            "-U",
            "postgres",
            timeout=300,
        )
        assert init.returncode == 0, init.stderr
        # The lab address does not exist on this machine: listen on the socket only.
        start = as_postgres(
            require(PG_BIN / "pg_ctl"),
            "-D",
            paths["data_directory"],
            "-w",
            "-t",
            "120",
            "-l",
            f"{tmp}/server.log",
            "-o",
            f"-c config_file={etc}/postgresql.conf -c listen_addresses=''",
            "start",
        )
        assert start.returncode == 0, start.stdout + start.stderr + (tmp / "server.log").read_text()
        started = True

        def show(sql):
            r = as_postgres("psql", "-h", str(run), "-U", "postgres", "-AtXc", sql)
            assert r.returncode == 0, r.stderr
            return r.stdout.strip()

        assert show("SHOW full_page_writes") == "off"
        assert show("SHOW wal_init_zero") == "off"
        assert show("SHOW wal_recycle") == "off"
        assert show("SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers'") == str(
            sized.database["shared_buffers"]
        )
        assert show("SELECT setting::bigint * 1024 FROM pg_settings WHERE name = 'work_mem'") == str(
            sized.database["work_mem"]
        )
        assert show("SHOW data_directory") == paths["data_directory"]
        assert show("SHOW wal_level") == "replica"
        assert show("SELECT count(*) FROM pg_hba_file_rules WHERE error IS NOT NULL") == "0"
        assert show("SELECT count(*) FROM pg_settings WHERE pending_restart") == "0"
        assert os.readlink(Path(paths["data_directory"]) / "pg_wal") == paths["wal_directory"]
    finally:
        if started:
            as_postgres(
                str(PG_BIN / "pg_ctl"), "-D", paths["data_directory"], "-m", "immediate", "-w", "stop"
            )
        shutil.rmtree(tmp, ignore_errors=True)
