"""The binlog streams on a backup host (roles/binlogs.py): each MariaDB group's binlogs streamed
from its declared primary, as the server has them, into the binlogs dataset; the stream's account
can read binlogs and nothing else."""

import json
import shlex

import pytest

from model.hostdata import HostConfig
from roles import binlogs
from validation import load_inventory_isolated

host_roles = ("backup",)


@pytest.fixture(scope="module")
def sources(request) -> dict[str, HostConfig]:
    hosts = load_inventory_isolated(request.config.getoption("--inventory"))
    return binlogs.sources([HostConfig.from_data(name, data) for name, data in hosts.items()])


def as_stream_account(host, source: HostConfig, sql: str):
    return host.run(
        f"mariadb --defaults-extra-file={binlogs.CLIENT} -h {source.replication_address} -N -B -e "
        + shlex.quote(sql)
    )


def test_the_binlogs_dataset(host, cfg, sources):
    assert sources, "the inventory has MariaDB hosts: their binlogs are streamed"
    dataset = f"{cfg.pool.name}/{binlogs.DATASET}"
    props = dict(
        line.split("\t")
        for line in host.check_output(
            f"zfs get -H -o property,value {','.join(binlogs.DATASET_PROPERTIES)},mounted {dataset}"
        ).splitlines()
    )
    assert props == {**binlogs.DATASET_PROPERTIES, "mounted": "yes"}


def test_every_group_streams_from_its_primary(host, sources):
    for cluster, source in sources.items():
        unit = host.service(binlogs.unit_name(cluster))
        assert unit.is_running and unit.is_enabled, cluster
        config = json.loads(host.file(binlogs.config_path(cluster)).content_string)
        assert (config["host"], config["address"]) == (source.name, str(source.replication_address))


def test_the_streamed_files_are_the_servers(host, sources):
    """Every binlog file the primary holds from the oldest one streamed on is here, the newest
    too, and every closed one has the server's size (the current one grows while it is read)."""
    for cluster, source in sources.items():
        shown = as_stream_account(host, source, "SHOW BINARY LOGS")
        assert shown.rc == 0, shown.stderr
        on_server = dict(line.split("\t")[:2] for line in shown.stdout.splitlines())
        directory = f"{binlogs.DIRECTORY}/{cluster}/{source.name}"
        held = {
            name: int(size)
            for name, size in (
                line.split()
                for line in host.check_output(f"cd {directory} && stat -c '%n %s' *.[0-9]*").splitlines()
            )
        }
        names = sorted(on_server)
        assert names[-1] in held, (names, sorted(held))
        assert set(names[names.index(min(held)) if min(held) in names else 0 :]) <= set(held)
        for name in names[:-1]:
            if name in held:
                assert held[name] == int(on_server[name]), (name, held[name], on_server[name])


def test_the_stream_account_reads_binlogs_only(host, sources):
    for source in sources.values():
        write = as_stream_account(host, source, "CREATE DATABASE dbzfs_binlog_probe")
        assert write.rc != 0 and "denied" in write.stderr.lower(), write
        read = as_stream_account(host, source, "SELECT count(*) FROM mysql.user")
        assert read.rc != 0 and "denied" in read.stderr.lower(), read


def test_the_metrics_say_streaming_without_a_gap(host, sources):
    for cluster in sources:
        text = host.file(f"{binlogs.METRICS_DIR}/dbzfs_binlog_{cluster}.prom").content_string
        values = {
            line.split("{")[0]: line.rsplit(" ", 1)[1]
            for line in text.splitlines()
            if not line.startswith("#")
        }
        assert values["dbzfs_binlog_streaming"] == "1" and values["dbzfs_binlog_gap"] == "0", text
