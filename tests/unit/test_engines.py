"""engines/: one descriptor per engine, and everything that keys on an engine's name agrees with
it (the inventory's choices, the settings data, the units and accounts the roles use)."""

import pytest

import engines
from engines import db_settings
from model import keys, releases
from model.hostdata import HostConfig
from operations import postgresql as pg_ops
from roles import mariadb, monitoring, monitoring_rules, postgresql, render, topology, zfs


def test_the_inventory_names_exactly_the_engines_described():
    assert set(keys.choices("engine")) == set(engines.ENGINES)


@pytest.mark.parametrize("release", sorted(releases.RELEASES))
@pytest.mark.parametrize("name", sorted(engines.ENGINES))
def test_each_engine_has_its_settings_data_on_each_release(name, release):
    """What the server accepts, generated from its real binary for the version the release ships."""
    version = engines.get(name, release).version
    assert version == releases.get(release).version(name)
    assert db_settings.data_file(name, version).is_file(), db_settings.data_file(name, version)
    assert version in db_settings.VERSIONS[name]


@pytest.mark.parametrize(("release", "version"), [("12", "15"), ("13", "17")])
def test_postgresqls_unit_is_debians_cluster_unit(fleet, release, version):
    fleet["pg1"]["debian_release"] = release
    cfg = HostConfig.from_data("pg1", fleet["pg1"])
    pg, cluster = engines.of(cfg), postgresql.cluster(cfg)
    assert pg.version == cluster.version == version
    assert (
        pg.service
        == pg_ops.unit(pg.version, pg.cluster)
        == cluster.unit
        == f"postgresql@{version}-main.service"
    )
    assert cluster.server_binary == pg.server_binary == f"/usr/lib/postgresql/{version}/bin/postgres"
    assert pg.packages == ("postgresql-common", f"postgresql-{version}", f"postgresql-client-{version}")
    assert cluster.config_dir == render.pg_config_dir(cfg) == f"/etc/postgresql/{version}/main"


def test_the_roles_read_the_descriptors():
    assert mariadb.SERVICE == engines.MARIADB.service and mariadb.PACKAGES == list(engines.MARIADB.packages)
    assert {name: users["user"] for name, users in zfs.SERVICE_USERS.items()} == {
        name: e.service_user.user for name, e in engines.ENGINES.items()
    }
    assert monitoring.ENGINE_EXPORTER == engines.by_engine("exporter_package")
    assert monitoring_rules.JOBS == engines.by_engine("exporter_job")
    assert topology.FOLLOWER == engines.by_engine("follower")
    assert (render.MARIADB_PORT, render.PG_PORT) == (engines.MARIADB.port, engines.POSTGRESQL.port)


def test_an_unknown_engine_is_named():
    with pytest.raises(ValueError, match="unknown engine 'oracle'"):
        engines.get("oracle")
