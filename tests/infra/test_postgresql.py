"""The postgresql role's result on a live server: what the running server reports (SHOW,
pg_stat_replication, pg_replication_slots, pg_stat_wal_receiver, pg_hba_file_rules, its roles and
databases), where its files are on ZFS, and the systemd ordering."""

import re

import pytest

from facts.hardware import HostHardware
from facts.postgresql import (
    PostgresqlDatabases,
    PostgresqlReplicationSlots,
    PostgresqlRoles,
    PostgresqlWalReceiver,
)
from model import secrets
from model.hostdata import HostConfig
from operations.postgresql import password_matches, slot_name
from roles import pgbackrest, render
from roles.postgresql import PASSFILE, REPLICATION_USER, cluster, database_grants

from tests.infra.conftest import _inventory
from tests.infra.probe import fact

engine = "postgresql"  # tests/infra/conftest.py: only hosts with this engine are checked


def psql(host, sql):
    out = host.run("runuser -u postgres -- psql -AtX -c %s", sql)
    assert out.rc == 0, f"psql -c {sql!r}: rc {out.rc}: {out.stderr}"
    return out.stdout.strip()


@pytest.fixture(scope="module")
def members(cfg, request):
    # conftest's cached copy: loading an inventory imports pyinfra_cli (gevent), which breaks
    # imports once testinfra's paramiko threads run.
    return [c for c in fleet(request) if c.engine == cfg.engine and c.cluster == cfg.cluster]


def fleet(request):
    hosts = _inventory(request.config.getoption("--inventory"))
    return [HostConfig.from_data(n, d) for n, d in hosts.items()]


@pytest.fixture(scope="module")
def paths(cfg):
    return render.postgresql_paths(cfg)


@pytest.fixture(scope="module")
def expected(host, cfg, members, request):
    """The settings the template got: sized for the live hardware, with the host's overrides."""
    hw = fact(host, HostHardware)
    archive = pgbackrest.archive_settings(cfg, fleet(request))
    sized = cfg.sizing(ram_bytes=hw["ram_bytes"], cpus=hw["cpus"])
    context = render.postgresql_context(cfg, sized, members, archive)
    settings = {**context["s"], **context["extra"]}
    return {k: v[1:-1].replace("''", "'") if v.startswith("'") else v for k, v in settings.items()}


def test_server_running(host, cfg):
    assert host.service(cluster(cfg).unit).is_running
    assert psql(host, "SELECT 1") == "1"


@pytest.mark.parametrize("setting", ["full_page_writes", "wal_init_zero", "wal_recycle"])
def test_zfs_makes_these_unnecessary(host, setting):
    assert psql(host, f"SHOW {setting}") == "off"


def test_data_checksums_on(host):
    # initdb --data-checksums on the primary; a standby's pg_basebackup copies its pages as they are.
    assert psql(host, "SHOW data_checksums") == "on"


def test_sized_and_declared_settings_are_live(host, expected):
    wrong = {}
    for name, value in expected.items():
        live = psql(host, f"SHOW {name}")
        if live != value:
            wrong[name] = f"live {live}, expected {value}"
    assert not wrong, wrong


def test_no_restart_pending(host):
    assert psql(host, "SELECT string_agg(name, ',') FROM pg_settings WHERE pending_restart") == ""


def test_data_directory_on_its_dataset(host, cfg, paths):
    assert psql(host, "SHOW data_directory") == paths["data_directory"]
    source = host.check_output("findmnt -n -o SOURCE,FSTYPE -T %s", paths["data_directory"]).split()
    assert source == [cfg.dataset_name(cfg.data_dataset), "zfs"]
    assert host.file(paths["data_directory"]).mode == 0o700
    assert host.file(paths["data_directory"]).user == "postgres"


def test_wal_on_its_dataset(host, cfg, paths):
    pg_wal = host.file(f"{paths['data_directory']}/pg_wal")
    assert pg_wal.is_symlink and pg_wal.linked_to == paths["wal_directory"]
    source = host.check_output("findmnt -n -o SOURCE,FSTYPE -T %s", paths["wal_directory"]).split()
    assert source == [cfg.dataset_name(cfg.log_dataset), "zfs"]
    segments = [
        n
        for n in host.check_output("ls %s", paths["wal_directory"]).split()
        if re.fullmatch(r"[0-9A-F]{24}", n)
    ]
    assert segments, f"no WAL segment in {paths['wal_directory']}"


def test_debian_default_directory_never_created(host, cfg):
    assert not host.file(f"/var/lib/postgresql/{cfg.server_version}/main").exists
    # What postgresql-common's postinst asks (createcluster.conf and its createcluster.d/).
    show = "pg_conftool /etc/postgresql-common/createcluster.conf show -bs create_main_cluster"
    assert host.check_output(show) == "off"


