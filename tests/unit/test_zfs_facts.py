from facts.zfs import (
    ZfsDatasetProperties,
    ZfsModuleParameters,
    ZpoolProperties,
    ZpoolTopology,
    disk_of,
    parse_modprobe_options,
)

from tests.unit.fact_stubs import fixture_lines

BY_ID = "/dev/disk/by-id/nvme-INTEL_SSDPE2KE064T8_"


def serial(n):
    return f"{BY_ID}PHLN{n:04d}00V6P4BGN"


def test_topology_command_checks_pool_exists_and_keeps_by_id_paths():
    command = str(ZpoolTopology().command(pool="dbpool"))
    assert command == ("if zpool list -H -o name dbpool >/dev/null 2>&1; then zpool status -P dbpool ; fi")
    assert "-L" not in command


def test_topology_of_healthy_pool_with_spares():
    topology = ZpoolTopology().process(fixture_lines("zfs/zpool_status_healthy.txt"))

    assert topology["name"] == "dbpool"
    assert topology["state"] == "ONLINE"
    assert len(topology["vdevs"]) == 11
    first = topology["vdevs"][0]
    assert first["name"] == "mirror-0"
    assert first["type"] == "mirror"
    assert first["state"] == "ONLINE"
    assert [d["path"] for d in first["devices"]] == [
        serial(1) + "-part1",
        serial(2) + "-part1",
    ]
    assert [d["disk"] for d in first["devices"]] == [serial(1), serial(2)]
    assert all(d["state"] == "ONLINE" for v in topology["vdevs"] for d in v["devices"])
    assert [(s["disk"], s["state"]) for s in topology["spares"]] == [
        (serial(23), "AVAIL"),
        (serial(24), "AVAIL"),
    ]
    assert topology["logs"] == topology["cache"] == topology["special"] == []


def test_topology_of_degraded_pool_keeps_original_slots():
    topology = ZpoolTopology().process(fixture_lines("zfs/zpool_status_degraded.txt"))

    assert topology["state"] == "DEGRADED"
    mirror0 = topology["vdevs"][0]
    assert mirror0["state"] == "DEGRADED"
    # spare-0 stands in for the faulted drive: the layout still has the original drive.
    assert [d["disk"] for d in mirror0["devices"]] == [serial(1), serial(2)]
    faulted = mirror0["devices"][0]
    assert faulted["state"] == "FAULTED"
    assert faulted["note"] == "too many errors"
    assert faulted["slot"] == "spare-0"
    assert [(r["disk"], r["state"]) for r in faulted["replaced_by"]] == [(serial(23), "ONLINE")]

    # A drive ZFS cannot open is printed by guid; its by-id path follows "was".
    mirror3 = topology["vdevs"][3]
    missing = mirror3["devices"][1]
    assert missing["state"] == "UNAVAIL"
    assert missing["path"] == serial(8) + "-part1"
    assert missing["disk"] == serial(8)

    assert [(s["disk"], s["state"], s["note"]) for s in topology["spares"]] == [
        (serial(23), "INUSE", "currently in use"),
        (serial(24), "AVAIL", ""),
    ]


def test_topology_with_single_disk_vdev_logs_and_cache():
    topology = ZpoolTopology().process(fixture_lines("zfs/zpool_status_lab_with_log_cache.txt"))
    lab = "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_lab0"

    assert topology["name"] == "labpool"
    assert [(v["type"], [d["disk"] for d in v["devices"]]) for v in topology["vdevs"]] == [
        ("mirror", [lab + "1", lab + "2", lab + "3"]),
        ("disk", [lab + "4"]),
    ]
    assert [d["disk"] for v in topology["logs"] for d in v["devices"]] == [lab + "5"]
    assert [d["disk"] for v in topology["cache"] for d in v["devices"]] == [lab + "6"]
    assert [s["disk"] for s in topology["spares"]] == [lab + "7"]


def test_topology_is_none_without_output():
    assert ZpoolTopology().process([]) is None


def test_disk_of_strips_only_the_whole_disk_partition():
    assert disk_of("/dev/disk/by-id/nvme-A-part1") == "/dev/disk/by-id/nvme-A"
    assert disk_of("/dev/disk/by-id/nvme-A-part3") == "/dev/disk/by-id/nvme-A-part3"
    assert disk_of("/dev/disk/by-id/nvme-A") == "/dev/disk/by-id/nvme-A"


