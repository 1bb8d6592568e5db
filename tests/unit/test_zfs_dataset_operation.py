import logging

import pytest
from pyinfra.api import OperationValueError

from facts.zfs import ZfsDatasetProperties, ZfsModuleParameters
from operations import zfs

from tests.unit.fact_stubs import fixture_lines, run_operation

MARIADB = ZfsDatasetProperties().process(fixture_lines("zfs/zfs_get_mariadb.txt"))

# group_data/all.py's MariaDB datasets, as declared.
PARENT = {
    "mountpoint": "/datastore",
    "atime": "off",
    "xattr": "sa",
    "dnodesize": "auto",
    "acltype": "posixacl",
    "recordsize": "128k",
    "primarycache": "metadata",
    "compression": "lz4",
}
MYSQL = {
    "mountpoint": "/datastore/mysql",
    "recordsize": "16k",
    "logbias": "throughput",
    "redundant_metadata": "most",
    "primarycache": "metadata",
}


def facts(data=MARIADB):
    return {ZfsDatasetProperties: lambda datasets: {d: data[d] for d in datasets if d in data}}


def with_value(dataset, prop, value, source="local"):
    data = {name: dict(props) for name, props in MARIADB.items()}
    data[dataset][prop] = {"value": value, "source": source}
    return data


def test_create_with_properties():
    commands, _ = run_operation(zfs.dataset, facts({}), "dbpool/datastore", properties=PARENT)
    assert commands == [
        "zfs create -o mountpoint=/datastore -o atime=off -o xattr=sa -o dnodesize=auto"
        " -o acltype=posixacl -o recordsize=128k -o primarycache=metadata -o compression=lz4"
        " dbpool/datastore"
    ]


def test_create_with_parents_and_extra_props():
    commands, _ = run_operation(zfs.dataset, facts({}), "dbpool/a/b", create_parents=True, recordsize="16k")
    assert commands == ["zfs create -p -o recordsize=16k dbpool/a/b"]


def test_second_run_is_noop():
    commands, host = run_operation(zfs.dataset, facts(), "dbpool/datastore/mysql", properties=MYSQL)
    assert commands == []
    assert host.noops == ["dataset dbpool/datastore/mysql has the declared properties"]


def test_parent_noop_with_aliases_and_sizes():
    # acltype=posixacl is reported as posix, 128k as 131072.
    commands, _ = run_operation(zfs.dataset, facts(), "dbpool/datastore", properties=PARENT)
    assert commands == []


@pytest.mark.parametrize("declared", ["16k", "16K", "16KiB", 16384, "16384"])
def test_recordsize_spellings_are_noop(declared):
    commands, _ = run_operation(
        zfs.dataset, facts(), "dbpool/datastore/mysql", properties={"recordsize": declared}
    )
    assert commands == []


@pytest.mark.parametrize("declared, reported", [("zstd-3", "zstd"), ("zstd", "zstd-3")])
def test_zstd_default_level_is_noop(declared, reported):
    data = with_value("dbpool/datastore", "compression", reported)
    commands, _ = run_operation(
        zfs.dataset, facts(data), "dbpool/datastore", properties={"compression": declared}
    )
    assert commands == []


def test_zstd_level_change_is_set():
    data = with_value("dbpool/datastore", "compression", "zstd")
    commands, _ = run_operation(
        zfs.dataset, facts(data), "dbpool/datastore", properties={"compression": "zstd-9"}
    )
    assert commands == ["zfs set compression=zstd-9 dbpool/datastore"]


def test_only_differing_properties_are_set():
    data = with_value("dbpool/datastore/mysql", "recordsize", "131072")
    data["dbpool/datastore/mysql"]["logbias"] = {"value": "latency", "source": "default"}
    commands, _ = run_operation(zfs.dataset, facts(data), "dbpool/datastore/mysql", properties=MYSQL)
    assert commands == ["zfs set recordsize=16k logbias=throughput dbpool/datastore/mysql"]


def test_inherited_value_equal_to_declared_is_left_inherited():
    # compression is inherited from dbpool/datastore with the declared value.
    commands, _ = run_operation(
        zfs.dataset, facts(), "dbpool/datastore/mysql", properties={"compression": "lz4"}
    )
    assert commands == []


def test_inherited_value_that_differs_is_set_locally():
    commands, _ = run_operation(
        zfs.dataset, facts(), "dbpool/datastore/mysql", properties={"compression": "zstd"}
    )
    assert commands == ["zfs set compression=zstd dbpool/datastore/mysql"]


