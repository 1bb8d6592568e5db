"""roles/pgbackrest.py: which hosts archive where, the files it renders (pgbackrest.conf on both
sides, ssh config, authorized_keys, the backup host's units), postgresql.conf's archive settings,
the `pgbackrest info` fact on real output and the stanza and first-backup operations against fact
stubs."""

import configparser
import json
import subprocess
from datetime import UTC, datetime

import pytest

from facts.pgbackrest import MISSING_STANZA_PATH, NO_VALID_BACKUP, PgbackrestInfo, parse_info
from model.hostdata import HostConfig
from operations import pgbackrest as ops
from roles import pgbackrest, render

from tests.unit.conftest import backup_data, host_data
from tests.unit.fact_stubs import run_operation
from tests.unit.real_servers import Servers
from tests.unit.test_templates import pg_checked

HW = {"ram_bytes": 4 * 1024**3, "cpus": 2}
PUBLIC = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeyKeyKeyKeyKeyKeyKeyKeyKeyKeyKeyKeyKeyKeyKey"


def configs(hosts: dict) -> list[HostConfig]:
    return [HostConfig.from_data(name, data) for name, data in hosts.items()]


def named(hosts: list[HostConfig], name: str) -> HostConfig:
    return next(h for h in hosts if h.name == name)


@pytest.fixture
def with_backup(fleet):
    return {**fleet, "backup1": backup_data()}


@pytest.fixture
def two_groups(with_backup):
    """Two PostgreSQL groups, the second's replica listed before its primary."""
    return {
        **with_backup,
        "pg4": host_data(
            engine="postgresql",
            role="replica",
            primary="pg3",
            cluster="analytics",
            hardware=HW,
            replication_address="10.99.0.24",
        ),
        "pg3": host_data(
            engine="postgresql",
            role="primary",
            cluster="analytics",
            hardware=HW,
            replication_address="10.99.0.23",
        ),
    }


