"""The mariadb role's result on a live server: what the server itself reports (SHOW GLOBAL
VARIABLES, SHOW SLAVE STATUS, its accounts), not what the files say."""

import os

import pytest

from facts.hardware import HostHardware
from facts.mariadb import MariadbGrants, MariadbReplicaStatus, MariadbUsers, MariadbVariables
from model.hostdata import HostConfig
from operations.mariadb import REPLICATION_PRIVILEGES, SECRET_DIR, normalise_privileges
from roles import render
from roles.mariadb import CONFIG, DROP_IN, app_grants, client_hosts
from validation import load_inventory_isolated

from tests.infra.probe import fact

engine = "mariadb"  # tests/infra/conftest.py: only hosts with this engine are checked

MAX_LAG_SECONDS = 30


@pytest.fixture(scope="module")
def variables(host):
    values = fact(host, MariadbVariables)
    assert values, "the server does not answer `mariadb` as root through its socket"
    return values


@pytest.fixture(scope="module")
def sized(host, cfg):
    hw = fact(host, HostHardware)
    return cfg.sizing(ram_bytes=hw["ram_bytes"], cpus=hw["cpus"])


@pytest.fixture(scope="module")
def peers(cfg, request):
    hosts = load_inventory_isolated(request.config.getoption("--inventory"))
    return [
        HostConfig.from_data(n, d)
        for n, d in hosts.items()
        if d.get("engine") == "mariadb" and HostConfig.from_data(n, d).cluster == cfg.cluster
    ]


def sql(host, statement):
    return host.check_output(f"mariadb -NBe {statement!r}")


def mounted_dataset(host, path):
    return host.check_output(f"findmnt -n -o SOURCE,FSTYPE --target {path}").split()


def test_server_running_and_enabled(host):
    service = host.service("mariadb")
    assert service.is_running and service.is_enabled


def test_innodb_tuned_for_zfs(cfg, variables):
    assert variables["innodb_doublewrite"] == "OFF"
    assert variables["innodb_use_native_aio"] == "OFF"
    assert variables["innodb_use_atomic_writes"] == "OFF"
    assert variables["innodb_flush_neighbors"] == "0"
    assert variables["innodb_file_per_table"] == "ON"
    # Data files through the page cache, no O_DSYNC (roles/render.py MARIADB_FILE_IO)
    if cfg.server_version == "10.11":
        assert variables["innodb_flush_method"] == "fsync"
    else:
        # 11.x: the two settings that replace innodb_flush_method, which then reports its
        # compiled default (O_DIRECT) whatever they say (seen on 11.8.9)
        assert variables["innodb_data_file_buffering"] == "ON"
        assert variables["innodb_data_file_write_through"] == "OFF"
        assert variables["slave_connections_needed_for_purge"] == "0"


def test_sized_for_the_live_hardware(variables, sized):
    want = sized.database
    for key in (
        "innodb_buffer_pool_size",
        "innodb_log_file_size",
        "innodb_io_capacity",
        "innodb_io_capacity_max",
        "innodb_log_write_ahead_size",
        "max_connections",
    ):
        assert int(variables[key]) == want[key], key


def test_datadir_on_its_dataset(host, cfg, variables):
    paths = render.mariadb_paths(cfg)
    assert variables["datadir"].rstrip("/") == paths["datadir"]
    assert mounted_dataset(host, paths["datadir"]) == [cfg.dataset_name(cfg.data_dataset), "zfs"]
    # The system tables were born there, not in Debian's default datadir.
    assert host.file(f"{paths['datadir']}/mysql/global_priv.MAI").exists
    system_tables = mounted_dataset(host, f"{paths['datadir']}/mysql")
    assert system_tables[0] == cfg.dataset_name(cfg.data_dataset)
    leftovers = (
        [
            f
            for f in host.file("/var/lib/mysql").listdir()
            if not (f.startswith("debian-") and f.endswith(".flag"))
        ]
        if host.file("/var/lib/mysql").exists
        else []
    )
    assert leftovers == [], f"/var/lib/mysql is in use: {leftovers}"


def test_logs_on_the_log_dataset(host, cfg, variables):
    paths = render.mariadb_paths(cfg)
    log_dataset = [cfg.dataset_name(cfg.log_dataset), "zfs"]
    assert variables["innodb_log_group_home_dir"].rstrip("/") == paths["redo_dir"]
    assert variables["log_bin_basename"] == paths["log_bin"]
    assert variables["relay_log_basename"] == paths["relay_log"]
    for key in ("redo_dir", "binlog_dir", "relay_dir"):
        assert mounted_dataset(host, paths[key]) == log_dataset, key
        d = host.file(paths[key])
        assert (d.user, d.group, d.mode) == ("mysql", "mysql", 0o750), key
    assert host.file(f"{paths['redo_dir']}/ib_logfile0").exists


