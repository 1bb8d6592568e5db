"""roles/engine.py: the shape both engine roles share (replication group, steps every host passes,
packages without needless list refreshes, config files rendered by roles/render.py)."""

import pytest
from pyinfra.api.exceptions import PyinfraError

from model.hostdata import HostConfig
from roles import engine, mariadb, postgresql, render


def group_of(fleet, name):
    engine_name = fleet[name]["engine"]
    members = tuple(HostConfig.from_data(n, d) for n, d in fleet.items() if d["engine"] == engine_name)
    me = next(m for m in members if m.name == name)
    return engine.Group(me, members)


@pytest.mark.parametrize("primary, replica", [("db1", "db2"), ("pg1", "pg2")])
def test_group_finds_primary_replicas_and_peers_by_name(fleet, primary, replica):
    p, r = group_of(fleet, primary), group_of(fleet, replica)
    assert [c.name for c in p.replicas] == [replica] and r.replicas == []
    assert p.primary.name == primary and r.primary.name == primary
    assert r.source().name == primary
    assert [c.name for c in p.peers] == [replica]


def test_a_replica_whose_primary_is_missing_stops_the_deploy(fleet):
    fleet["pg2"]["primary"] = "pg9"
    with pytest.raises(PyinfraError, match="primary 'pg9' is not in the inventory"):
        group_of(fleet, "pg2").source()


def test_step_keeps_the_call_site_for_every_host(monkeypatch):
    calls = []
    monkeypatch.setattr(engine.common, "not_on_this_host", lambda **kw: calls.append(("skip", kw)))

    def op(**kw):
        calls.append(("op", kw))

    op._inner = op  # what pyinfra's @operation leaves on an operation

    engine.step(True, "why", op, name="Step", value=1)
    engine.step(False, "not a standby", op, name="Step", value=1)
    assert calls == [
        ("op", {"name": "Step", "value": 1}),
        ("skip", {"name": "Step", "reason": "not a standby"}),
    ]


def test_step_refuses_a_helper_that_is_not_an_operation():
    """A helper adds a stack frame: the operation inside it would not be at the no-op's place."""
    with pytest.raises(TypeError, match="takes a pyinfra operation"):
        engine.step(True, "why", engine.config_file, name="x")


def test_step_calls_the_operation_and_the_no_op_from_one_line():
    import inspect

    source = inspect.getsource(engine.step)
    assert "(op if applies else common.not_on_this_host)(**kwargs)" in source


def test_config_files_are_rendered_by_render_py(monkeypatch):
    """What a host gets is render.render's text (the tests' and render_host's code path)."""
    placed = {}
    monkeypatch.setattr(engine.common, "config_file", lambda **kw: placed.update(kw))
    context = {"host": "h", "params": {"zfs_arc_max": 1}}
    engine.config_file("zfs.conf.j2", context, "/etc/modprobe.d/zfs.conf")
    assert placed["content"] == render.render("zfs.conf.j2", context)
    assert placed["path"] == "/etc/modprobe.d/zfs.conf" and placed["check"] is None


def test_both_engines_check_their_config_with_their_own_server():
    assert mariadb.CONFIG_CHECK.startswith(mariadb.SERVER_BINARY) and "{path}" in mariadb.CONFIG_CHECK
    for version in ("15", "17"):
        cluster = postgresql.Cluster(version)
        assert cluster.server_binary in cluster.config_check and "{path}" in cluster.config_check


def test_memory_overrides_beyond_the_live_ram_stop_the_deploy(fleet):
    """Validation sized from the declared hardware; the live host may have less RAM."""
    from pyinfra.context import ctx_host

    from facts.hardware import HostHardware

    from tests.unit.fact_stubs import FakeHost

    fleet["db1"]["db_settings"] = {"innodb_buffer_pool_size": "3G"}
    cfg = HostConfig.from_data("db1", fleet["db1"])
    engine._hardware.clear()
    with ctx_host.use(FakeHost({HostHardware: {"ram_bytes": 4 * 1024**3, "cpus": 2}})):
        with pytest.raises(PyinfraError, match="innodb_buffer_pool_size.*live RAM and CPUs of the host"):
            engine.sized_for_this_host(cfg)
    engine._hardware.clear()
    with ctx_host.use(FakeHost({HostHardware: {"ram_bytes": 64 * 1024**3, "cpus": 8}})):
        assert engine.sized_for_this_host(cfg).database["innodb_buffer_pool_size"] > 3 * 1024**3
    engine._hardware.clear()