def ini(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",))
    parser.optionxform = str  # pgBackRest's option names are lower case: keep them as written
    parser.read_string(text)
    return parser


# --- who archives, where ------------------------------------------------------------------------


def test_archiving_needs_a_backup_host_and_a_postgresql_host(fleet, with_backup):
    assert not pgbackrest.enabled(configs(fleet))
    assert pgbackrest.enabled(configs(with_backup))
    mariadb_only = {k: v for k, v in with_backup.items() if not k.startswith("pg")}
    assert not pgbackrest.enabled(configs(mariadb_only))
    assert pgbackrest.packages(configs(with_backup)) == ["pgbackrest"]
    assert pgbackrest.packages(configs(fleet)) == []
    assert pgbackrest.packages(configs(mariadb_only)) == []


def test_one_stanza_per_postgresql_group_its_primary_first(two_groups):
    found = pgbackrest.stanzas(configs(two_groups))
    assert {name: [h.name for h in members] for name, members in found.items()} == {
        "postgresql": ["pg1", "pg2"],
        "analytics": ["pg3", "pg4"],
    }


def test_the_archive_settings_name_the_host_s_stanza_and_timeout(fleet, two_groups):
    hosts = configs(two_groups)
    assert pgbackrest.archive_settings(named(hosts, "pg2"), hosts) == {"stanza": "postgresql", "timeout": 60}
    two_groups["pg4"]["pitr_archive_timeout"] = 300
    hosts = configs(two_groups)
    assert pgbackrest.archive_settings(named(hosts, "pg4"), hosts) == {"stanza": "analytics", "timeout": 300}
    without = configs(fleet)
    assert pgbackrest.archive_settings(named(without, "pg1"), without) is None


# --- postgresql.conf ------------------------------------------------------------------------------


def pg_conf(cfg: HostConfig, hosts: list[HostConfig]) -> tuple[dict, str]:
    archive = pgbackrest.archive_settings(cfg, hosts)
    context = render.postgresql_context(cfg, cfg.sizing(), hosts, archive)
    return context["s"], render.render("postgresql.conf.j2", context)


def test_postgresql_archives_with_pgbackrest_when_there_is_a_backup_host(with_backup):
    hosts = configs(with_backup)
    settings, text = pg_conf(named(hosts, "pg2"), hosts)
    assert settings["archive_mode"] == "on"
    assert settings["archive_command"] == "'pgbackrest --stanza=postgresql archive-push %p'"
    assert settings["archive_timeout"] == "'1min'"  # as SHOW archive_timeout prints 60 s
    assert "\narchive_mode = on\n" in text
    assert "\narchive_command = 'pgbackrest --stanza=postgresql archive-push %p'\n" in text
    assert "\narchive_timeout = '1min'\n" in text


@pytest.mark.parametrize(
    ("seconds", "shown"), [(1, "1s"), (59, "59s"), (60, "1min"), (90, "90s"), (600, "10min"), (3600, "1h")]
)
def test_the_archive_timeout_is_written_as_the_server_shows_it(seconds, shown):
    assert render.pg_seconds(seconds) == shown


def test_postgresql_archives_nothing_without_a_backup_host(fleet):
    hosts = configs(fleet)
    settings, text = pg_conf(named(hosts, "pg1"), hosts)
    assert settings["archive_mode"] == "off"
    assert "archive_command" not in settings and "archive_timeout" not in settings
    assert "\narchive_mode = off\n" in text
    assert "archive_command" not in text and "archive_timeout" not in text


def test_db_settings_override_the_archive_timeout(with_backup):
    with_backup["pg1"]["db_settings"] = {"archive_timeout": "5min"}
    hosts = configs(with_backup)
    settings, text = pg_conf(named(hosts, "pg1"), hosts)
    assert settings["archive_timeout"] == "'5min'"
    assert text.count("archive_timeout") == 1


def test_postgres_reads_the_archive_settings_as_rendered(with_backup):
    hosts = configs(with_backup)
    cfg = named(hosts, "pg1")
    files = render.render_host(cfg, cfg.sizing(), hosts, pgbackrest.archive_settings(cfg, hosts))
    values = pg_checked(
        files["postgresql.conf.j2"],
        files["pg_hba.conf.j2"],
        ["archive_mode", "archive_command", "archive_timeout"],
        Servers(cfg.debian_release),  # the host's release's postgres (Debian 13's under chroot)
    )
    assert values == {
        "archive_mode": "on",
        "archive_command": "pgbackrest --stanza=postgresql archive-push %p",
        "archive_timeout": "60",  # seconds, -C prints the parameter's unit
    }


# --- pgbackrest.conf ------------------------------------------------------------------------------


def test_a_database_host_s_config_points_at_the_repository_on_the_backup_host(two_groups):
    hosts = configs(two_groups)
    text = pgbackrest.client_conf_text(named(hosts, "pg4"), hosts)
    assert text.startswith("# Managed by dbzfs (roles/pgbackrest.py) for pg4: its WAL goes to")
    conf = ini(text)
    assert conf.sections() == ["global", "analytics"]
    glob = conf["global"]
    assert glob["repo1-host"] == "10.99.0.51"
    assert glob["repo1-host-user"] == "postgres"
    assert glob["repo1-host-config"] == "/etc/pgbackrest.conf"
    assert "repo1-path" not in glob and "repo1-retention-full" not in glob
    assert glob["compress-type"] == "none" and glob["start-fast"] == "y"
    assert dict(conf["analytics"]) == {"pg1-path": "/datastore/postgresql/17/main"}


def test_the_repository_s_config_lists_every_group_s_hosts_primary_first(two_groups):
    two_groups["backup1"]["pgbackrest_retention_full"] = 4
    hosts = configs(two_groups)
    text = pgbackrest.repository_conf_text(named(hosts, "backup1"), hosts)
    assert "for backup1, the backup host: the repository" in text
    conf = ini(text)
    assert conf.sections() == ["global", "postgresql", "analytics"]
    assert conf["global"]["repo1-path"] == "/var/lib/pgbackrest"
    assert conf["global"]["repo1-retention-full"] == "4"
    assert not any(k.startswith("repo1-host") for k in conf["global"])
    assert dict(conf["analytics"]) == {
        "pg1-host": "10.99.0.23",
        "pg1-host-user": "postgres",
        "pg1-host-config": "/etc/pgbackrest.conf",
        "pg1-path": "/datastore/postgresql/17/main",
        "pg2-host": "10.99.0.24",
        "pg2-host-user": "postgres",
        "pg2-host-config": "/etc/pgbackrest.conf",
        "pg2-path": "/datastore/postgresql/17/main",
    }
    assert conf["postgresql"]["pg1-host"] == "10.99.0.21" and conf["postgresql"]["pg2-host"] == "10.99.0.22"
    assert "# pg3\npg1-host=10.99.0.23\n" in text  # each host named above its lines


def test_the_repository_dataset_takes_whole_files_compressed_by_zfs():
    assert pgbackrest.DATASET_PROPERTIES["mountpoint"] == pgbackrest.REPOSITORY == "/var/lib/pgbackrest"
    assert pgbackrest.DATASET_PROPERTIES["recordsize"] == "1M"
    assert pgbackrest.DATASET_PROPERTIES["compression"] not in ("off", "none")


# --- ssh --------------------------------------------------------------------------------------------


def test_pgbackrest_s_ssh_config_uses_its_own_key_to_those_addresses_only():
    text = pgbackrest.ssh_config_text(["10.99.0.21", "10.99.0.22"], ["pg1", "pg2"], pgbackrest.KEY)
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == "# Managed by dbzfs (roles/pgbackrest.py): pgBackRest's ssh to pg1, pg2."
    assert lines[1] == "Host 10.99.0.21 10.99.0.22"
    assert "User postgres" in lines
    assert "IdentityFile /etc/dbzfs/pgbackrest/id_ed25519" in lines
    assert "IdentitiesOnly yes" in lines and "BatchMode yes" in lines
    assert "StrictHostKeyChecking accept-new" in lines
    assert f"UserKnownHostsFile {pgbackrest.KNOWN_HOSTS}" in lines
    assert pgbackrest.KNOWN_HOSTS.startswith(pgbackrest.ETC + "/")
    assert sum(line.startswith("Host ") for line in lines) == 1


def test_a_key_is_let_in_from_the_other_side_s_addresses_for_pgbackrest_only(with_backup):
    hosts = configs(with_backup)
    sources = pgbackrest.postgresql_hosts(hosts)
    line = pgbackrest.authorized_keys_text(PUBLIC, sources, "pgbackrest@postgresql-hosts")
    assert line == (
        'restrict,from="10.99.0.21,10.99.0.22",'
        'command="/usr/bin/python3 /usr/local/lib/dbzfs/pgbackrest_remote.py" '
        f"{PUBLIC} pgbackrest@postgresql-hosts\n"
    )
    assert line.count("\n") == 1


def test_the_forced_command_is_the_script_shipped_with_the_role():
    assert pgbackrest.REMOTE_SOURCE.is_file()
    assert pgbackrest.REMOTE_SOURCE.name == "pgbackrest_remote.py"
    assert pgbackrest.REMOTE.startswith("/usr/local/lib/dbzfs/")


# --- the backup host's units -------------------------------------------------------------------------


def test_the_backup_unit_backs_up_every_stanza_as_postgres(two_groups):
    hosts = configs(two_groups)
    files = pgbackrest.unit_files_text(named(hosts, "backup1"), hosts)
    assert sorted(files) == [
        "/etc/systemd/system/dbzfs-pgbackrest-backup@.service",
        "/etc/systemd/system/dbzfs-pgbackrest-full.timer",
        "/etc/systemd/system/dbzfs-pgbackrest-incr.timer",
        "/etc/systemd/system/dbzfs-pgbackrest-metrics.service",
        "/etc/systemd/system/dbzfs-pgbackrest-metrics.timer",
        "/usr/local/lib/dbzfs/pgbackrest_metrics.py",
    ]
    unit = files["/etc/systemd/system/dbzfs-pgbackrest-backup@.service"]
    assert [line for line in unit.splitlines() if line.startswith("ExecStart=")] == [
        "ExecStart=/usr/bin/pgbackrest --stanza=postgresql --type=%i backup",
        "ExecStart=/usr/bin/pgbackrest --stanza=analytics --type=%i backup",
    ]
    assert "\nUser=postgres\n" in unit and "\nType=oneshot\n" in unit


METRICS_COMMAND = (
    "/usr/bin/python3 /usr/local/lib/dbzfs/pgbackrest_metrics.py --stanza postgresql --stanza analytics"
)


def test_the_metrics_are_written_after_every_backup_and_on_a_timer_as_root(two_groups):
    hosts = configs(two_groups)
    files = pgbackrest.unit_files_text(named(hosts, "backup1"), hosts)
    backup_unit = files["/etc/systemd/system/dbzfs-pgbackrest-backup@.service"]
    # "+": as root (runuser), whatever User=; ExecStopPost: after the backups, failed or not.
    assert [line for line in backup_unit.splitlines() if line.startswith("ExecStopPost=")] == [
        f"ExecStopPost=+{METRICS_COMMAND}"
    ]
    unit = files["/etc/systemd/system/dbzfs-pgbackrest-metrics.service"]
    assert [line for line in unit.splitlines() if line.startswith(("ExecStart=", "User=", "Type="))] == [
        "Type=oneshot",
        f"ExecStart={METRICS_COMMAND}",
    ]
    assert pgbackrest.METRICS in unit
    timer = files["/etc/systemd/system/dbzfs-pgbackrest-metrics.timer"]
    assert "\nOnCalendar=*:0/15\nPersistent=true\nUnit=dbzfs-pgbackrest-metrics.service\n" in timer
    assert "\nWantedBy=timers.target\n" in timer
    assert files[pgbackrest.METRICS_SCRIPT] == pgbackrest.METRICS_SOURCE.read_text()
    assert pgbackrest.METRICS_SOURCE.name == "pgbackrest_metrics.py"
    assert pgbackrest.METRICS_SCRIPT.startswith("/usr/local/lib/dbzfs/")


def test_the_timers_follow_the_calendars_of_the_backup_host(with_backup):
    with_backup["backup1"].update(
        pgbackrest_full_calendar="Sat *-*-* 03:30", pgbackrest_incr_calendar="*-*-* 00/6:00"
    )
    hosts = configs(with_backup)
    files = pgbackrest.unit_files_text(named(hosts, "backup1"), hosts)
    full = files["/etc/systemd/system/dbzfs-pgbackrest-full.timer"]
    incr = files["/etc/systemd/system/dbzfs-pgbackrest-incr.timer"]
    assert "\nOnCalendar=Sat *-*-* 03:30\n" in full
    assert "\nUnit=dbzfs-pgbackrest-backup@full.service\n" in full
    assert "\nOnCalendar=*-*-* 00/6:00\n" in incr
    assert "\nUnit=dbzfs-pgbackrest-backup@incr.service\n" in incr
    assert all("\nPersistent=true\n" in t and "\nWantedBy=timers.target\n" in t for t in (full, incr))
    assert pgbackrest.timer("full") == "dbzfs-pgbackrest-full.timer"
    assert pgbackrest.service("incr") == "dbzfs-pgbackrest-backup@incr.service"


def test_no_units_without_a_postgresql_host(with_backup):
    mariadb_only = {k: v for k, v in with_backup.items() if not k.startswith("pg")}
    hosts = configs(mariadb_only)
    assert pgbackrest.unit_files_text(named(hosts, "backup1"), hosts) == {}


def test_the_units_pass_systemd_analyze(two_groups, tmp_path):
    hosts = configs(two_groups)
    files = pgbackrest.unit_files_text(named(hosts, "backup1"), hosts)
    paths = []
    for path, text in files.items():
        name = path.rsplit("/", 1)[1]
        if path == pgbackrest.METRICS_SCRIPT:
            continue
        (tmp_path / name).write_text(text)
        if not name.endswith("@.service"):
            paths.append(str(tmp_path / name))
    assert len(paths) == 4  # the timers and the metrics service
    # an instance of the template, as the timers start it
    instance = tmp_path / "dbzfs-pgbackrest-backup@full.service"
    instance.write_text(files["/etc/systemd/system/dbzfs-pgbackrest-backup@.service"])
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(instance), *paths],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    complaints = [
        line
        for line in result.stderr.splitlines()
        if "pgbackrest" in line and "Command /usr/bin/pgbackrest is not executable" not in line
    ]
    assert complaints == []


