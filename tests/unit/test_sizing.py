"""Pinned sizing outputs for the two reference hosts, and invariants over a grid of hosts."""

import itertools

import pytest

from model.sizing import GIB, KIB, MIB, Hardware, arc_min_default, os_headroom, size

TIB = 1024 * GIB
LETS_ENCRYPT = Hardware(ram_bytes=2 * TIB, cpus=128, drives=24)
LAB_VM = Hardware(ram_bytes=4 * GIB, cpus=2, drives=24)


def test_lets_encrypt_mariadb():
    s = size(LETS_ENCRYPT, "mariadb")
    assert s.zfs == {"zfs_arc_max": 128 * GIB, "zfs_prefetch_disable": 1}
    assert s.database == {
        "innodb_buffer_pool_size": 1411 * GIB,
        "innodb_log_file_size": 16 * GIB,
        "innodb_log_buffer_size": 64 * MIB,
        "innodb_log_write_ahead_size": 4 * KIB,  # MariaDB 10.11's maximum
        # Let's Encrypt's published values on 24 NVMe drives
        "innodb_io_capacity": 1000,
        "innodb_io_capacity_max": 2500,
        "innodb_read_io_threads": 32,
        "innodb_write_io_threads": 32,
        "max_connections": 2048,
        "table_open_cache": 4096,
    }


def test_lab_vm_mariadb():
    s = size(LAB_VM, "mariadb")
    assert s.zfs == {"zfs_arc_max": 256 * MIB, "zfs_prefetch_disable": 1}
    assert s.database["innodb_buffer_pool_size"] == 2 * GIB
    assert s.database["innodb_log_file_size"] == 512 * MIB
    assert s.database["innodb_log_buffer_size"] == 32 * MIB
    assert s.database["innodb_log_write_ahead_size"] == 4 * KIB
    assert s.database["innodb_io_capacity"] == 1000
    assert s.database["innodb_io_capacity_max"] == 2500
    assert s.database["max_connections"] == 151


def test_lets_encrypt_hardware_postgresql():
    s = size(LETS_ENCRYPT, "postgresql")
    d = s.database
    assert d["shared_buffers"] == 512 * GIB
    assert d["max_connections"] == 300
    assert d["work_mem"] == 313592 * KIB
    assert d["maintenance_work_mem"] == 8 * GIB
    assert d["wal_buffers"] == 16 * MIB
    assert (d["min_wal_size"], d["max_wal_size"]) == (2 * GIB, 8 * GIB)
    assert d["effective_io_concurrency"] == 1000
    assert (d["max_worker_processes"], d["max_parallel_workers"]) == (128, 128)
    assert d["max_parallel_workers_per_gather"] == 4
    assert d["max_parallel_maintenance_workers"] == 4
    assert s.zfs == {"zfs_arc_max": 975 * GIB + 64 * MIB * 15}
    assert d["effective_cache_size"] == d["shared_buffers"] + s.zfs["zfs_arc_max"]


def test_lab_vm_postgresql():
    s = size(LAB_VM, "postgresql")
    d = s.database
    assert d["shared_buffers"] == 1 * GIB
    assert d["work_mem"] == 1702 * KIB
    assert d["maintenance_work_mem"] == 256 * MIB
    assert d["autovacuum_work_mem"] == 85 * MIB
    assert d["wal_buffers"] == 16 * MIB
    # fewer than 4 CPUs: PostgreSQL's own parallel defaults
    assert (d["max_worker_processes"], d["max_parallel_workers_per_gather"]) == (8, 2)
    assert s.zfs == {"zfs_arc_max": 960 * MIB}
    assert d["effective_cache_size"] == 1 * GIB + 960 * MIB


def test_analytics_postgresql_heap_like():
    s = size(Hardware(512 * GIB, 64, 24), "postgresql", "analytics")
    assert s.database["max_connections"] == 40
    assert (s.database["min_wal_size"], s.database["max_wal_size"]) == (4 * GIB, 16 * GIB)


def test_log_write_ahead_follows_recordsize_up_to_mariadbs_maximum():
    assert size(LAB_VM, "mariadb", data_recordsize=2 * KIB).database["innodb_log_write_ahead_size"] == 2 * KIB
    assert (
        size(LAB_VM, "mariadb", data_recordsize=16 * KIB).database["innodb_log_write_ahead_size"] == 4 * KIB
    )


def test_explicit_max_connections():
    assert size(LAB_VM, "postgresql", max_connections=50).database["max_connections"] == 50


@pytest.mark.parametrize("engine", ["mariadb", "postgresql"])
@pytest.mark.parametrize("workload", ["oltp", "analytics"])
@pytest.mark.parametrize(
    "ram_gib,cpus,drives",
    list(itertools.product([2, 4, 8, 16, 64, 256, 768, 2048], [1, 2, 4, 16, 64, 128, 256], [2, 4, 24, 48])),
)
def test_memory_never_exceeds_ram(engine, workload, ram_gib, cpus, drives):
    ram = ram_gib * GIB
    s = size(Hardware(ram, cpus, drives), engine, workload)
    b = s.budget
    assert b.os_headroom == os_headroom(ram)
    assert b.total <= ram
    assert b.arc_max + b.database + b.connections + b.maintenance <= ram - b.os_headroom
    # zfs_arc_max below the module's own minimum would be ignored by ZFS
    assert s.zfs["zfs_arc_max"] > arc_min_default(ram)
    assert s.zfs["zfs_arc_max"] % MIB == 0
    if engine == "mariadb":
        d = s.database
        assert d["innodb_buffer_pool_size"] > b.arc_max  # the buffer pool is the cache
        assert d["innodb_io_capacity"] <= d["innodb_io_capacity_max"]
        assert d["innodb_log_file_size"] <= 16 * GIB
    else:
        d = s.database
        assert d["shared_buffers"] == ram // 4
        assert d["work_mem"] >= 64 * KIB
        assert d["effective_cache_size"] < ram


@pytest.mark.parametrize(
    "hw,engine,workload",
    [
        (Hardware(1 * GIB, 2, 24), "mariadb", "oltp"),
        (LAB_VM, "sqlite", "oltp"),
        (LAB_VM, "mariadb", "batch"),
    ],
)
def test_rejects_bad_input(hw, engine, workload):
    with pytest.raises(ValueError):
        size(hw, engine, workload)