def test_create_only_property_is_reported_not_set(caplog):
    caplog.set_level(logging.WARNING, logger="pyinfra")
    commands, host = run_operation(
        zfs.dataset,
        facts(),
        "dbpool/datastore/mysql",
        properties={"casesensitivity": "insensitive", "recordsize": "32k"},
    )
    assert commands == ["zfs set recordsize=32k dbpool/datastore/mysql"]
    expected = (
        "dataset dbpool/datastore/mysql: casesensitivity is sensitive, declared insensitive; "
        "casesensitivity is fixed when a dataset is created and is left as it is"
    )
    assert expected in host.noops
    assert f"[db1.example.net] {expected}" in [r.getMessage() for r in caplog.records]


def test_create_only_property_matching_is_silent():
    commands, host = run_operation(zfs.dataset, facts(), "dbpool/datastore", properties={"utf8only": "off"})
    assert commands == []
    assert host.noops == ["dataset dbpool/datastore has the declared properties"]


def test_values_are_quoted():
    commands, _ = run_operation(
        zfs.dataset, facts(), "dbpool/datastore", properties={"com.example:note": "a b"}
    )
    assert commands == ["zfs set 'com.example:note=a b' dbpool/datastore"]


def test_read_only_property_is_an_error():
    with pytest.raises(OperationValueError, match="read-only properties"):
        run_operation(zfs.dataset, facts(), "dbpool/datastore", properties={"used": "1"})


def test_absent():
    commands, _ = run_operation(zfs.dataset, facts(), "dbpool/datastore/mysql-log", present=False)
    assert commands == ["zfs destroy dbpool/datastore/mysql-log"]
    commands, host = run_operation(zfs.dataset, facts(), "dbpool/nothing", present=False)
    assert commands == []
    assert host.noops == ["dataset dbpool/nothing is already absent"]


# --- module parameters ------------------------------------------------------------------------

CONF = [
    "# Managed by the ZFS role: edits are overwritten on the next deploy.",
    "options zfs zfs_arc_max=8589934592 zfs_prefetch_disable=1",
]
PARAMS = {"zfs_prefetch_disable": 1, "zfs_arc_max": 8589934592}


def module_facts(live, conf_lines):
    def fact(names, path):
        assert names == ["zfs_arc_max", "zfs_prefetch_disable"]
        assert path == "/etc/modprobe.d/zfs.conf"
        instance = ZfsModuleParameters()
        instance.command(names=names, path=path)
        output = [f"@param {k} {v}" for k, v in live.items()]
        if conf_lines is not None:
            output += ["@conf", *conf_lines]
        return instance.process(output)

    return {ZfsModuleParameters: fact}


def test_module_parameters_written_and_applied():
    commands, _ = run_operation(
        zfs.module_parameters,
        module_facts({"zfs_arc_max": "0", "zfs_prefetch_disable": "0"}, None),
        PARAMS,
    )
    assert commands == [
        "printf '%s\\n' '# Managed by the ZFS role: edits are overwritten on the next deploy.'"
        " 'options zfs zfs_arc_max=8589934592 zfs_prefetch_disable=1' > /etc/modprobe.d/zfs.conf",
        "echo 8589934592 > /sys/module/zfs/parameters/zfs_arc_max",
        "echo 1 > /sys/module/zfs/parameters/zfs_prefetch_disable",
    ]


def test_module_parameters_noop_when_persisted_and_live():
    commands, host = run_operation(
        zfs.module_parameters,
        module_facts({"zfs_arc_max": "8589934592", "zfs_prefetch_disable": "1"}, CONF),
        PARAMS,
    )
    assert commands == []
    assert host.noops == ["ZFS module parameters are persisted and live"]


def test_module_parameters_live_only_drift():
    commands, _ = run_operation(
        zfs.module_parameters,
        module_facts({"zfs_arc_max": "4294967296", "zfs_prefetch_disable": "1"}, CONF),
        PARAMS,
    )
    assert commands == ["echo 8589934592 > /sys/module/zfs/parameters/zfs_arc_max"]


def test_module_parameters_without_loaded_module_only_writes_file():
    commands, host = run_operation(zfs.module_parameters, module_facts({}, None), PARAMS)
    assert len(commands) == 1 and commands[0].startswith("printf")
    assert "zfs module not loaded: zfs_arc_max=8589934592 applies when it loads" in host.noops


def test_module_parameters_live_only_when_file_is_someone_elses():
    commands, _ = run_operation(
        zfs.module_parameters,
        module_facts({"zfs_arc_max": "0", "zfs_prefetch_disable": "1"}, ["options zfs x=1"]),
        PARAMS,
        write_file=False,
    )
    assert commands == ["echo 8589934592 > /sys/module/zfs/parameters/zfs_arc_max"]