# --- the info fact -----------------------------------------------------------------------------------

START = int(datetime(2026, 12, 5, 6, 10, tzinfo=UTC).timestamp())


def backup_entry(label, kind, start, stop, lsn_start, lsn_stop, prior=None):
    """A backup as pgBackRest 2.45's `info --output=json` lists it."""
    return {
        "archive": {"start": "000000010000000000000005", "stop": "000000010000000000000005"},
        "backrest": {"format": 5, "version": "2.45"},
        "database": {"id": 1, "repo-key": 1},
        "error": False,
        "info": {
            "delta": 25168340,
            "repository": {"delta": 3119572, "size": 3119572},
            "size": 25168340,
        },
        "label": label,
        "link": None,
        "lsn": {"start": lsn_start, "stop": lsn_stop},
        "prior": prior,
        "reference": [prior] if prior else None,
        "tablespace": None,
        "timestamp": {"start": start, "stop": stop},
        "type": kind,
    }


INFO_OK = [
    {
        "archive": [
            {
                "database": {"id": 1, "repo-key": 1},
                "id": "15-1",
                "max": "000000010000000000000009",
                "min": "000000010000000000000005",
            }
        ],
        "backup": [
            backup_entry("20261205-061000F", "full", START, START + 12, "0/5000028", "0/5000100"),
            backup_entry(
                "20261205-061000F_20261206-010002I",
                "incr",
                START + 67562,
                START + 67570,
                "0/9000028",
                "0/9000138",
                prior="20261205-061000F",
            ),
        ],
        "cipher": "none",
        "db": [{"id": 1, "repo-key": 1, "system-id": 7310215472348798000, "version": "15"}],
        "name": "postgresql",
        "repo": [{"cipher": "none", "key": 1, "status": {"code": 0, "message": "ok"}}],
        "status": {"code": 0, "lock": {"backup": {"held": False}}, "message": "ok"},
    }
]