def test_package_lists_refreshed_only_for_a_missing_package_once_and_when_old(monkeypatch):
    from pyinfra.context import ctx_host

    from tests.unit.fact_stubs import FakeHost

    calls = []

    def packages(**kw):
        calls.append(("packages", kw["packages"]))

    packages._inner = packages
    monkeypatch.setattr(engine.apt, "update", lambda **kw: calls.append(("update", kw)))
    monkeypatch.setattr(engine.apt, "packages", packages)
    monkeypatch.setattr(
        engine.packages_ops, "interrupted_installs_finished", lambda **kw: calls.append(("finish", kw))
    )
    monkeypatch.setattr(engine.common, "not_on_this_host", lambda **kw: calls.append(("installed", kw)))
    installed = {"mariadb-server": ["1"], "mariadb-client": ["1"]}
    engine._refreshed.clear()
    with ctx_host.use(FakeHost({})):
        engine.packages("MariaDB", ["mariadb-server", "mariadb-client=1"], installed=installed)
        # a week later: no refresh, and no question to the host
        assert calls == [
            ("installed", {"name": "MariaDB", "reason": "installed: mariadb-server, mariadb-client=1"})
        ]
        calls.clear()
        engine.packages("ZFS headers", ["linux-headers-amd64"], installed=installed, max_list_age=0)
        engine.packages("PostgreSQL", ["postgresql-15"], installed=installed)
    assert calls == [  # leftovers of a killed install finished first, once, like the refresh
        ("finish", {"name": "Finish interrupted package installs"}),
        ("update", {"name": "Refresh the package lists", "cache_time": None}),
        ("packages", ["linux-headers-amd64"]),
        ("packages", ["postgresql-15"]),
    ]
    engine._refreshed.clear()
    calls.clear()
    with ctx_host.use(FakeHost({})):
        engine.packages("PostgreSQL", ["postgresql-15"], installed=installed)
    assert calls[1] == ("update", {"name": "Refresh the package lists", "cache_time": 3600})
    engine._refreshed.clear()


def test_package_lists_refreshed_again_after_a_source_is_added(monkeypatch):
    """A bare host's first package (the firewall's nftables) refreshes the lists before the ZFS
    sources exist: the ZFS packages, after their source is added (max_list_age=0), refresh again
    (CI at b074f8d: the module's package was not found)."""
    from pyinfra.context import ctx_host

    from tests.unit.fact_stubs import FakeHost

    calls = []

    def packages(**kw):
        calls.append(("packages", kw["packages"]))

    packages._inner = packages
    monkeypatch.setattr(engine.apt, "update", lambda **kw: calls.append(("update", kw["cache_time"])))
    monkeypatch.setattr(engine.apt, "packages", packages)
    monkeypatch.setattr(
        engine.packages_ops, "interrupted_installs_finished", lambda **kw: calls.append(("finish",))
    )
    engine._refreshed.clear()
    with ctx_host.use(FakeHost({})):
        engine.packages("nftables", ["nftables"], installed={})
        engine.packages("ZFS module", ["zfs-modules-6.12"], installed={}, max_list_age=0)
        engine.packages("MariaDB", ["mariadb-server"], installed={})
    assert calls == [
        ("finish",),
        ("update", 3600),
        ("packages", ["nftables"]),
        ("update", None),
        ("packages", ["zfs-modules-6.12"]),
        ("packages", ["mariadb-server"]),
    ]
    engine._refreshed.clear()
