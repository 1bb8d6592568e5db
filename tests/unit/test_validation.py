"""Every validation rule, each with a bad inventory; all problems are reported at once."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from model.secrets import Secrets
from validation import ValidationError, check, validate

from tests.unit.conftest import REPO, by_id


def problems_for(fleet, secrets):
    return {(p.host, p.key) for p in validate(fleet, secrets)}


def test_valid_fleet_has_no_problems(fleet, secrets):
    assert validate(fleet, secrets) == []


def set_(host, **kv):
    def mutate(fleet):
        fleet[host].update(kv)

    return mutate


def drop_drive(host):
    def mutate(fleet):
        fleet[host]["drives"] = fleet[host]["drives"][:-1]

    return mutate


def duplicate_drive(fleet):
    fleet["db1"]["drives"] = fleet["db1"]["drives"][:23] + [fleet["db1"]["drives"][0]]


def shared_drive(fleet):
    fleet["db2"]["drives"] = fleet["db2"]["drives"][:23] + [fleet["db1"]["drives"][5]]


CASES = {
    "odd drive count for 2-way mirrors": (drop_drive("db1"), ("db1", "drives")),
    "pattern count odd": (set_("pg1", drive_count=23), ("pg1", "drive_count")),
    "3-way mirrors over 24 drives with 2 spares": (
        set_("db1", zpool_mirror_width=3, zpool_spares=2),
        ("db1", "drives"),
    ),
    "too many spares": (set_("db1", zpool_spares=23), ("db1", "zpool_spares")),
    "mirror width 1 is no mirror": (set_("db1", zpool_mirror_width=1), ("db1", "zpool_mirror_width")),
    "duplicate drive": (duplicate_drive, ("db1", "drives")),
    "drive in two hosts": (shared_drive, ("db2", "drives")),
    "not a by-id path": (set_("db1", drives=["/dev/nvme0n1"] + by_id("db1")[1:]), ("db1", "drives")),
    "a partition": (
        set_("db1", drives=by_id("db1")[:23] + ["/dev/disk/by-id/nvme-X-part1"]),
        ("db1", "drives"),
    ),
    "no drives at all": (set_("db1", drives=[]), ("db1", "drives")),
    "pattern without count": (set_("pg1", drive_count=None), ("pg1", "drive_count")),
    "wipe a drive of no pool": (
        set_("db1", wipe_drives=["/dev/disk/by-id/nvme-OTHER"]),
        ("db1", "wipe_drives"),
    ),
    "unknown engine": (set_("db1", engine="mysql"), ("db1", "engine")),
    "unknown role": (set_("db2", role="standby"), ("db2", "role")),
    "unknown workload": (set_("db2", workload="batch"), ("db2", "workload")),
    "replica without primary": (set_("db2", primary=None), ("db2", "primary")),
    "replica of a missing host": (set_("db2", primary="db9"), ("db2", "primary")),
    "replica of another engine": (set_("pg2", primary="db1", cluster="mariadb"), ("pg2", "primary")),
    "replica following itself": (set_("db2", primary="db2"), ("db2", "primary")),
    "replica of a replica": (
        set_("pg2", primary="db2", engine="mariadb", server_id=3, cluster="mariadb"),
        ("pg2", "primary"),
    ),
    "two primaries in one group": (set_("db2", role="primary", primary=None), ("db2", "role")),
    "primary set on a primary": (set_("db1", primary="db2"), ("db1", "primary")),
    "missing server_id": (set_("db1", server_id=None), ("db1", "server_id")),
    "duplicate server_id": (set_("db2", server_id=1), ("db2", "server_id")),
    "replication address missing": (set_("pg2", replication_address=None), ("pg2", "replication_address")),
    "replication address not an IP": (
        set_("pg2", replication_address="pg2.local"),
        ("pg2", "replication_address"),
    ),
    "recordsize not a power of two": (
        set_("db1", zfs_dataset_properties={"datastore/mysql": {"recordsize": "24k"}}),
        ("db1", "zfs_datasets['mariadb']['datastore/mysql']['recordsize']"),
    ),
    "recordsize too large": (
        set_("pg1", zfs_dataset_properties={"datastore/postgresql": {"recordsize": "32M"}}),
        ("pg1", "zfs_datasets['postgresql']['datastore/postgresql']['recordsize']"),
    ),
    "recordsize too small": (
        set_("pg1", zfs_dataset_properties={"datastore/postgresql": {"recordsize": 256}}),
        ("pg1", "zfs_datasets['postgresql']['datastore/postgresql']['recordsize']"),
    ),
    "unknown compression": (set_("pg1", zfs_compression="brotli"), ("pg1", "zfs_compression")),
    "zstd level out of range": (set_("pg1", zfs_compression="zstd-20"), ("pg1", "zfs_compression")),
    "bad primarycache": (
        set_("pg1", zfs_dataset_properties={"datastore/postgresql": {"primarycache": "some"}}),
        ("pg1", "zfs_datasets['postgresql']['datastore/postgresql']['primarycache']"),
    ),
    "override of an unknown dataset": (
        set_("pg1", zfs_dataset_properties={"datastore/pgdata": {"recordsize": "64k"}}),
        ("pg1", "zfs_dataset_properties"),
    ),
    "ashift too small": (set_("db1", zpool_ashift=8), ("db1", "zpool_ashift")),
    "ashift too large": (set_("db1", zpool_ashift=17), ("db1", "zpool_ashift")),
    "threshold too high": (set_("db1", zfs_capacity_threshold=97), ("db1", "zfs_capacity_threshold")),
    "threshold not a number": (set_("db1", zfs_capacity_threshold="80%"), ("db1", "zfs_capacity_threshold")),
    "zed_email that breaks zed.rc": (
        set_("db1", zed_email='dba@example.com" ; rm -rf /'),
        ("db1", "zed_email"),
    ),
    "zed_email two addresses": (set_("db1", zed_email="a@example.com b@example.com"), ("db1", "zed_email")),
    "collector name with a flag in it": (
        set_("db1", node_exporter_disabled_collectors=["systemd --web.listen-address=0.0.0.0:9100"]),
        ("db1", "node_exporter_disabled_collectors"),
    ),
    "textfile collector disabled": (
        set_("db1", node_exporter_disabled_collectors=["textfile"]),
        ("db1", "node_exporter_disabled_collectors"),
    ),
    "zfs collector disabled": (
        set_("db1", node_exporter_disabled_collectors=["zfs"]),
        ("db1", "node_exporter_disabled_collectors"),
    ),
    "full_page_writes off with small records": (
        set_(
            "pg1",
            zfs_dataset_properties={"datastore/postgresql": {"recordsize": "4k"}},
            db_settings={"full_page_writes": "off"},
        ),
        ("pg1", "db_settings['full_page_writes']"),
    ),
    "misspelt key": (set_("db1", zpool_spare=2), ("db1", "zpool_spare")),
    "bad hardware": (set_("db1", hardware={"ram_bytes": "4G", "cpus": 2}), ("db1", "hardware['ram_bytes']")),
    "user without password secret": (
        set_("db1", db_users=[{"name": "app"}]),
        ("db1", "db_users[0].password_secret"),
    ),
    "user secret missing": (
        set_("db1", db_users=[{"name": "app", "password_secret": "nope"}]),
        ("db1", "db_users[0].password_secret"),
    ),
    "bad client network": (set_("pg1", db_client_networks=["10.0.0.0/33"]), ("pg1", "db_client_networks")),
    "bad pool name": (set_("db1", zpool_name="mirror"), ("db1", "zpool_name")),
    "IPv6 client network for MariaDB": (
        set_("db1", db_client_networks=["2001:db8::/64"]),
        ("db1", "db_client_networks"),
    ),
    "privileges on a PostgreSQL user": (
        set_(
            "pg1",
            databases=[{"name": "app"}],
            db_users=[{"name": "app", "password_secret": "x", "privileges": "SELECT"}],
        ),
        ("pg1", "db_users[0].privileges"),
    ),
    "owner on a MariaDB user": (
        set_(
            "db1",
            databases=[{"name": "app"}],
            db_users=[{"name": "app", "password_secret": "x", "database": "app", "owner": True}],
        ),
        ("db1", "db_users[0].owner"),
    ),
    "PostgreSQL user's own database not declared": (
        set_("pg1", db_users=[{"name": "app", "password_secret": "x"}]),
        ("pg1", "db_users[0].database"),
    ),
    "MariaDB user's database not declared": (
        set_("db1", db_users=[{"name": "app", "password_secret": "x", "database": "nodb"}]),
        ("db1", "db_users[0].database"),
    ),
}


def test_ipv6_single_address_for_mariadb_and_networks_for_postgresql_pass(fleet, secrets):
    fleet["db1"]["db_client_networks"] = ["2001:db8::7/128", "10.1.0.0/16"]
    fleet["pg1"]["db_client_networks"] = ["2001:db8::/64"]
    assert validate(fleet, secrets) == []


def test_declared_users_pass(fleet):
    fleet["db1"].update(
        databases=[{"name": "app"}],
        db_users=[
            {"name": "app", "password_secret": "app_pw", "database": "app", "privileges": "SELECT"},
            {"name": "monitor", "password_secret": "app_pw"},
        ],
    )
    fleet["pg1"].update(
        databases=[{"name": "app"}],
        db_users=[
            {"name": "app", "password_secret": "app_pw", "owner": True},
            {"name": "ro", "password_secret": "app_pw", "database": "app"},
        ],
    )
    secrets = Secrets({"replication_password": "r" * 24, "app_pw": "a" * 24}, "test")
    assert validate(fleet, secrets) == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_rule(case, fleet, secrets):
    mutate, expected = CASES[case]
    mutate(fleet)
    problems = validate(fleet, secrets)
    assert expected in {(p.host, p.key) for p in problems}, [str(p) for p in problems]
    for p in problems:  # every message names host, key and a fix
        assert str(p).startswith(f"{p.host}: {p.key} = ")
        assert "Fix: " in str(p)


def test_missing_replication_secret(fleet):
    problems = validate(fleet, Secrets({}, "nowhere"))
    assert {(p.host, p.key) for p in problems} == {
        ("db1", "secrets.replication_password"),
        ("pg1", "secrets.replication_password"),
    }
    assert "DBZFS_SECRET_REPLICATION_PASSWORD" in str(problems[0])


def test_no_replicas_need_no_replication_secret(fleet):
    del fleet["db2"], fleet["pg2"]
    assert validate(fleet, Secrets({}, "nowhere")) == []


def test_all_problems_reported_at_once(fleet, secrets):
    fleet["db1"].update(engine="mysql", zpool_ashift=20)
    fleet["pg2"].update(role="standby")
    fleet["pg1"].update(zfs_compression="brotli")
    with pytest.raises(ValidationError) as err:
        check(fleet, secrets)
    keys = {(p.host, p.key) for p in err.value.problems}
    assert {("db1", "engine"), ("db1", "zpool_ashift"), ("pg2", "role"), ("pg1", "zfs_compression")} <= keys
    assert "no host was changed" in str(err.value)


def test_lets_encrypt_layout_is_expressible(fleet, secrets):
    fleet["db1"].update(zpool_spares=2, zpool_ashift=13)
    assert validate(fleet, secrets) == []


def run_cli(inventory, env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBZFS_")}
    env.update(env_extra, DBZFS_SECRETS_FILE="/nonexistent/secrets.yml")
    return subprocess.run(
        [sys.executable, "-m", "validation", str(inventory)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_accepts_the_example_fleet():
    result = run_cli(
        "inventories/prod.py",
        {
            "DBZFS_SECRET_REPLICATION_PASSWORD": "x",
            "DBZFS_SECRET_BOULDER_PASSWORD": "y",
            "DBZFS_SECRET_HEAP_PASSWORD": "z",
        },
    )
    assert result.returncode == 0, result.stderr
    assert "6 host(s) OK" in result.stdout


def test_cli_rejects_a_bad_inventory_file(tmp_path):
    inventory = tmp_path / "bad.py"
    inventory.write_text(
        "mariadb = [\n"
        "  ('db1', {'engine': 'mariadb', 'role': 'primary', 'server_id': 1,\n"
        "           'drive_pattern': 'nvme-X_*', 'drive_count': 23}),\n"
        "  ('db2', {'engine': 'mariadb', 'role': 'replica', 'primary': 'db7', 'server_id': 1,\n"
        "           'drive_pattern': 'nvme-Y_*', 'drive_count': 24}),\n"
        "]\n"
    )
    result = run_cli(inventory, {})
    assert result.returncode == 2  # refused
    err = result.stderr
    assert "db1: drive_count = 23" in err
    assert "db2: primary = 'db7': no such host" in err
    assert "db2: server_id = 1: also used by db1" in err
    assert "replication_password" in err
    assert "Traceback" not in err


# --- zfs_install / zfs_module_repository ----------------------------------------------------

PUBLIC_KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ...\n-----END PGP PUBLIC KEY BLOCK-----\n"


def repo_data(tmp_path, **over):
    key = tmp_path / "zfs-modules.asc"
    key.write_text(PUBLIC_KEY)
    return {"url": "http://apt.example.net/zfs-modules/", "suite": "bookworm", "key_file": str(key), **over}


def prebuilt_problems(fleet, secrets, **data):
    fleet["db1"].update(data)
    return [(p.host, p.key, p.message) for p in validate(fleet, secrets)]


def test_prebuilt_with_a_repository_is_valid(fleet, secrets, tmp_path):
    assert (
        prebuilt_problems(fleet, secrets, zfs_install="prebuilt", zfs_module_repository=repo_data(tmp_path))
        == []
    )


@pytest.mark.parametrize(
    "data, key, message",
    [
        ({"zfs_install": "source"}, "zfs_install", "not a way to install ZFS"),
        ({"zfs_install": "prebuilt"}, "zfs_module_repository", 'missing: zfs_install "prebuilt" installs'),
    ],
)
def test_zfs_install_mistakes_name_the_key(fleet, secrets, data, key, message):
    found = prebuilt_problems(fleet, secrets, **data)
    assert [(h, k) for h, k, _ in found] == [("db1", key)], found
    assert message in found[0][2]


def test_roll_primary_is_switchover_or_in_place(fleet, secrets):
    assert prebuilt_problems(fleet, secrets, roll_primary="in_place") == []
    found = prebuilt_problems(fleet, secrets, roll_primary="restart")
    assert found == [("db1", "roll_primary", "not a way to roll a primary")]


def test_a_repository_without_prebuilt_is_a_mistake(fleet, secrets, tmp_path):
    found = prebuilt_problems(fleet, secrets, zfs_module_repository=repo_data(tmp_path))
    assert found == [("db1", "zfs_module_repository", 'set, but zfs_install is "dkms": nothing would use it')]


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("url", "ftp://x/", "not an http(s) URL"),
        ("suite", "Bookworm 12", "not a Debian suite name"),
        ("key_file", "/nonexistent/k.asc", "cannot be read on this machine (No such file or directory)"),
        ("mirror", "x", "unknown field"),
    ],
)
def test_repository_field_mistakes_name_the_field(fleet, secrets, tmp_path, field, value, message):
    repo = repo_data(tmp_path, **{field: value})
    found = prebuilt_problems(fleet, secrets, zfs_install="prebuilt", zfs_module_repository=repo)
    assert found == [("db1", f"zfs_module_repository[{field!r}]", message)]


def test_a_private_key_is_not_a_public_key(fleet, secrets, tmp_path):
    repo = repo_data(tmp_path)
    Path(repo["key_file"]).write_text("-----BEGIN PGP PRIVATE KEY BLOCK-----\n")
    found = prebuilt_problems(fleet, secrets, zfs_install="prebuilt", zfs_module_repository=repo)
    assert found == [("db1", "zfs_module_repository['key_file']", "not an armored OpenPGP public key")]