INFO_MISSING = [
    {
        "archive": [],
        "backup": [],
        "cipher": "none",
        "db": [],
        "name": "postgresql",
        "repo": [{"cipher": "none", "key": 1, "status": {"code": 1, "message": "missing stanza path"}}],
        "status": {"code": 1, "lock": {"backup": {"held": False}}, "message": "missing stanza path"},
    }
]

INFO_NO_BACKUP = [
    {
        **INFO_MISSING[0],
        "archive": [
            {
                "database": {"id": 1, "repo-key": 1},
                "id": "15-1",
                "max": "000000010000000000000003",
                "min": "000000010000000000000001",
            }
        ],
        "db": [{"id": 1, "repo-key": 1, "system-id": 7310215472348798000, "version": "15"}],
        "repo": [{"cipher": "none", "key": 1, "status": {"code": 2, "message": "no valid backups"}}],
        "status": {"code": 2, "lock": {"backup": {"held": False}}, "message": "no valid backups"},
    }
]


def test_the_info_fact_reads_a_stanza_with_backups():
    info = parse_info([json.dumps(INFO_OK)])  # pgBackRest prints its JSON on one line
    assert info == {
        "status": 0,
        "message": "ok",
        "backups": [
            {
                "label": "20261205-061000F",
                "type": "full",
                "start": START,
                "stop": START + 12,
                "lsn_start": "0/5000028",
                "lsn_stop": "0/5000100",
            },
            {
                "label": "20261205-061000F_20261206-010002I",
                "type": "incr",
                "start": START + 67562,
                "stop": START + 67570,
                "lsn_start": "0/9000028",
                "lsn_stop": "0/9000138",
            },
        ],
        "archive": {"min": "000000010000000000000005", "max": "000000010000000000000009"},
    }
    assert parse_info(json.dumps(INFO_OK, indent=2).splitlines()) == info  # on several lines too


