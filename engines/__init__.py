"""What differs per database engine: one descriptor per engine (its Debian packages and server
version, the unit it runs as, its service account, port, binaries, replication account and
exporter), and the settings each server accepts (engines/data/, generated from the real binaries;
engines/db_settings.py sizes and checks them).

Code that needs an engine's fact reads it here (`engines.get(cfg.engine).service`) instead of
writing its own `{"mariadb": ..., "postgresql": ...}`. Pure: no pyinfra, nothing but constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from model import releases

if TYPE_CHECKING:
    from model.hostdata import HostConfig


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
    version: str  # the server's major version, as the host's Debian release ships it
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


def _mariadb(version: str) -> Engine:
    return Engine(
        name="mariadb",
        label="MariaDB",
        version=version,
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


_PG_CLUSTER = "main"


def _postgresql(version: str) -> Engine:
    return Engine(
        name="postgresql",
        label="PostgreSQL",
        version=version,
        packages=("postgresql-common", f"postgresql-{version}", f"postgresql-client-{version}"),
        service=f"postgresql@{version}-{_PG_CLUSTER}.service",
        service_user=ServiceUser(user="postgres", home="/var/lib/postgresql", shell="/bin/bash", mode="0755"),
        port=5432,
        server_binary=f"/usr/lib/postgresql/{version}/bin/postgres",
        replication_user="replicator",
        follower="standby",
        exporter_package="prometheus-postgres-exporter",
        exporter_job="postgres",
        up_metric_prefix="pg",
        cluster=_PG_CLUSTER,
    )


_MAKE = {"mariadb": _mariadb, "postgresql": _postgresql}
# (engine, debian_release) -> the descriptor of the server that release ships
BY_RELEASE: dict[tuple[str, str], Engine] = {
    (name, major): make(release.version(name))
    for major, release in releases.RELEASES.items()
    for name, make in _MAKE.items()
}
# What does not depend on the release (names, ports, accounts, exporters): the default release's.
ENGINES: dict[str, Engine] = {name: BY_RELEASE[(name, releases.DEFAULT)] for name in _MAKE}
MARIADB, POSTGRESQL = ENGINES["mariadb"], ENGINES["postgresql"]


def get(name: str, release: str = releases.DEFAULT) -> Engine:
    """The descriptor of an engine the inventory names, as a Debian release (debian_release)
    ships it (validation refuses any other engine or release first)."""
    try:
        return BY_RELEASE[(name, str(release))]
    except KeyError:
        raise ValueError(
            f"unknown engine {name!r} or release {release!r}: "
            f"one of {sorted(ENGINES)}, {sorted(releases.RELEASES)}"
        ) from None


def of(cfg: HostConfig) -> Engine:
    """The descriptor of the server a database host runs (a model.hostdata.HostConfig): its
    release's, or the previous release's PostgreSQL it still runs (postgresql_version)."""
    return get(cfg.engine, releases.shipping(cfg.engine, cfg.server_version).major)


def by_engine(field: str) -> dict[str, object]:
    """{engine name: that field of its descriptor}, for code that keys on the engine's name; only
    for fields the same on every release (engines.of(cfg) for the others: version, packages,
    service, server_binary)."""
    return {name: getattr(e, field) for name, e in ENGINES.items()}
