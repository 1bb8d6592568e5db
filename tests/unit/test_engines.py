"""engines/: one descriptor per engine, and everything that keys on an engine's name agrees with
it (the inventory's choices, the settings data, the units and accounts the roles use)."""

import pytest

import engines
from engines import db_settings
from model import keys
from operations import postgresql as pg_ops
from roles import mariadb, monitoring, monitoring_rules, postgresql, render, snapshots, topology, zfs


def test_the_inventory_names_exactly_the_engines_described():
    assert set(keys.choices("engine")) == set(engines.ENGINES)


@pytest.mark.parametrize("name", sorted(engines.ENGINES))
def test_each_engine_has_its_settings_data(name):
    """What the server accepts, generated from its real binary for the version described."""
    assert db_settings.data_file(name).is_file(), db_settings.data_file(name)
    assert db_settings.VERSIONS[name] == engines.get(name).version


def test_postgresqls_unit_is_debians_cluster_unit():
    pg = engines.POSTGRESQL
    assert pg.service == pg_ops.unit(pg.version, pg.cluster) == postgresql.UNIT
    assert postgresql.SERVER_BINARY == pg.server_binary and str(render.PG_VERSION) == pg.version


def test_the_roles_read_the_descriptors():
    assert mariadb.SERVICE == engines.MARIADB.service and mariadb.PACKAGES == list(engines.MARIADB.packages)
    assert snapshots.SERVER_UNIT == {name: e.service for name, e in engines.ENGINES.items()}
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