def test_the_info_fact_reads_a_missing_stanza_and_one_without_backups():
    missing = parse_info([json.dumps(INFO_MISSING)])
    assert missing == {
        "status": MISSING_STANZA_PATH,
        "message": "missing stanza path",
        "backups": [],
        "archive": {},
    }
    assert parse_info([]) == missing  # nothing printed: no stanza either
    empty = parse_info([json.dumps(INFO_NO_BACKUP)])
    assert empty["status"] == NO_VALID_BACKUP and empty["backups"] == []
    assert empty["archive"] == {"min": "000000010000000000000001", "max": "000000010000000000000003"}


def test_the_info_fact_reads_a_backup_without_lsns():
    old = json.loads(json.dumps(INFO_OK))
    del old[0]["backup"][0]["lsn"]
    info = parse_info([json.dumps(old)])
    assert info["backups"][0]["lsn_start"] is None and info["backups"][0]["lsn_stop"] is None


def test_the_info_fact_asks_for_one_stanza_as_postgres():
    fact = PgbackrestInfo()
    assert fact.requires_command(stanza="postgresql") == "pgbackrest"
    assert str(fact.command(stanza="my group")) == (
        "runuser -u postgres -- pgbackrest --log-level-console=error --output=json '--stanza=my group' info"
    )


