import copy
import runpy
import shutil
from pathlib import Path

import pytest

from model.secrets import Secrets

from tests.unit.real_servers import postgres_scratch

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = {
    k: v for k, v in runpy.run_path(str(REPO / "group_data" / "all.py")).items() if not k.startswith("_")
}
GIB = 1024**3


def host_data(**overrides):
    """group_data/all.py defaults plus overrides: what pyinfra would hand a host."""
    data = copy.deepcopy(DEFAULTS)
    data.update(overrides)
    return data


def backup_data(**overrides):
    """A backup host (role "backup", no engine: roles/backup.py) with 4 drives."""
    data = {
        "role": "backup",
        "hardware": {"ram_bytes": 2 * GIB, "cpus": 1},
        "replication_address": "10.99.0.51",
        "drive_pattern": "nvme-TEST_backup1_*",
        "drive_count": 4,
    }
    return host_data(**{**data, **overrides})


def by_id(host, n=24):
    return [f"/dev/disk/by-id/nvme-TEST_{host}_{i:02d}" for i in range(n)]


@pytest.fixture
def fleet():
    """A valid fleet: MariaDB primary + replica, PostgreSQL primary + standby."""
    hw = {"ram_bytes": 4 * GIB, "cpus": 2}
    return {
        "db1": host_data(
            engine="mariadb",
            role="primary",
            server_id=1,
            hardware=hw,
            replication_address="10.99.0.11",
            drives=by_id("db1"),
        ),
        "db2": host_data(
            engine="mariadb",
            role="replica",
            primary="db1",
            server_id=2,
            hardware=hw,
            replication_address="10.99.0.12",
            drives=by_id("db2"),
        ),
        "pg1": host_data(
            engine="postgresql",
            role="primary",
            hardware=hw,
            replication_address="10.99.0.21",
            drive_pattern="nvme-TEST_pg1_*",
            drive_count=24,
        ),
        "pg2": host_data(
            engine="postgresql",
            role="replica",
            primary="pg1",
            hardware=hw,
            replication_address="10.99.0.22",
            drive_pattern="nvme-TEST_pg2_*",
            drive_count=24,
        ),
    }


@pytest.fixture
def secrets():
    return Secrets({"replication_password": "s3cret-rep", "app_password": "s3cret-app"}, "test")


@pytest.fixture
def postgres_dir():
    """A scratch directory under /tmp the postgres account owns, removed after the test."""
    path = postgres_scratch("dbzfs-test-")
    yield path
    shutil.rmtree(path)


@pytest.fixture(scope="session")
def ssh_keys():
    """Two new OpenSSH ed25519 private keys, as lab/control.py makes them: the backup host's
    (backup_ssh_private_key) and the PostgreSQL hosts' to the pgBackRest repository."""
    from lab.control import ssh_private_key

    return ssh_private_key("test-backup"), ssh_private_key("test-pgbackrest")
