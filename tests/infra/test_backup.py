"""The backup role's result on a backup host (role = "backup"): its pool, the copies kept unmounted
and read-only, the pulls scheduled and pruned, a copy of every host that takes snapshots no older
than backup_max_age_hours, and the key it pulls with able to send and nothing else."""

import shlex
import time

import pytest

from facts.zfs import parse_allowed
from model.hostdata import HostConfig
from roles import backup, snapshots
from validation import load_inventory_isolated

# tests/infra/conftest.py: only backup hosts are checked
host_roles = ("backup",)


@pytest.fixture(scope="module")
def fleet(request) -> list[HostConfig]:
    hosts = load_inventory_isolated(request.config.getoption("--inventory"))
    return [HostConfig.from_data(name, data) for name, data in hosts.items()]


def takers(fleet):
    databases = backup.database_hosts(fleet)
    return [
        h
        for h in databases
        if snapshots.takes_snapshots(
            h, [m for m in databases if (m.engine, m.cluster) == (h.engine, h.cluster)]
        )
    ]


def as_backup_user(host, source: HostConfig, command: str):
    return host.run(
        f"ssh -i {backup.KEY} -o BatchMode=yes -o UserKnownHostsFile={backup.KNOWN_HOSTS} "
        f"-o StrictHostKeyChecking=yes -o ConnectTimeout=20 {backup.USER}@{source.replication_address} "
        + shlex.quote(command)
    )


def copies(host, dataset):
    """[(name, guid, creation)] of a copy's snapshots, oldest first."""
    out = host.check_output(f"zfs list -Hp -t snapshot -o name,guid,creation -s createtxg -d 1 {dataset}")
    return [tuple(line.split("\t")) for line in out.splitlines()]


def test_the_pool_is_online(host, cfg):
    assert host.check_output(f"zpool list -H -o health {cfg.pool.name}") == "ONLINE"


def test_the_copies_are_never_mounted_and_read_only(host, cfg):
    root = backup.copies_root(cfg)
    props = host.check_output(f"zfs get -H -o value canmount,mountpoint,readonly {root}").split()
    assert props == ["off", "none", "on"]
    mounted = host.check_output(f"zfs list -H -o mounted -r {root}").split()
    assert set(mounted) == {"no"}


def test_pulls_and_pruning_are_scheduled(host):
    for unit in (backup.TIMER, "sanoid.timer"):
        timer = host.service(unit)
        assert timer.is_enabled and timer.is_running, unit
    conf = host.file(backup.SANOID_CONF).content_string
    assert "autosnap = no" in conf and "autoprune = yes" in conf


def test_the_last_pull_got_every_copy(host):
    metrics = host.file(backup.METRICS).content_string
    assert backup.SUCCEEDED in metrics.splitlines(), metrics


def test_every_host_that_takes_snapshots_has_recent_copies(host, cfg, fleet):
    now = time.time()
    for source in takers(fleet):
        for role in ("data", "log"):
            held = copies(host, backup.copy_of(cfg, source, role))
            assert held, f"no copy of {source.name}'s {role} dataset"
            age = now - int(held[-1][2])
            assert age < cfg.backup_max_age_hours * 3600, f"{source.name} {role}: newest copy {age:.0f} s old"


def test_the_newest_copy_is_a_snapshot_the_source_holds(host, cfg, fleet):
    for source in takers(fleet):
        name, guid, _ = copies(host, backup.copy_of(cfg, source, "data"))[-1]
        dataset = source.dataset_name(source.data_dataset)
        out = as_backup_user(host, source, f"zfs list -Hp -t snapshot -o guid -d 1 {dataset}")
        assert out.rc == 0, out.stderr
        assert guid in out.stdout.split(), f"{name} (guid {guid}) is not on {source.name}"


def test_the_key_may_send_and_nothing_else(host, fleet):
    for source in backup.database_hosts(fleet):
        parent = source.dataset_name(source.parent_dataset)
        allowed = as_backup_user(host, source, f"zfs allow {parent}")
        assert allowed.rc == 0, f"{source.name}: {allowed.stderr}"
        assert parse_allowed(allowed.stdout.splitlines()).get(backup.USER) == backup.PERMISSIONS
        changed = as_backup_user(
            host, source, f"zfs set dbzfs:probe=1 {source.dataset_name(source.data_dataset)}"
        )
        assert changed.rc != 0 and "permission denied" in changed.stderr, f"{source.name}: {changed}"
