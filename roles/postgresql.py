"""The PostgreSQL role: PostgreSQL from Debian (15 on Debian 12, 17 on Debian 13) with its cluster
created on the ZFS datasets, postgresql.conf / pg_hba.conf from templates/ (reload or restart only
when the running server has not read them), and streaming replication: the primary holds the
replication role, one physical slot per standby, the application roles and databases; each
standby is built once with pg_basebackup through its slot and then only checked.

Every PostgreSQL host passes through the same steps (a step that is not for its role is a
no-op in the same place), so in one run the primary's role and slots exist before a standby is
built, and the primary checks replication after its standbys have started.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyinfra.api import HiddenValue, deploy
from pyinfra.operations import files

import engines
from model import releases, secrets
from model.hostdata import HostConfig
from operations import common, postgresql as pg, runtime, units
from roles import backup, engine, fencing, monitoring, pgbackrest, render, snapshots

CLUSTER = render.PG_CLUSTER
REPLICATION_USER = render.REPLICATION_USER["postgresql"]
HOME = "/var/lib/postgresql"
PASSFILE = render.PG_PASSFILE  # the walreceiver reads it (primary_conninfo names it), and the fence
CREATECLUSTER_DROPIN = "/etc/postgresql-common/createcluster.d/dbzfs.conf"


@dataclass(frozen=True)
class Cluster:
    """Debian's names for the host's cluster of its release's PostgreSQL (debian_release): 17/main
    on Debian 13, 15/main on Debian 12."""

    version: str
    name: str = CLUSTER

    @property
    def config_dir(self) -> str:
        return f"/etc/postgresql/{self.version}/{self.name}"

    @property
    def unit(self) -> str:
        return pg.unit(self.version, self.name)

    @property
    def dropin(self) -> str:
        return f"/etc/systemd/system/{self.unit}.d/zfs.conf"

    @property
    def server_binary(self) -> str:
        return engines.get("postgresql", _release_of(self.version)).server_binary

    @property
    def config_check(self) -> str:
        """The host's own server parses the candidate file (every setting's name and value) and
        prints one setting; it refuses an unknown name or a bad value."""
        return f"cd / && runuser -u postgres -- {self.server_binary} --config-file={{path}} -C data_directory"

    @property
    def log(self) -> str:
        """pg_ctlcluster's log (Debian's)."""
        return f"/var/log/postgresql/postgresql-{self.version}-{self.name}.log"


def _release_of(version: str) -> str:
    return next(r.major for r in releases.RELEASES.values() if r.postgresql == version)


def cluster(cfg: HostConfig) -> Cluster:
    return Cluster(cfg.server_version)


def dropin_text(cfg: HostConfig) -> str:
    return render.after_zfs_mounts(
        cfg, "roles/postgresql.py", "start only once the ZFS datasets are mounted."
    )


def passfile_content() -> HiddenValue:
    """The standby's .pgpass: the replication account's password for any primary."""
    return HiddenValue(pg.pgpass_line(engine.secret(secrets.REPLICATION_PASSWORD).unmask(), REPLICATION_USER))


# --- steps --------------------------------------------------------------------------------------


@deploy("Install PostgreSQL")
def install(cfg: HostConfig, group: engine.Group) -> None:
    c = cluster(cfg)
    # Debian would create 17/main in /var/lib/postgresql when postgresql-17 is installed; the
    # cluster is created on the datasets instead. postgresql-common's createcluster.conf reads
    # createcluster.d/, so the setting is in place before the one install of every package.
    engine.text_file(
        "# Managed by dbzfs (roles/postgresql.py): the cluster is created on the ZFS datasets.\n"
        "create_main_cluster = false\n",
        CREATECLUSTER_DROPIN,
        name="No default cluster on install",
    )
    # The unit's drop-ins before the packages: postgresql-common's postinst reloads systemd, which
    # then reads them too (each daemon-reload re-reads every unit: no reload of our own).
    engine.text_file(dropin_text(cfg), cluster(cfg).dropin, name=f"{cluster(cfg).unit} after the ZFS mounts")
    fencing.place(cfg, group, c.unit)
    # One apt run for the server, the monitoring packages (their units are in place already),
    # sanoid (its timer does nothing before roles/snapshots.py writes its config) and pgBackRest
    # (archive_command: roles/pgbackrest.py).
    engine.packages(
        f"PostgreSQL {c.version}, monitoring, sanoid and pgBackRest",
        list(engines.of(cfg).packages) + monitoring.packages(cfg) + [snapshots.PACKAGE, pgbackrest.PACKAGE],
    )
    common.unit_files_loaded(name="systemd re-reads the unit", unit_name=c.unit)


def configure(cfg: HostConfig, group: engine.Group, applies: bool, why_not: str) -> None:
    c = cluster(cfg)
    # Files rendered by render.py (engine.config_file's code path), placed by the operation itself:
    # engine.step joins hosts only at an operation called directly.
    sized = engine.sized_for_this_host(cfg)
    members = list(group.members)
    archive = pgbackrest.archive_settings(cfg, backup.configs())
    engine.step(
        applies,
        why_not,
        common.config_file,
        name=f"{c.config_dir}/postgresql.conf",
        content=render.render("postgresql.conf.j2", render.postgresql_context(cfg, sized, members, archive)),
        path=f"{c.config_dir}/postgresql.conf",
        user="postgres",
        group="postgres",
        mode="644",
        check=c.config_check,
        checker=c.server_binary,
    )
    engine.step(
        applies,
        why_not,
        common.config_file,
        name=f"{c.config_dir}/pg_hba.conf",
        content=render.render("pg_hba.conf.j2", render.pg_hba_context(cfg, members)),
        path=f"{c.config_dir}/pg_hba.conf",
        user="postgres",
        group="postgres",
        mode="640",
    )
    engine.step(
        applies,
        why_not,
        pg.apply_config,
        name="Reload or restart for changed files",
        version=c.version,
        cluster_name=CLUSTER,
        config_files=[f"{c.config_dir}/postgresql.conf", f"{c.config_dir}/pg_hba.conf"],
    )
    engine.step(applies, why_not, units.service, name=f"{c.unit} running", unit=c.unit, running=True)


def database_grants(cfg: HostConfig) -> list[dict]:
    """Each declared database with its owner and the users that may connect to it: a user
    connects to its "database" (default: the database named like it) and owns it when the
    database names it as owner or the user says "owner": true."""
    declared = {db["name"]: dict(db) for db in cfg.databases}
    result = {name: {"name": name, "owner": db.get("owner"), "connect": []} for name, db in declared.items()}
    for user in cfg.db_users:
        target = user.get("database") or user["name"]
        if target not in result:
            raise runtime.Refused(
                f"{cfg.name}: db_users {user['name']!r} connects to database "
                f"{target!r}, which is not in databases; declare it"
            )
        if user.get("owner"):
            result[target]["owner"] = user["name"]
        result[target]["connect"].append(user["name"])
    return list(result.values())


@deploy("PostgreSQL primary")
def primary(cfg: HostConfig, group: engine.Group, paths: dict) -> None:
    c = cluster(cfg)
    is_primary = cfg.role == "primary"
    why_not = "a standby is built from its primary and gets roles and databases from it"
    engine.step(
        is_primary,
        why_not,
        pg.cluster,
        name=f"Cluster {c.version}/{CLUSTER} on {cfg.data_dataset} + {cfg.log_dataset}",
        version=c.version,
        cluster_name=CLUSTER,
        data_directory=paths["data_directory"],
        wal_directory=paths["wal_directory"],
    )
    configure(cfg, group, is_primary, why_not)
    standbys = group.replicas if is_primary else []
    engine.step(
        bool(standbys),
        "no standby follows this host",
        pg.login_role,
        name=f"Replication role {REPLICATION_USER}",
        role_name=REPLICATION_USER,
        password=engine.secret(secrets.REPLICATION_PASSWORD) if standbys else None,
        replication=True,
    )
    if not is_primary:
        return
    # Loops on the primary only: the standby's next step (shared) waits for all of them.
    for s in standbys:
        pg.replication_slot(name=f"Replication slot for {s.name}", slot=pg.slot_name(s.name))
    for user in cfg.db_users:
        pg.login_role(
            name=f"Role {user['name']}",
            role_name=user["name"],
            password=engine.secret(user["password_secret"]),
        )
    for db in database_grants(cfg):
        pg.database(
            name=f"Database {db['name']}", database_name=db["name"], owner=db["owner"], connect=db["connect"]
        )


@deploy("Replication password file")
def passfile() -> None:
    """Every member holds it: a standby streams with it, and the fence check asks peers with it."""
    files.directory(name=f"{HOME} (postgres' home)", path=HOME, user="postgres", group="postgres", mode="755")
    common.secret_file(
        name=f"{PASSFILE} (replication password, 0600)",
        path=PASSFILE,
        content=passfile_content(),
        user="postgres",
        group="postgres",
        mode="600",
    )


@deploy("PostgreSQL standby")
def standby(cfg: HostConfig, group: engine.Group, paths: dict) -> None:
    c = cluster(cfg)
    is_standby = cfg.role == "replica"
    why_not = "not a standby"
    source = group.source() if is_standby else None
    engine.step(
        is_standby,
        why_not,
        pg.standby,
        name="Standby built from the primary (pg_basebackup through its slot)",
        version=c.version,
        cluster_name=CLUSTER,
        data_directory=paths["data_directory"],
        wal_directory=paths["wal_directory"],
        primary_address=source.replication_address if source else None,
        slot=pg.slot_name(cfg.name),
        application_name=cfg.name,
        passfile=PASSFILE,
        port=render.PG_PORT,
        replication_user=REPLICATION_USER,
    )
    configure(cfg, group, is_standby, why_not)
    engine.step(
        is_standby,
        why_not,
        pg.standby_health,
        name="Standby streams from the primary",
        primary=source.name if source else None,
    )


@deploy("PostgreSQL replication check")
def replication_check(cfg: HostConfig, group: engine.Group) -> None:
    standbys = [s.name for s in group.replicas] if cfg.role == "primary" else []
    engine.step(
        bool(standbys),
        "no standby follows this host",
        pg.replication_health,
        name="Every standby streams through its slot",
        standbys=standbys,
    )


@deploy("PostgreSQL software")
def software() -> None:
    """PostgreSQL and its monitoring, before the pool exists (deploy.py): no cluster is created on
    install, so nothing here needs the datasets."""
    cfg = engine.host_config()
    monitoring.before_install(cfg)
    snapshots.before_install()
    install(cfg, engine.group(cfg))


@deploy("PostgreSQL")
def server() -> None:
    """After software() and the storage role."""
    cfg = engine.host_config()
    group = engine.group(cfg)
    paths = render.postgresql_paths(cfg)
    passfile()
    # Every host passes every step (engine.step): primary first, then standbys, then the check.
    primary(cfg, group, paths)
    if cfg.role == "primary":
        monitoring.account(cfg)
    standby(cfg, group, paths)
    replication_check(cfg, group)
    monitoring.running(cfg)