def test_pool_properties_are_numbers_with_sources():
    command = str(ZpoolProperties().command(pool="dbpool"))
    assert "zpool get -H -p -o property,value,source all dbpool" in command

    props = ZpoolProperties().process(fixture_lines("zfs/zpool_get_dbpool.txt"))
    assert props["ashift"] == {"value": "12", "source": "local"}
    assert props["autoreplace"] == {"value": "on", "source": "local"}
    assert props["autotrim"] == {"value": "on", "source": "local"}
    assert props["capacity"] == {"value": "37", "source": "-"}
    assert props["health"] == {"value": "ONLINE", "source": "-"}
    assert props["feature@zstd_compress"]["value"] == "enabled"


def test_pool_properties_none_without_output():
    assert ZpoolProperties().process([]) is None


def test_dataset_properties_command():
    fact = ZfsDatasetProperties()
    assert str(fact.command(datasets=["dbpool/datastore", "dbpool/datastore/mysql"])) == (
        "zfs get -H -p -o name,property,value,source all dbpool/datastore dbpool/datastore/mysql || true"
    )
    assert str(fact.command(datasets="dbpool/datastore", recursive=True)) == (
        "zfs get -H -p -o name,property,value,source -r all dbpool/datastore || true"
    )


def test_dataset_properties_keep_values_as_bytes_and_sources():
    data = ZfsDatasetProperties().process(fixture_lines("zfs/zfs_get_mariadb.txt"))

    assert set(data) == {
        "dbpool/datastore",
        "dbpool/datastore/mysql",
        "dbpool/datastore/mysql-log",
    }
    mysql = data["dbpool/datastore/mysql"]
    assert mysql["recordsize"] == {"value": "16384", "source": "local"}
    assert mysql["compression"] == {
        "value": "lz4",
        "source": "inherited from dbpool/datastore",
    }
    assert mysql["casesensitivity"] == {"value": "sensitive", "source": "-"}
    assert data["dbpool/datastore"]["acltype"] == {"value": "posix", "source": "local"}
    assert data["dbpool/datastore"]["quota"] == {"value": "0", "source": "default"}


def test_module_parameters_live_and_persisted():
    fact = ZfsModuleParameters()
    command = str(fact.command(names=["zfs_arc_max", "zfs_prefetch_disable", "zfs_txg_timeout"]))
    assert "/sys/module/zfs/parameters/$p" in command
    assert "/etc/modprobe.d/zfs.conf" in command

    data = fact.process(
        [
            "@param zfs_arc_max 0",
            "@param zfs_prefetch_disable 1",
            "@conf",
            "# tuned by hand",
            "options zfs zfs_arc_max=8589934592 zfs_prefetch_disable=1",
            "options spl spl_hostid=0x1234",
        ]
    )
    assert data["live"] == {
        "zfs_arc_max": "0",
        "zfs_prefetch_disable": "1",
        "zfs_txg_timeout": None,  # no such file: module not loaded or no such parameter
    }
    assert data["persisted"] == {"zfs_arc_max": "8589934592", "zfs_prefetch_disable": "1"}
    assert data["conf"].startswith("# tuned by hand\n")


def test_module_parameters_without_conf_file():
    fact = ZfsModuleParameters()
    fact.command(names=["zfs_arc_max"])
    assert fact.process(["@param zfs_arc_max 4294967296"]) == {
        "live": {"zfs_arc_max": "4294967296"},
        "persisted": {},
        "conf": None,
    }
    assert ZfsModuleParameters.default() == {"live": {}, "persisted": {}, "conf": None}


def test_module_parameter_names_are_checked():
    import pytest

    with pytest.raises(ValueError):
        ZfsModuleParameters().command(names=["zfs_arc_max; reboot"])


def test_parse_modprobe_options_later_lines_win():
    assert parse_modprobe_options(
        ["options zfs a=1 b=2", "options zfs b=3  # comment", "#options zfs c=4"]
    ) == {"a": "1", "b": "3"}
