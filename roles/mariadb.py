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

import ipaddress

from pyinfra.api import deploy
from pyinfra.operations import files, mysql

import engines
from model import secrets
from model.hostdata import HostConfig
from operations import mariadb as mariadb_ops, units
from roles import binlogs, engine, fencing, monitoring, render, snapshots

CONFIG = "/etc/mysql/mariadb.conf.d/90-dbzfs.cnf"
# What follows the role (read_only), apart: a switchover rewrites it and applies it live, and the
# server keeps running (a changed CONFIG takes a restart; this file never does).
ROLE_CONFIG = render.MARIADB_ROLE_CONFIG
DROP_IN = "/etc/systemd/system/mariadb.service.d/dbzfs-zfs.conf"
PACKAGES = list(engines.MARIADB.packages)
SERVICE = engines.MARIADB.service
SERVER_BINARY = engines.MARIADB.server_binary
# The host's own server reads the candidate file; an unknown option or a refused value fails.
CONFIG_CHECK = SERVER_BINARY + " --defaults-file={path} --verbose --help"
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
            "ALL" if user["database"] in owned else APP_PRIVILEGES
        )
    return grants


def role_config(cfg: HostConfig) -> None:
    """The role's file (read_only), for `cfg`'s role: the converge and the switchover runbook."""
    engine.config_file(
        "mariadb-role.cnf.j2",
        render.mariadb_role_context(cfg),
        ROLE_CONFIG,
        check=CONFIG_CHECK,
        checker=SERVER_BINARY,
        name=f"{ROLE_CONFIG}: {cfg.role}",
    )


@deploy("MariaDB directories and config")
def config(cfg: HostConfig, group: engine.Group, context: dict) -> None:
    paths = context["paths"]
    for key in ("redo_dir", "binlog_dir", "relay_dir"):
        files.directory(
            name=f"{paths[key]} (mysql, 0750)", path=paths[key], user="mysql", group="mysql", mode="0750"
        )
    engine.config_file("my.cnf.j2", context, CONFIG, check=CONFIG_CHECK, checker=SERVER_BINARY)
    role_config(cfg)
    engine.text_file(systemd_drop_in(cfg), DROP_IN, name=f"{DROP_IN}: after the ZFS mounts")
    fencing.place(cfg, group, SERVICE)


@deploy("MariaDB software")
def software() -> None:
    """The monitoring packages, before the pool exists (deploy.py); the server's install waits for
    its datasets and config (its postinst initialises the datadir)."""
    cfg = engine.host_config()
    monitoring.before_install(cfg)
    snapshots.before_install()
    engine.packages("Monitoring and sanoid from Debian", [*monitoring.packages(cfg), snapshots.PACKAGE])


@deploy("MariaDB server")
def install(cfg: HostConfig) -> None:
    engine.packages("MariaDB server and client from Debian", PACKAGES)
    # Most InnoDB settings are not dynamic: a config written after the server started takes a
    # restart (a fresh install started it with the config already in place).
    units.current(name="MariaDB running its current config, enabled", units={SERVICE: [CONFIG]})
    mariadb_ops.read_only(name=f"read_only as a {cfg.role} (live)", on=cfg.role == "replica")


@deploy("MariaDB accounts and databases")
def accounts(cfg: HostConfig, group: engine.Group) -> None:
    """On the primary only: they replicate. A write on a replica would put a local GTID into its
    binlog and break gtid_strict_mode replication."""
    mariadb_ops.no_insecure_accounts(name="No anonymous or remote root accounts")
    # The replication account for every member, the primary's own address included: any member
    # may replicate from any other after a switchover, and the fence check asks peers with it.
    repl_user = render.REPLICATION_USER["mariadb"]
    members = [m for m in group.members if m.replication_address]
    repl_password = engine.secret(secrets.REPLICATION_PASSWORD) if len(members) > 1 else None
    for member in members if repl_password else []:
        mariadb_ops.user(
            name=f"{repl_user}@{member.replication_address} for {member.name}",
            user=repl_user,
            user_host=member.replication_address,
            password=repl_password,
        )
        mariadb_ops.grants(
            name=f"Privileges of {repl_user}@{member.replication_address}",
            user=repl_user,
            user_host=member.replication_address,
            privileges=mariadb_ops.REPLICATION_PRIVILEGES,
        )
    mariadb_ops.only_from(
        name=f"No {repl_user} account for a host outside the group",
        user=repl_user,
        user_hosts=[m.replication_address for m in members] if repl_password else [],
    )
    binlogs.accounts(cfg)
    for db in cfg.databases:
        mysql.database(name=f"Database {db['name']}", database=db["name"], charset="utf8mb4")
    for user in cfg.db_users:
        password = engine.secret(user["password_secret"])
        for client in client_hosts(cfg):
            mariadb_ops.user(
                name=f"User {user['name']}@{client}", user=user["name"], user_host=client, password=password
            )
            for database, privileges in app_grants(cfg, user).items():
                mariadb_ops.grants(
                    name=f"Privileges of {user['name']}@{client} on {database}",
                    user=user["name"],
                    user_host=client,
                    privileges=privileges,
                    database=database,
                )


@deploy("MariaDB replica")
def replica(cfg: HostConfig, group: engine.Group) -> None:
    # A step every host of the group passes (engine.step): a replica is seeded only after the
    # primary's accounts exist.
    is_replica = cfg.role == "replica"
    source = group.source() if is_replica else None
    engine.step(
        is_replica,
        "not a replica",
        mariadb_ops.replica,
        name=(f"GTID replica of {source.name} ({source.replication_address})" if source else "GTID replica"),
        primary_address=source.replication_address if source else None,
        replication_user=render.REPLICATION_USER["mariadb"],
        password=engine.secret(secrets.REPLICATION_PASSWORD) if is_replica else None,
        port=render.MARIADB_PORT,
    )


@deploy("MariaDB")
def server() -> None:
    cfg = engine.host_config()
    group = engine.group(cfg)
    context = render.mariadb_context(cfg, engine.sized_for_this_host(cfg))
    config(cfg, group, context)
    install(cfg)
    if cfg.role == "primary":
        accounts(cfg, group)
        monitoring.account(cfg)
    replica(cfg, group)
    monitoring.running(cfg)
