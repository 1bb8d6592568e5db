"""The storage role's result on a live host: pool, layout, datasets, module parameters, scrub,
capacity."""

import pytest

from facts.drives import DrivesByPattern
from facts.hardware import HostHardware
from facts.zfs import ZfsDatasetProperties, ZpoolProperties, ZpoolTopology
from model.zfs_properties import same_value
from operations import zpool
from roles import render, zfs_packages

from tests.infra.probe import fact

# tests/infra/conftest.py: only the database hosts are checked (a backup host runs no engine)
host_roles = ("primary", "replica")


@pytest.fixture(scope="module")
def topology(host, cfg):
    topo = fact(host, ZpoolTopology, pool=cfg.pool.name)
    assert topo is not None, f"pool {cfg.pool.name} is not imported on {cfg.name}"
    return topo


@pytest.fixture(scope="module")
def expected_layout(host, cfg):
    drives = cfg.drives or fact(host, DrivesByPattern, pattern=cfg.drive_pattern)
    assert len(drives) == cfg.expected_drive_count
    return cfg.pool.layout(drives)


def test_zfs_module_loaded(host):
    assert host.file("/sys/module/zfs").is_directory
    assert host.run("zfs version").rc == 0


def test_zfs_installed_the_declared_way(host, cfg):
    """zfs_install "prebuilt": the module is the package built for the running kernel, and nothing
    that compiles is on the host; "dkms": DKMS built the module for the running kernel."""
    kernel = host.run("uname -r").stdout.strip()
    module_file = host.run("modinfo -n zfs").stdout.strip()
    if cfg.zfs_install == "prebuilt":
        package = zfs_packages.module_package(kernel)
        assert host.package(package).is_installed, f"{package} is not installed"
        assert host.run(f"dpkg -S {module_file}").stdout.startswith(f"{package}:"), module_file
        for name in ("zfs-dkms", "dkms", f"linux-headers-{kernel}", "gcc", "make"):
            assert not host.package(name).is_installed, f"{name} is installed on a prebuilt-ZFS host"
    else:
        assert host.package("zfs-dkms").is_installed
        status = host.run("dkms status zfs").stdout
        assert f", {kernel}, " in status and "installed" in status, status


def test_pool_online(topology):
    assert topology["state"] == "ONLINE"
    for vdev in topology["vdevs"]:
        assert vdev["state"] == "ONLINE", vdev
        for device in vdev["devices"]:
            assert device["state"] == "ONLINE", device


def test_pool_layout_by_id(topology, expected_layout, cfg):
    mirrors, spares = expected_layout
    assert [v["type"] for v in topology["vdevs"]] == ["mirror"] * len(mirrors)
    if cfg.drives:
        assert [[d["disk"] for d in v["devices"]] for v in topology["vdevs"]] == mirrors
        assert [s["disk"] for s in topology["spares"]] == spares
    else:
        # Found by drive_pattern: a replaced drive sits in its predecessor's mirror, wherever its
        # name sorts; the pool holds exactly the drives found, in the declared shape.
        differences, not_held = zpool.shape_differences(topology, mirrors, spares)
        assert differences == [] and not_held == [], (differences, not_held)
        assert set(zpool.pool_members(topology)) == {d for m in mirrors for d in m} | set(spares)
    assert all(s["state"] == "AVAIL" for s in topology["spares"])
    for section in ("logs", "cache", "special", "dedup"):
        assert topology[section] == []
    every_path = [d["path"] for v in topology["vdevs"] for d in v["devices"]]
    assert all(p.startswith("/dev/disk/by-id/") for p in every_path), every_path


def test_pool_properties(host, cfg):
    props = fact(host, ZpoolProperties, pool=cfg.pool.name)
    assert props["ashift"]["value"] == str(cfg.pool.ashift)
    assert props["autoreplace"]["value"] == cfg.pool.autoreplace
    assert props["autotrim"]["value"] == cfg.pool.autotrim


def test_capacity_under_threshold(host, cfg):
    props = fact(host, ZpoolProperties, pool=cfg.pool.name)
    assert int(props["capacity"]["value"]) <= cfg.capacity_threshold


def test_dataset_properties(host, cfg):
    names = [cfg.dataset_name(ds) for ds in cfg.datasets]
    live = fact(host, ZfsDatasetProperties, datasets=names)
    wrong = []
    for relative, props in cfg.datasets.items():
        name = cfg.dataset_name(relative)
        assert name in live, f"dataset {name} missing"
        for prop, wanted in props.items():
            got = live[name].get(prop, {}).get("value")
            if not same_value(prop, wanted, got):
                wrong.append(f"{name} {prop}={got}, declared {wanted}")
        assert live[name]["mounted"]["value"] == "yes"
    assert not wrong, wrong


def test_mountpoints_owned_by_the_engine(host, cfg):
    owner = {"mariadb": "mysql", "postgresql": "postgres"}[cfg.engine]
    for relative in list(cfg.datasets)[1:]:
        mount = host.file(cfg.mountpoint(relative))
        assert mount.is_directory and mount.user == owner, cfg.mountpoint(relative)
        assert host.mount_point(cfg.mountpoint(relative)).filesystem == "zfs"


def test_module_parameters_live_and_persisted(host, cfg):
    hw = fact(host, HostHardware)
    params = render.zfs_modprobe_context(cfg, cfg.sizing(hw["ram_bytes"], hw["cpus"]))["params"]
    conf = host.file("/etc/modprobe.d/zfs.conf").content_string
    for name, value in params.items():
        assert host.file(f"/sys/module/zfs/parameters/{name}").content_string.strip() == str(value)
        assert f"options zfs {name}={value}" in conf


def test_scrub_timer_enabled(host, cfg):
    timer = host.service(f"zfs-scrub-monthly@{cfg.pool.name}.timer")
    assert timer.is_enabled
    assert timer.is_running
