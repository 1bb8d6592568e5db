"""The PostgreSQL role: PostgreSQL 15 from Debian with its cluster created on the ZFS datasets,
postgresql.conf / pg_hba.conf from templates/ (reload or restart only when the running server
has not read them), and streaming replication: the primary holds the replication role, one
physical slot per standby, the application roles and databases; each standby is built once with
pg_basebackup through its slot and then only checked.

Every PostgreSQL host passes through the same steps (a step that is not for its role is a
no-op in the same place), so in one run the primary's role and slots exist before a standby is
built, and the primary checks replication after its standbys have started.
"""

from __future__ import annotations

import io
from pathlib import Path

from pyinfra import host, inventory
from pyinfra.api import deploy
from pyinfra.api.exceptions import PyinfraError
from pyinfra.operations import apt, files, systemd

from roles import render, secrets
from roles.hostdata import HostConfig
from roles.operations import postgresql as pg
from roles.zfs import host_config, sized_for_this_host

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
VERSION = render.PG_VERSION
CLUSTER = render.PG_CLUSTER
CONFIG_DIR = f"/etc/postgresql/{VERSION}/{CLUSTER}"
UNIT = pg.unit(VERSION, CLUSTER)
REPLICATION_USER = render.REPLICATION_USER["postgresql"]
PORT = 5432
HOME = "/var/lib/postgresql"
PASSFILE = f"{HOME}/.pgpass"  # the standby's walreceiver reads it (primary_conninfo names it)
DROPIN = f"/etc/systemd/system/{UNIT}.d/zfs.conf"


# --- data ---------------------------------------------------------------------------------------


def cluster_members(cfg: HostConfig) -> list[HostConfig]:
    """Every inventory host of this host's replication group (itself included), --limit or not."""
    members = []
    for other in inventory:
        c = HostConfig.from_data(other.name, other.data)
        if c.engine == cfg.engine and c.cluster == cfg.cluster:
            members.append(c)
    return members


def standbys_of(cfg: HostConfig, members: list[HostConfig]) -> list[HostConfig]:
    return [m for m in members if m.role == "replica" and m.primary == cfg.name]


def primary_of(cfg: HostConfig, members: list[HostConfig]) -> HostConfig:
    for m in members:
        if m.name == cfg.primary:
            return m
    raise PyinfraError(f"{cfg.name}: primary {cfg.primary!r} is not in the inventory")


def secret(key: str) -> str:
    value = secrets.load().get(key)
    if not value:
        raise PyinfraError(f"{host.name}: secret {key!r} is missing: export "
                           f"{secrets.env_name(key)} or add it to the secrets file")
    return value


def dropin_text(cfg: HostConfig) -> str:
    return render.after_zfs_mounts(cfg, "roles/postgresql.py", "start only once the ZFS datasets are mounted.")


# --- steps --------------------------------------------------------------------------------------


@deploy("Install PostgreSQL")
def install(cfg: HostConfig):
    # The storage role has just refreshed the package lists.
    apt.packages(name="postgresql-common", packages=["postgresql-common"], no_recommends=True)
    # Debian would create 15/main in /var/lib/postgresql when postgresql-15 is installed; the
    # cluster is created on the datasets instead.
    files.line(name="No default cluster on install", path="/etc/postgresql-common/createcluster.conf",
               line=r"^#*create_main_cluster *=.*", replace="create_main_cluster = false")
    apt.packages(name="PostgreSQL 15", packages=[f"postgresql-{VERSION}",
                                                 f"postgresql-client-{VERSION}"],
                 no_recommends=True)
    files.put(name=f"{UNIT} after the ZFS mounts", src=io.StringIO(dropin_text(cfg)),
              dest=DROPIN, mode="644", create_remote_dir=True)
    pg.unit_files_loaded(name="systemd re-reads the unit", unit_name=UNIT)


def only(applies: bool, why_not: str, op, **kwargs):
    """Call `op` on this host, or a no-op in its place at the same call site.

    pyinfra orders operations per host and runs them in waves, joining hosts only at operations
    they share (the same call site). Every PostgreSQL host passes every step, so a standby's
    pg_basebackup waits for the primary's role and slot, and the primary's replication check for
    the standbys."""
    if not applies:
        kwargs = {"name": kwargs.get("name"), "reason": why_not}
    return (op if applies else pg.not_on_this_host)(**kwargs)