# --- the operations ------------------------------------------------------------------------------------


def facts_with(*infos):
    return {PgbackrestInfo: parse_info([json.dumps(infos)]) if infos else None}


def test_a_stanza_is_created_when_the_repository_has_none():
    commands, host = run_operation(ops.stanza, facts_with(INFO_MISSING[0]), stanza="postgresql")
    assert commands == ["runuser -u postgres -- pgbackrest --stanza=postgresql stanza-create"]
    assert host.noops == []
    assert host.fact_calls == [(PgbackrestInfo, (), {"stanza": "postgresql"})]


def test_a_stanza_is_created_before_pgbackrest_is_installed():
    commands, _ = run_operation(ops.stanza, {PgbackrestInfo: None}, stanza="postgresql")
    assert commands == ["runuser -u postgres -- pgbackrest --stanza=postgresql stanza-create"]


def test_a_stanza_is_created_again_when_its_data_is_missing():
    info = {"status": 3, "message": "missing stanza data", "backups": [], "archive": {}}
    commands, _ = run_operation(ops.stanza, {PgbackrestInfo: info}, stanza="postgresql")
    assert commands == ["runuser -u postgres -- pgbackrest --stanza=postgresql stanza-create"]


@pytest.mark.parametrize("info", [INFO_OK[0], INFO_NO_BACKUP[0]], ids=["with-backups", "no-backup"])
def test_an_existing_stanza_is_left_alone(info):
    commands, host = run_operation(ops.stanza, facts_with(info), stanza="postgresql")
    assert commands == []
    assert len(host.noops) == 1 and host.noops[0].startswith("stanza postgresql exists")


@pytest.mark.parametrize(
    "facts", [facts_with(INFO_NO_BACKUP[0]), {PgbackrestInfo: None}], ids=["none", "new"]
)
def test_the_first_full_backup_is_taken_when_there_is_none(facts):
    commands, host = run_operation(ops.first_backup, facts, stanza="postgresql")
    assert commands == [
        "runuser -u postgres -- pgbackrest --stanza=postgresql --type=full backup",
        "runuser -u postgres -- pgbackrest --stanza=postgresql --output=text info",
    ]
    assert host.noops == []


def test_no_backup_is_taken_once_there_is_one():
    commands, host = run_operation(ops.first_backup, facts_with(INFO_OK[0]), stanza="postgresql")
    assert commands == []
    assert host.noops == ["stanza postgresql has 2 backup(s), the newest 20261205-061000F_20261206-010002I"]


def test_pgbackrest_s_arguments_are_quoted():
    assert str(ops.command("a b", "--type=full", "backup")) == (
        "runuser -u postgres -- pgbackrest '--stanza=a b' --type=full backup"
    )


def test_nothing_pgbackrests_user_may_write_decides_who_logs_in_or_what_ssh_runs():
    """Its remote protocol writes what postgres may write: sshd takes its keys from a root-owned
    file (a Match drop-in), ssh its config from one (-F, no ~/.ssh/config)."""
    assert pgbackrest.sshd_dropin_text().splitlines()[-2:] == [
        "Match User postgres",
        f"\tAuthorizedKeysFile {pgbackrest.AUTHORIZED_KEYS}",
    ]
    assert f'exec /usr/bin/ssh -F {pgbackrest.SSH_CONFIG} "$@"' in pgbackrest.wrapper_text()
    for path in (pgbackrest.AUTHORIZED_KEYS, pgbackrest.SSH_CONFIG, pgbackrest.KEY, pgbackrest.KNOWN_HOSTS):
        assert path.startswith("/etc/dbzfs/pgbackrest/"), path


