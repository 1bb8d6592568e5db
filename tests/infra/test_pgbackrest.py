"""The pgBackRest repository on a backup host (roles/pgbackrest.py): its dataset and the backup
host's own snapshots of it, every PostgreSQL replication group's stanza healthy with a recent
backup, the archive checked end to end (`pgbackrest check` forces a WAL switch on the primary and
waits for the segment to arrive), the backups scheduled, and its key to the PostgreSQL hosts good
for pgBackRest only."""

import json
import time

import pytest

from model.hostdata import HostConfig
from roles import pgbackrest
from validation import load_inventory_isolated

# tests/infra/conftest.py: only backup hosts are checked
host_roles = ("backup",)

# The newest backup may be this old: the default schedule takes one a day; a weekly one fits too.
NEWEST_BACKUP_DAYS = 8


@pytest.fixture(scope="module")
def fleet(request) -> list[HostConfig]:
    hosts = load_inventory_isolated(request.config.getoption("--inventory"))
    return [HostConfig.from_data(name, data) for name, data in hosts.items()]


@pytest.fixture(scope="module")
def stanzas(fleet):
    found = pgbackrest.stanzas(fleet)
    assert found, "the inventory has no PostgreSQL host: nothing to archive"
    return found


def pgbackrest_cmd(host, stanza, *args):
    return host.run(f"cd / && runuser -u postgres -- pgbackrest --stanza={stanza} " + " ".join(args))


def test_the_repository_is_its_dataset(host, cfg):
    dataset = f"{cfg.pool.name}/{pgbackrest.DATASET}"
    assert host.check_output(f"findmnt -n -o SOURCE -T {pgbackrest.REPOSITORY}") == dataset
    for prop, value in pgbackrest.DATASET_PROPERTIES.items():
        assert host.check_output(f"zfs get -H -o value {prop} {dataset}") == value, prop
    assert host.file(pgbackrest.REPOSITORY).user == pgbackrest.USER


def test_the_backup_host_snapshots_the_repository_and_pgbackrests_user_cannot_touch_them(host, cfg, fleet):
    """A PostgreSQL host can write and delete files in the repository (pgBackRest's remote
    protocol); the backup host's own snapshots of it, taken and pruned by its sanoid, undo that."""
    section = pgbackrest.repository_snapshots(cfg, fleet)
    dataset = section["dataset"]
    kept = {kind: n for kind, n in section["counts"].items() if n}
    taken = host.check_output(f"zfs list -H -t snapshot -o name -s createtxg -d 1 {dataset}").splitlines()
    for kind in kept:
        assert any(s.endswith(f"_{kind}") and "@autosnap_" in s for s in taken), (kind, taken)
    probe = host.run(f"cd / && runuser -u {pgbackrest.USER} -- zfs destroy {taken[-1]}")
    assert probe.rc != 0 and "permission denied" in (probe.stdout + probe.stderr).lower(), probe
    assert host.run(f"zfs list -H -o name {taken[-1]}").rc == 0


def test_every_stanza_is_ok_with_a_recent_backup(host, stanzas):
    for stanza in stanzas:
        out = pgbackrest_cmd(host, stanza, "--output=json", "info")
        assert out.rc == 0, out.stderr
        info = json.loads(out.stdout)[0]
        assert info["status"]["code"] == 0, (stanza, info["status"])
        newest = max(b["timestamp"]["stop"] for b in info["backup"])
        assert time.time() - newest < NEWEST_BACKUP_DAYS * 86400, (stanza, newest)
        assert any(b["type"] == "full" for b in info["backup"]), stanza


def test_the_archive_works_end_to_end(host, stanzas):
    for stanza in stanzas:
        out = pgbackrest_cmd(host, stanza, "check")
        assert out.rc == 0, out.stdout + out.stderr


def test_backups_are_scheduled(host):
    for kind in pgbackrest.TYPES:
        timer = host.service(pgbackrest.timer(kind))
        assert timer.is_enabled and timer.is_running, kind


def test_its_key_runs_pgbackrest_only(host, stanzas):
    """On a PostgreSQL host the backup host's key runs pgBackRest's remote, nothing else."""
    for members in stanzas.values():
        for member in members:
            out = host.run(
                f"cd / && runuser -u postgres -- {pgbackrest.SSH_WRAPPER} {member.replication_address} id"
            )
            assert out.rc != 0 and "refused" in out.stderr, (member.name, out.stdout, out.stderr)


def test_pgbackrests_user_can_change_nothing_that_lets_it_in(host):
    """Its remote protocol writes what postgres may write: the keys sshd reads for it, the ssh
    config and its wrapper, postgres' home (no ~/.ssh, ~/.bashrc of its own) are root's."""
    for path in (
        pgbackrest.ETC,
        pgbackrest.AUTHORIZED_KEYS,
        pgbackrest.SSH_CONFIG,
        pgbackrest.SSH_WRAPPER,
        pgbackrest.HOME,
    ):
        f = host.file(path)
        assert f.user == "root" and not f.mode & 0o022, (path, f.user, oct(f.mode))
    effective = host.check_output(
        "sshd -T -C user=postgres,host=probe,addr=10.0.0.1 | grep -i '^authorizedkeysfile'"
    )
    assert effective.split()[1:] == [pgbackrest.AUTHORIZED_KEYS], effective
    key = host.file(pgbackrest.KEY)
    assert (key.user, key.mode) == (pgbackrest.USER, 0o600)


def test_the_metrics_say_every_stanza_is_ok(host, stanzas):
    """What PgbackrestBackupFailing reads: written after every backup and by its own timer."""
    assert host.service(pgbackrest.METRICS_TIMER).is_enabled
    samples = {}
    for line in host.file(pgbackrest.METRICS).content_string.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            samples[series] = float(value)
    assert samples["dbzfs_pgbackrest_info_success"] == 1, samples
    for stanza in stanzas:
        assert samples[f'dbzfs_pgbackrest_stanza_ok{{stanza="{stanza}"}}'] == 1, samples
        newest = samples[f'dbzfs_pgbackrest_newest_backup_timestamp_seconds{{stanza="{stanza}"}}']
        assert time.time() - newest < NEWEST_BACKUP_DAYS * 86400, (stanza, newest)
