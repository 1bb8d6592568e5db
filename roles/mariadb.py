"""The mariadb role: MariaDB from Debian on the datasets the storage role prepared, my.cnf sized for
the host, GTID replication, application databases and users.

Order matters on a bare host: the log directories, the config and the systemd drop-in exist
before `apt-get install mariadb-server`, whose postinst initialises the datadir named in the
config (so the system tables are born on ZFS) and starts the server.

The config is a drop-in, /etc/mysql/mariadb.conf.d/90-dbzfs.cnf: it is read after Debian's
50-server.cnf and wins over it, while Debian's own files (my.cnf is an alternatives symlink,
50-server.cnf a conffile) stay untouched, so package upgrades never prompt or revert it.
"""

from __future__ import annotations

import io
import ipaddress
from pathlib import Path

from pyinfra import host, inventory
from pyinfra.api import HiddenValue, deploy
from pyinfra.operations import apt, files, mysql, systemd

from roles import render, secrets
from roles.hostdata import HostConfig
from roles.operations import mariadb as mariadb_ops
from roles.zfs import host_config, sized_for_this_host

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
CONFIG = "/etc/mysql/mariadb.conf.d/90-dbzfs.cnf"
DROP_IN = "/etc/systemd/system/mariadb.service.d/dbzfs-zfs.conf"
PACKAGES = ["mariadb-server", "mariadb-client"]
SERVICE = "mariadb.service"
PORT = 3306
# Database-level privileges of an application user on its database unless the data says
# otherwise; a database's owner gets all of them on it.
APP_PRIVILEGES = "SELECT,INSERT,UPDATE,DELETE"


def systemd_drop_in(cfg: HostConfig) -> str:
    """Start the server only once the pool is imported and both datasets are mounted."""
    return render.after_zfs_mounts(cfg, "roles/mariadb.py", "the datadir and logs live on ZFS.")


def client_hosts(cfg: HostConfig) -> list[str]:
    """MariaDB host parts for application accounts: its client networks (MariaDB 10.11 takes
    IPv4 'address/netmask', not CIDR prefixes) or, without any, localhost only."""
    hosts = []
    for net in cfg.client_networks:
        network = ipaddress.ip_network(net, strict=False)
        if network.num_addresses == 1:
            hosts.append(str(network.network_address))
        elif network.version == 4:
            hosts.append(f"{network.network_address}/{network.netmask}")
        else:
            raise ValueError(f"{cfg.name}: MariaDB cannot match IPv6 network {net} in an account")
    return hosts or ["localhost"]


def app_grants(cfg: HostConfig, user: dict) -> dict[str, str]:
    """database -> privileges for one db_users entry."""
    owned = [db["name"] for db in cfg.databases if db.get("owner") == user["name"]]
    grants = {db: "ALL" for db in owned}
    if user.get("database"):
        grants[user["database"]] = user.get("privileges") or (
            "ALL" if user["database"] in owned else APP_PRIVILEGES)
    return grants


def cluster_peers(cfg: HostConfig) -> list[HostConfig]:
    peers = [HostConfig.from_data(h.name, h.data) for h in inventory]
    return [p for p in peers if p.engine == "mariadb" and p.cluster == cfg.cluster]


def replicas_of(cfg: HostConfig) -> list[HostConfig]:
    return [p for p in cluster_peers(cfg) if p.role == "replica" and p.primary == cfg.name]


def primary_of(cfg: HostConfig) -> HostConfig:
    return next(p for p in cluster_peers(cfg) if p.name == cfg.primary)


def _secret(loaded, key: str) -> HiddenValue:
    value = loaded.get(key)
    if not value:
        raise secrets.SecretsError(f"{host.name}: secret {key!r} is missing ({loaded.source})")
    return HiddenValue(value)


@deploy("MariaDB directories and config")
def config(cfg: HostConfig, context: dict):
    paths = context["paths"]
    for key in ("redo_dir", "binlog_dir", "relay_dir"):
        files.directory(name=f"{paths[key]} (mysql, 0750)", path=paths[key], user="mysql",
                        group="mysql", mode="0750")
    files.directory(name="/etc/mysql/mariadb.conf.d", path="/etc/mysql/mariadb.conf.d",
                    user="root", group="root", mode="0755")
    files.template(name=CONFIG, src=str(TEMPLATES / "my.cnf.j2"), dest=CONFIG,
                          user="root", group="root", mode="0644", **context)
    files.put(name=f"{DROP_IN}: after the ZFS mounts", src=io.StringIO(systemd_drop_in(cfg)),
              dest=DROP_IN, user="root", group="root", mode="0644", create_remote_dir=True)


@deploy("MariaDB server")
def install():
    apt.packages(name="MariaDB server and client from Debian", packages=PACKAGES, update=True,
                 cache_time=3600, no_recommends=True)
    # Most InnoDB settings are not dynamic: a config written after the server started takes a
    # restart (a fresh install started it with the config already in place).
    mariadb_ops.runs_current_config(name="MariaDB runs its current config", service=SERVICE,
                                    config_paths=[CONFIG])
    systemd.service(name="MariaDB running and enabled", service=SERVICE, running=True,
                    enabled=True)


@deploy("MariaDB accounts and databases")
def accounts(cfg: HostConfig, loaded):
    mariadb_ops.no_insecure_accounts(name="No anonymous or remote root accounts")
    repl_user = render.REPLICATION_USER["mariadb"]
    repl_password = _secret(loaded, secrets.REPLICATION_PASSWORD)
    for replica in replicas_of(cfg):
        mariadb_ops.user(name=f"{repl_user}@{replica.replication_address} for {replica.name}",
                         user=repl_user, user_host=replica.replication_address,
                         password=repl_password)
        mariadb_ops.grants(name=f"Privileges of {repl_user}@{replica.replication_address}",
                           user=repl_user, user_host=replica.replication_address,
                           privileges=mariadb_ops.REPLICATION_PRIVILEGES)
    for db in cfg.databases:
        mysql.database(name=f"Database {db['name']}", database=db["name"], charset="utf8mb4")
    for user in cfg.db_users:
        password = _secret(loaded, user["password_secret"])
        for client in client_hosts(cfg):
            mariadb_ops.user(name=f"User {user['name']}@{client}", user=user["name"],
                             user_host=client, password=password)
            for database, privileges in app_grants(cfg, user).items():
                mariadb_ops.grants(name=f"Privileges of {user['name']}@{client} on {database}",
                                   user=user["name"], user_host=client, privileges=privileges,
                                   database=database)


@deploy("MariaDB replica")
def replica(cfg: HostConfig, loaded):
    primary = primary_of(cfg)
    mariadb_ops.replica(name=f"GTID replica of {primary.name} ({primary.replication_address})",
                        primary_address=primary.replication_address,
                        replication_user=render.REPLICATION_USER["mariadb"],
                        password=_secret(loaded, secrets.REPLICATION_PASSWORD), port=PORT)


@deploy("MariaDB")
def server():
    cfg = host_config()
    context = render.mariadb_context(cfg, sized_for_this_host(cfg))
    loaded = secrets.load()
    config(cfg, context)
    install()
    # Every host of the group passes the primary's account steps, so that pyinfra orders a
    # replica's seeding after them (it orders operations by each host's sequence). They run on
    # the primary only and replicate: a write on a replica would put a local GTID into its
    # binlog and break gtid_strict_mode replication.
    primary = cfg if cfg.role == "primary" else primary_of(cfg)
    accounts(primary, loaded, _if=lambda: cfg.role == "primary")
    if cfg.role == "replica":
        replica(cfg, loaded)