def test_both_sides_run_ssh_through_the_wrapper(with_backup):
    fleet = configs(with_backup)
    backup_host = next(h for h in fleet if h.is_backup_host)
    db = next(h for h in fleet if h.engine == "postgresql")
    for text in (pgbackrest.client_conf_text(db, fleet), pgbackrest.repository_conf_text(backup_host, fleet)):
        assert f"cmd-ssh={pgbackrest.SSH_WRAPPER}" in text.splitlines()


# --- the backup host's snapshots of the repository ------------------------------------------------


def sanoid_sections(cfg: HostConfig, hosts: list[HostConfig]) -> configparser.ConfigParser:
    from roles import backup

    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(backup.files_text(cfg, hosts)[backup.SANOID_CONF])
    return parser


def test_the_backup_host_s_sanoid_snapshots_the_repository_with_every_kind_counted(with_backup):
    hosts = configs(with_backup)
    backup1 = named(hosts, "backup1")
    section = sanoid_sections(backup1, hosts)["dbpool/pgbackrest"]
    assert section["autosnap"] == "yes" and section["autoprune"] == "yes"
    # every kind written: a kind left out would get sanoid's default count (e.g. 6 monthly)
    assert {k: section[k] for k in ("frequently", "hourly", "daily", "weekly", "monthly", "yearly")} == {
        "frequently": "0",
        "hourly": "24",
        "daily": "7",
        "weekly": "0",
        "monthly": "0",
        "yearly": "0",
    }
    # the copies stay the database hosts' snapshots: sanoid takes none of them
    copies = [s for s in sanoid_sections(backup1, hosts).sections() if s.startswith("template_")]
    assert copies and all(sanoid_sections(backup1, hosts)[s]["autosnap"] == "no" for s in copies)


def test_no_repository_section_without_a_postgresql_host(with_backup):
    hosts = [h for h in configs(with_backup) if h.engine != "postgresql"]
    assert "dbpool/pgbackrest" not in sanoid_sections(named(hosts, "backup1"), hosts)


def test_the_metrics_first_run_is_once_info_was_read():
    from pyinfra.facts.files import FileContents

    from operations import snapshots as snapshot_ops

    args = {
        "unit": pgbackrest.METRICS_UNIT,
        "marker": pgbackrest.METRICS,
        "succeeded": pgbackrest.METRICS_SUCCEEDED,
    }
    unit = pgbackrest.METRICS_UNIT
    first = [f"systemctl start {unit} && journalctl -o cat -n 3 -u {unit}"]
    assert run_operation(snapshot_ops.first_run, {FileContents: None}, **args)[0] == first
    failed = ["dbzfs_pgbackrest_info_success 0", "dbzfs_pgbackrest_last_run_timestamp_seconds 1765000000"]
    assert run_operation(snapshot_ops.first_run, {FileContents: failed}, **args)[0] == first
    ran = ['dbzfs_pgbackrest_stanza_ok{stanza="postgresql"} 0', "dbzfs_pgbackrest_info_success 1"]
    commands, host = run_operation(snapshot_ops.first_run, {FileContents: ran}, **args)
    assert commands == [] and pgbackrest.METRICS in host.noops[0]


def test_the_repository_s_first_snapshots_are_taken_by_sanoid_once():
    from facts.zfs import ZfsSnapshots
    from operations import snapshots as snapshot_ops

    dataset = "dbpool/pgbackrest"
    commands, _ = run_operation(
        snapshot_ops.first_taken, {ZfsSnapshots: []}, dataset=dataset, unit="sanoid.service"
    )
    assert commands == ["systemctl start sanoid.service && journalctl -o cat -n 3 -u sanoid.service"]
    taken = [{"name": f"{dataset}@autosnap_2026-12-05_10:00:01_hourly", "creation": 1}]
    commands, host = run_operation(
        snapshot_ops.first_taken, {ZfsSnapshots: taken}, dataset=dataset, unit="sanoid.service"
    )
    assert commands == [] and host.noops == [
        f"{dataset} has 1 snapshot(s), the newest autosnap_2026-12-05_10:00:01_hourly"
    ]