def test_starts_after_the_zfs_mounts(host, cfg):
    props = dict(
        line.split("=", 1)
        for line in host.check_output(
            "systemctl show -p After -p Requires -p RequiresMountsFor %s", cluster(cfg).unit
        ).splitlines()
    )
    assert "zfs-mount.service" in props["After"].split()
    assert "zfs-mount.service" in props["Requires"].split()
    mounts = props["RequiresMountsFor"].split()
    for ds in (cfg.data_dataset, cfg.log_dataset):
        assert cfg.mountpoint(ds) in mounts


def test_replication_role_least_privilege(host):
    roles = fact(host, PostgresqlRoles)
    assert roles is not None, "the server does not accept connections"
    replicator = roles[REPLICATION_USER]
    assert replicator["login"] and replicator["replication"] and not replicator["superuser"]
    password = secrets.load().get(secrets.REPLICATION_PASSWORD)
    assert password_matches(password, replicator), "replicator's password is not the secret's"


def test_replication_allowed_only_from_the_group(host, cfg, members):
    rows = psql(
        host,
        "SELECT array_to_string(database, ','), array_to_string(user_name, ','), "
        "coalesce(address, ''), coalesce(netmask, '') FROM pg_hba_file_rules "
        "WHERE 'replication' = ANY(database) ORDER BY line_number",
    )
    allowed = [r.split("|") for r in rows.splitlines()]
    peers = sorted(m.replication_address for m in members if m.name != cfg.name and m.replication_address)
    assert sorted(a for _, _, a, _ in allowed) == peers
    assert all(u == REPLICATION_USER and m == "255.255.255.255" for _, u, _, m in allowed), allowed


def test_application_roles_and_databases(host, cfg):
    roles = fact(host, PostgresqlRoles)
    databases = fact(host, PostgresqlDatabases)
    loaded = secrets.load()
    for user in cfg.db_users:
        r = roles.get(user["name"])
        assert r and r["login"] and not r["superuser"] and not r["replication"], user["name"]
        assert password_matches(loaded.get(user["password_secret"]), r), user["name"]
    for db in database_grants(cfg):
        live = databases.get(db["name"])
        assert live, f"database {db['name']} missing"
        assert live["owner"] == (db["owner"] or "postgres")
        assert "CONNECT" not in live["grants"].get("PUBLIC", set()), db["name"]
        for user in db["connect"]:
            assert "CONNECT" in live["grants"].get(user, set()), (db["name"], user)


def test_primary_streams_to_every_standby(host, cfg, members):
    if cfg.role != "primary":
        assert psql(host, "SELECT pg_is_in_recovery()") == "t"
        return
    assert psql(host, "SELECT pg_is_in_recovery()") == "f"
    standbys = [m for m in members if m.role == "replica" and m.primary == cfg.name]
    slots = fact(host, PostgresqlReplicationSlots)
    for s in standbys:
        slot = slots.get(slot_name(s.name))
        assert slot, f"no slot for {s.name}"
        assert slot["type"] == "physical" and slot["active"], (s.name, slot)
        assert slot["state"] == "streaming" and slot["client_addr"] == s.replication_address, slot
    rows = psql(
        host,
        "SELECT application_name, state, host(client_addr) FROM pg_stat_replication "
        "ORDER BY application_name",
    ).splitlines()
    assert rows == [
        f"{s.name}|streaming|{s.replication_address}" for s in sorted(standbys, key=lambda s: s.name)
    ]


def test_standby_in_recovery_and_streaming(host, cfg, members):
    if cfg.role != "replica":
        assert psql(host, "SELECT count(*) FROM pg_stat_wal_receiver") == "0"
        return
    primary = next(m for m in members if m.name == cfg.primary)
    state = fact(host, PostgresqlWalReceiver, wait=30)
    assert state == {
        "in_recovery": True,
        "status": "streaming",
        "slot_name": slot_name(cfg.name),
        "sender_host": primary.replication_address,
    }
    assert psql(host, "SHOW hot_standby") == "on"
    assert host.file(f"{render.postgresql_paths(cfg)['data_directory']}/standby.signal").exists
    passfile = host.file(PASSFILE)
    assert passfile.user == "postgres" and passfile.mode == 0o600


def test_wal_is_archived_to_the_backup_host_when_there_is_one(host, cfg, request):
    """With a backup host: archive_mode on and, on a primary, the last WAL segment archived
    after any failure (pg_stat_archiver); without one, nothing archives."""
    archive = pgbackrest.archive_settings(cfg, fleet(request))
    assert psql(host, "SHOW archive_mode") == ("on" if archive else "off")
    if archive and psql(host, "SELECT pg_is_in_recovery()") == "f":
        archived, failed = psql(
            host,
            "SELECT coalesce(last_archived_time::text, ''), coalesce(last_failed_time::text, '')"
            " FROM pg_stat_archiver",
        ).split("|")
        assert archived, "no WAL segment archived yet"
        assert not failed or failed < archived, f"archiving failed at {failed}, last archived {archived}"