def configure(cfg: HostConfig, members: list[HostConfig], applies: bool, why_not: str):
    sized = sized_for_this_host(cfg)
    only(applies, why_not, files.template,
         name=f"{CONFIG_DIR}/postgresql.conf", src=str(TEMPLATES / "postgresql.conf.j2"),
         dest=f"{CONFIG_DIR}/postgresql.conf", user="postgres", group="postgres", mode="644",
         jinja_env_kwargs={"trim_blocks": True, "lstrip_blocks": True},
         **render.postgresql_context(cfg, sized, members))
    only(applies, why_not, files.template,
         name=f"{CONFIG_DIR}/pg_hba.conf", src=str(TEMPLATES / "pg_hba.conf.j2"),
         dest=f"{CONFIG_DIR}/pg_hba.conf", user="postgres", group="postgres", mode="640",
         jinja_env_kwargs={"trim_blocks": True, "lstrip_blocks": True},
         **render.pg_hba_context(cfg, members))
    only(applies, why_not, pg.apply_config,
         name="Reload or restart for changed files", version=VERSION, cluster_name=CLUSTER,
         config_files=[f"{CONFIG_DIR}/postgresql.conf", f"{CONFIG_DIR}/pg_hba.conf"])
    only(applies, why_not, systemd.service, name=f"{UNIT} running", service=UNIT, running=True)


def database_grants(cfg: HostConfig) -> list[dict]:
    """Each declared database with its owner and the users that may connect to it: a user
    connects to its "database" (default: the database named like it) and owns it when the
    database names it as owner or the user says "owner": true."""
    declared = {db["name"]: dict(db) for db in cfg.databases}
    result = {name: {"name": name, "owner": db.get("owner"), "connect": []}
              for name, db in declared.items()}
    for user in cfg.db_users:
        target = user.get("database") or user["name"]
        if target not in result:
            raise PyinfraError(f"{cfg.name}: db_users {user['name']!r} connects to database "
                               f"{target!r}, which is not in databases; declare it")
        if user.get("owner"):
            result[target]["owner"] = user["name"]
        result[target]["connect"].append(user["name"])
    return list(result.values())


@deploy("PostgreSQL primary")
def primary(cfg: HostConfig, members: list[HostConfig], paths: dict):
    is_primary = cfg.role == "primary"
    why_not = "a standby is built from its primary and gets roles and databases from it"
    only(is_primary, why_not, pg.cluster,
         name=f"Cluster {VERSION}/{CLUSTER} on {cfg.data_dataset} + {cfg.log_dataset}",
         version=VERSION, cluster_name=CLUSTER, data_directory=paths["data_directory"],
         wal_directory=paths["wal_directory"])
    configure(cfg, members, is_primary, why_not)
    standbys = standbys_of(cfg, members) if is_primary else []
    only(bool(standbys), "no standby follows this host", pg.login_role,
         name=f"Replication role {REPLICATION_USER}", role_name=REPLICATION_USER,
         password=secret(secrets.REPLICATION_PASSWORD) if standbys else None, replication=True)
    if not is_primary:
        return
    # Loops on the primary only: the standby's next step (shared) waits for all of them.
    for s in standbys:
        pg.replication_slot(name=f"Replication slot for {s.name}", slot=pg.slot_name(s.name))
    for user in cfg.db_users:
        pg.login_role(name=f"Role {user['name']}", role_name=user["name"],
                      password=secret(user["password_secret"]))
    for db in database_grants(cfg):
        pg.database(name=f"Database {db['name']}", database_name=db["name"], owner=db["owner"],
                    connect=db["connect"])


@deploy("PostgreSQL standby")
def standby(cfg: HostConfig, members: list[HostConfig], paths: dict):
    is_standby = cfg.role == "replica"
    why_not = "not a standby"
    source = primary_of(cfg, members) if is_standby else None
    only(is_standby, why_not, files.directory, name=f"{HOME} (postgres' home)", path=HOME,
         user="postgres", group="postgres", mode="755")
    only(is_standby, why_not, pg.secret_file,
         name=f"{PASSFILE} (replication password, 0600)", path=PASSFILE,
         content=pg.pgpass_line(secret(secrets.REPLICATION_PASSWORD), REPLICATION_USER)
         if is_standby else None,
         user="postgres", group="postgres", mode="600")
    only(is_standby, why_not, pg.standby,
         name="Standby built from the primary (pg_basebackup through its slot)",
         version=VERSION, cluster_name=CLUSTER, data_directory=paths["data_directory"],
         wal_directory=paths["wal_directory"],
         primary_address=source.replication_address if source else None,
         slot=pg.slot_name(cfg.name), application_name=cfg.name, passfile=PASSFILE,
         port=PORT, replication_user=REPLICATION_USER)
    configure(cfg, members, is_standby, why_not)
    only(is_standby, why_not, pg.standby_health, name="Standby streams from the primary",
         primary=source.name if source else None)


@deploy("PostgreSQL replication check")
def replication_check(cfg: HostConfig, members: list[HostConfig]):
    standbys = [s.name for s in standbys_of(cfg, members)] if cfg.role == "primary" else []
    only(bool(standbys), "no standby follows this host", pg.replication_health,
         name="Every standby streams through its slot", standbys=standbys)


@deploy("PostgreSQL")
def server():
    cfg = host_config()
    members = cluster_members(cfg)
    paths = render.postgresql_paths(cfg)
    install(cfg)
    # Every host passes every step (see `only`): primary first, then standbys, then the check.
    primary(cfg, members, paths)
    standby(cfg, members, paths)
    replication_check(cfg, members)
