"""The mariadb role's pure parts: the systemd drop-in, client accounts' host parts, application
grants, and the rendered config path Debian reads last."""

import pytest

from model.hostdata import HostConfig
from roles import mariadb, render

from tests.unit.conftest import host_data


def db1(**overrides):
    data = host_data(
        engine="mariadb",
        role="primary",
        server_id=1,
        hardware={"ram_bytes": 4 * 1024**3, "cpus": 2},
        replication_address="10.99.0.11",
    )
    data.update(overrides)
    return HostConfig.from_data("db1", data)


def test_drop_in_orders_the_server_after_the_zfs_mounts():
    text = mariadb.systemd_drop_in(db1())
    assert "[Unit]\n" in text
    assert "After=zfs-mount.service\n" in text and "Requires=zfs-mount.service\n" in text
    assert "RequiresMountsFor=/datastore/mysql /datastore/mysql-log\n" in text


def test_config_drop_in_sorts_after_debians_server_config():
    name = mariadb.CONFIG.rsplit("/", 1)[-1]
    assert mariadb.CONFIG.startswith("/etc/mysql/mariadb.conf.d/")
    assert name > "50-server.cnf" and name.endswith(".cnf")


def test_log_directories_are_on_the_log_dataset():
    paths = render.mariadb_paths(db1())
    for key in ("redo_dir", "binlog_dir", "relay_dir"):
        assert paths[key].startswith("/datastore/mysql-log/")
    assert paths["datadir"] == "/datastore/mysql"


def test_client_hosts_default_to_localhost():
    assert mariadb.client_hosts(db1()) == ["localhost"]


def test_client_networks_become_netmask_host_parts():
    cfg = db1(db_client_networks=["10.20.0.0/16", "192.0.2.7/32", "198.51.100.0/24"])
    assert mariadb.client_hosts(cfg) == ["10.20.0.0/255.255.0.0", "192.0.2.7", "198.51.100.0/255.255.255.0"]


def test_ipv6_client_network_is_refused():
    with pytest.raises(ValueError, match="IPv6"):
        mariadb.client_hosts(db1(db_client_networks=["2001:db8::/64"]))


def test_app_user_gets_dml_on_its_database_by_default():
    cfg = db1(databases=[{"name": "boulder"}])
    user = {"name": "boulder", "password_secret": "x", "database": "boulder"}
    assert mariadb.app_grants(cfg, user) == {"boulder": "SELECT,INSERT,UPDATE,DELETE"}


def test_app_user_privileges_from_data():
    cfg = db1(databases=[{"name": "boulder"}])
    user = {"name": "ro", "password_secret": "x", "database": "boulder", "privileges": "SELECT"}
    assert mariadb.app_grants(cfg, user) == {"boulder": "SELECT"}


def test_owner_gets_all_on_owned_databases():
    cfg = db1(databases=[{"name": "app", "owner": "app"}, {"name": "other"}])
    assert mariadb.app_grants(cfg, {"name": "app", "password_secret": "x"}) == {"app": "ALL"}


def test_user_without_a_database_gets_nothing():
    assert mariadb.app_grants(db1(), {"name": "monitor", "password_secret": "x"}) == {}
