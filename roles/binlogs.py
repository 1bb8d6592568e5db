"""MariaDB's binlogs streamed to the backup host: point-in-time recovery for MariaDB (issue 14,
part 3; PostgreSQL's is roles/pgbackrest.py).

With a backup host in the inventory, it streams each MariaDB replication group's binlogs from the
group's declared primary (host_scripts/binlog_stream.py: `mariadb-binlog --read-from-remote-server
--raw --stop-never`), as a replica would, into <its pool>/binlogs mounted at
/var/lib/dbzfs-binlogs/<cluster>/<host>/, one unit per group (dbzfs-binlog@<cluster>.service,
restarted by systemd when it ends). Pulled, like the snapshots: the primary lets the account
dbzfs_binlog in from the backup hosts' addresses with REPLICATION SLAVE and BINLOG MONITOR only
(the replication password); a database host holds nothing that reaches the backup host.
A restore replays them over a copy: `mariadb-binlog --start-position=<the copy's dbzfs:gtid>
--stop-datetime=<time> FILES | mariadb` (runbooks/restore.py, day2/restore_mariadb.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pyinfra.api import HiddenValue, deploy

from model import secrets
from model.hostdata import HostConfig
from operations import common, mariadb as mariadb_ops, units, zfs as zfs_ops
from operations.mariadb import option_value
from roles import backup_fleet, engine, render

ACCOUNT = "dbzfs_binlog"
PRIVILEGES = frozenset({"REPLICATION SLAVE", "BINLOG MONITOR"})
DATASET = "binlogs"
DIRECTORY = "/var/lib/dbzfs-binlogs"
DATASET_PROPERTIES = {"mountpoint": DIRECTORY, "recordsize": "1M", "compression": "zstd", "atime": "off"}
ETC = "/etc/dbzfs/binlogs"
CLIENT = f"{ETC}/client.cnf"  # [client] user and password, root's, 0600
SCRIPT_SOURCE = Path(__file__).resolve().parent.parent / "host_scripts" / "binlog_stream.py"
SCRIPT = "/usr/local/lib/dbzfs/binlog_stream.py"
UNIT = "dbzfs-binlog@.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
METRICS_DIR = "/var/lib/prometheus/node-exporter"
PACKAGE = "mariadb-client"  # mariadb-binlog
SERVER_ID_BASE = 4_000_000  # the stream's replica server_id: + the backup host's index


def mariadb_hosts(hosts: Sequence[HostConfig]) -> list[HostConfig]:
    return [h for h in backup_fleet.database_hosts(hosts) if h.engine == "mariadb"]


def enabled(hosts: Sequence[HostConfig]) -> bool:
    return bool(backup_fleet.backup_hosts(hosts)) and bool(mariadb_hosts(hosts))


def sources(hosts: Sequence[HostConfig]) -> dict[str, HostConfig]:
    """cluster -> the group's declared primary, the host its binlogs are streamed from."""
    return {h.cluster: h for h in mariadb_hosts(hosts) if h.role == "primary"}


def unit_name(cluster: str) -> str:
    return f"dbzfs-binlog@{cluster}.service"


def config_path(cluster: str) -> str:
    return f"{ETC}/{cluster}.json"


def server_id(cfg: HostConfig, hosts: Sequence[HostConfig]) -> int:
    names = [b.name for b in backup_fleet.backup_hosts(hosts)]
    return SERVER_ID_BASE + names.index(cfg.name)


def config_text(cfg: HostConfig, hosts: Sequence[HostConfig], cluster: str, source: HostConfig) -> str:
    config = {
        "cluster": cluster,
        "host": source.name,
        "address": str(source.replication_address),
        "port": render.MARIADB_PORT,
        "directory": f"{DIRECTORY}/{cluster}/{source.name}",
        "defaults_file": CLIENT,
        "server_id": server_id(cfg, hosts),
        "metrics": f"{METRICS_DIR}/dbzfs_binlog_{cluster}.prom",
        # binlogs older than the group's oldest copy replay onto nothing: pruned (the stream script)
        "copies": f"{backup_fleet.copies_root(cfg)}/{cluster}",
    }
    return json.dumps(config, indent=2) + "\n"


def unit_text() -> str:
    return (
        "# Managed by dbzfs (roles/binlogs.py): a MariaDB group's binlogs streamed here (%i: its\n"
        "# cluster); restarted whenever the stream ends.\n"
        "[Unit]\n"
        "Description=Stream the binlogs of MariaDB group %i (dbzfs)\n"
        "After=zfs-mount.service network-online.target\n"
        "Wants=network-online.target\n\n"
        "[Service]\n"
        f"ExecStart=/usr/bin/python3 {SCRIPT} --config {ETC}/%i.json\n"
        "Restart=always\n"
        "RestartSec=30\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def files_text(cfg: HostConfig, hosts: Sequence[HostConfig]) -> dict[str, str]:
    """path -> text of the backup host's binlog files (the client file with the password apart)."""
    if not enabled(hosts):
        return {}
    out = {UNIT_PATH: unit_text(), SCRIPT: SCRIPT_SOURCE.read_text()}
    for cluster, source in sources(hosts).items():
        out[config_path(cluster)] = config_text(cfg, hosts, cluster, source)
    return out


def client_text(password: str) -> str:
    return f"[client]\nuser = {ACCOUNT}\npassword = {option_value(password)}\n"


# --- the primaries -------------------------------------------------------------------------------


def accounts(cfg: HostConfig) -> None:
    """On a MariaDB primary (roles/mariadb.accounts): ACCOUNT from each backup host's address,
    allowed to stream binlogs and nothing else; none without a backup host."""
    hosts = backup_fleet.configs()
    addresses = (
        [str(b.replication_address) for b in backup_fleet.backup_hosts(hosts)] if enabled(hosts) else []
    )
    password = engine.secret(secrets.REPLICATION_PASSWORD) if addresses else None
    for address in addresses:
        mariadb_ops.user(
            name=f"{ACCOUNT}@{address} (binlogs to the backup host)",
            user=ACCOUNT,
            user_host=address,
            password=password,
        )
        mariadb_ops.grants(
            name=f"Privileges of {ACCOUNT}@{address}", user=ACCOUNT, user_host=address, privileges=PRIVILEGES
        )
    mariadb_ops.only_from(
        name=f"No {ACCOUNT} account for a host that is not a backup host", user=ACCOUNT, user_hosts=addresses
    )


# --- the backup host -------------------------------------------------------------------------------


def packages(hosts: Sequence[HostConfig]) -> list[str]:
    return [PACKAGE] if enabled(hosts) else []


@deploy("Binlog streams")
def streams() -> None:
    """The backup host, after its pool: the binlogs' dataset, the client file, each group's
    stream running (its unit, script and config are written with the backup host's files, in
    ETC, which backup.software makes root's 0700 first)."""
    cfg = engine.host_config()
    hosts = backup_fleet.configs()
    if not enabled(hosts):
        return
    dataset = f"{cfg.pool.name}/{DATASET}"
    zfs_ops.dataset(name=f"Dataset {dataset} (binlogs)", dataset_name=dataset, properties=DATASET_PROPERTIES)
    common.secret_file(
        name=f"{CLIENT} ({ACCOUNT}'s password, 0600)",
        path=CLIENT,
        content=HiddenValue(client_text(engine.secret(secrets.REPLICATION_PASSWORD).unmask())),
        user="root",
        group="root",
        mode="600",
    )
    units.current(
        name="The binlog streams running their current config, enabled",
        units={unit_name(c): [config_path(c), CLIENT, SCRIPT] for c in sources(hosts)},
    )