def test_starts_only_after_zfs_mounts(host, cfg):
    assert host.file(DROP_IN).exists
    shown = host.check_output("systemctl show mariadb.service -p After -p Requires -p RequiresMountsFor")
    props = dict(line.split("=", 1) for line in shown.splitlines())
    assert "zfs-mount.service" in props["After"].split()
    assert "zfs-mount.service" in props["Requires"].split()
    for ds in (cfg.data_dataset, cfg.log_dataset):
        assert cfg.mountpoint(ds) in props["RequiresMountsFor"].split()


def test_config_file(host):
    conf = host.file(CONFIG)
    assert (conf.user, conf.group, conf.mode) == ("root", "root", 0o644)
    assert "Managed by dbzfs" in conf.content_string


def test_gtid_binlog_settings(cfg, variables):
    assert variables["server_id"] == str(cfg.server_id)
    assert variables["log_bin"] == "ON"
    assert variables["binlog_format"] == "ROW"
    assert variables["gtid_strict_mode"] == "ON"
    assert variables["log_slave_updates"] == "ON"
    assert variables["sync_binlog"] == "1"
    assert variables["innodb_flush_log_at_trx_commit"] == "1"


def test_read_only_on_replicas_only(cfg, variables):
    assert variables["read_only"] == ("ON" if cfg.role == "replica" else "OFF")


def test_replication(host, cfg, peers):
    status = fact(host, MariadbReplicaStatus)
    if cfg.role == "primary":
        assert status == {}, "a primary replicates from nobody"
        return
    primary = next(p for p in peers if p.name == cfg.primary)
    assert status["Master_Host"] == primary.replication_address
    assert status["Master_User"] == render.REPLICATION_USER["mariadb"]
    assert status["Slave_IO_Running"] == "Yes", status.get("Last_IO_Error")
    assert status["Slave_SQL_Running"] == "Yes", status.get("Last_SQL_Error")
    assert status["Using_Gtid"] == "Slave_Pos"
    assert status["Seconds_Behind_Master"] not in ("", "NULL")
    assert int(status["Seconds_Behind_Master"]) <= MAX_LAG_SECONDS


def test_no_anonymous_or_remote_root(host):
    users = fact(host, MariadbUsers)
    assert users, "no accounts read"
    assert [u for u in users if u[0] == ""] == []
    assert [h for (u, h) in users if u == "root"] == ["localhost"]


def test_root_authenticates_through_the_unix_socket_only(host):
    created = sql(host, "SHOW CREATE USER root@localhost")
    assert "unix_socket" in created
    # Debian: IDENTIFIED VIA mysql_native_password USING 'invalid' OR unix_socket
    assert "mysql_native_password" not in created or "USING 'invalid'" in created, created


def test_replication_accounts(host, cfg, peers):
    """One account per member of the group (any member may replicate from any other after a
    switchover, and the fence check asks peers with it), each from that member's address only,
    with what replicating and seeding need. Accounts replicate, so every member has them all.
    A primary alone in its group has none (roles/mariadb.py: no replication secret is needed)."""
    users = fact(host, MariadbUsers)
    name = render.REPLICATION_USER["mariadb"]
    members = [p for p in peers if p.replication_address]
    members = members if len(members) > 1 else []
    assert sorted(h for (u, h) in users if u == name) == sorted(p.replication_address for p in members)
    for p in members:
        grants = fact(host, MariadbGrants, user=name, user_host=p.replication_address)
        assert grants == {"*": set(REPLICATION_PRIVILEGES)}


def test_application_accounts(host, cfg, peers):
    primary = cfg if cfg.role == "primary" else next(p for p in peers if p.name == cfg.primary)
    schemas = sql(host, "SHOW DATABASES").split()
    for db in primary.databases:
        assert db["name"] in schemas
    users = fact(host, MariadbUsers)
    for user in primary.db_users:
        for client in client_hosts(primary):
            assert (user["name"], client) in users
            assert users[(user["name"], client)]["credential"] not in ("empty", "invalid")
            grants = fact(host, MariadbGrants, user=user["name"], user_host=client)
            want = {db: set(normalise_privileges(p)) for db, p in app_grants(primary, user).items()}
            assert grants == want, (user["name"], client)


def test_no_secrets_left_behind(host, variables):
    secrets_dir = host.file(SECRET_DIR)
    if secrets_dir.exists:
        assert secrets_dir.mode == 0o700 and secrets_dir.listdir() == []
    datadir = host.file(variables["datadir"])
    assert datadir.mode & 0o007 == 0  # master.info (replication password) stays with mysql
    master_info = host.file(os.path.join(variables["datadir"], "master.info"))
    if master_info.exists:
        assert master_info.mode & 0o007 == 0
