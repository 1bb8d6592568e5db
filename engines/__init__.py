"""What differs per database engine: one descriptor per engine (its Debian packages and server
version, the unit it runs as, its service account, port, binaries, replication account and
exporter), and the settings each server accepts (engines/data/, generated from the real binaries;
engines/db_settings.py sizes and checks them).

Code that needs an engine's fact reads it here (`engines.get(cfg.engine).service`) instead of
writing its own `{"mariadb": ..., "postgresql": ...}`. Pure: no pyinfra, nothing but constants.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServiceUser:
    """The engine's service account, as Debian's packages create it: the storage role creates it
    first with the same attributes, so that the dataset mountpoints can be owned by it before the
    server is installed."""

    user: str
    home: str
    shell: str
    mode: str  # of the data directories (the mountpoints)


@dataclass(frozen=True)
class Engine:
    name: str  # the inventory's `engine`
    label: str  # for people: "MariaDB"
    version: str  # the server's major version, as Debian 12 ships it
    packages: tuple[str, ...]  # the server from Debian
    service: str  # the systemd unit the server runs as
    service_user: ServiceUser
    port: int  # the server's port (its default: the toolkit does not move it)
    server_binary: str  # what checks a config before it replaces the live one
    replication_user: str  # the account replicas (standbys) connect as
    follower: str  # what the engine calls a host that replicates: "replica" / "standby"
    exporter_package: str  # Prometheus' exporter for the server, from Debian
    exporter_job: str  # its scrape job in Prometheus
    up_metric_prefix: str  # <prefix>_up: whether the exporter reaches its server
    cluster: str | None = None  # PostgreSQL: the cluster name Debian's tools use


MARIADB = Engine(
    name="mariadb",
    label="MariaDB",
    version="10.11",
    packages=("mariadb-server", "mariadb-client"),
    service="mariadb.service",
    service_user=ServiceUser(user="mysql", home="/nonexistent", shell="/bin/false", mode="0750"),
    port=3306,
    server_binary="/usr/sbin/mariadbd",
    replication_user="replicator",
    follower="replica",
    exporter_package="prometheus-mysqld-exporter",
    exporter_job="mysqld",
    up_metric_prefix="mysql",
)

_PG_VERSION, _PG_CLUSTER = "15", "main"
POSTGRESQL = Engine(
    name="postgresql",
    label="PostgreSQL",
    version=_PG_VERSION,
    packages=("postgresql-common", f"postgresql-{_PG_VERSION}", f"postgresql-client-{_PG_VERSION}"),
    service=f"postgresql@{_PG_VERSION}-{_PG_CLUSTER}.service",
    service_user=ServiceUser(user="postgres", home="/var/lib/postgresql", shell="/bin/bash", mode="0755"),
    port=5432,
    server_binary=f"/usr/lib/postgresql/{_PG_VERSION}/bin/postgres",
    replication_user="replicator",
    follower="standby",
    exporter_package="prometheus-postgres-exporter",
    exporter_job="postgres",
    up_metric_prefix="pg",
    cluster=_PG_CLUSTER,
)

ENGINES: dict[str, Engine] = {e.name: e for e in (MARIADB, POSTGRESQL)}


def get(name: str) -> Engine:
    """The descriptor of an engine the inventory names (validation refuses any other first)."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}: one of {sorted(ENGINES)}") from None


def by_engine(field: str) -> dict[str, object]:
    """{engine name: that field of its descriptor}, for code that keys on the engine's name."""
    return {name: getattr(e, field) for name, e in ENGINES.items()}
