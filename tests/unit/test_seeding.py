"""Seeding a replica from ZFS snapshots (day2/seeding.py, operations/seeding.py,
templates/seed-receive.sh.j2): the pre-checks refuse before any host is changed, every operation's
commands against fact stubs, every generated command parses (bash -n), no secret is ever on a
command line, the receive wrapper refuses what is not a receive into a seed dataset, and the send
and snapshot scripts run against stub `zfs`, `ssh` and `mariadb` programs (a cut send resumes)."""

import inspect
import logging
import os
import shlex
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyinfra.api import FileUploadCommand, HiddenValue, OperationError, StringCommand
from pyinfra.api.operation import OperationMeta
from pyinfra.context import ctx_host
from pyinfra.facts.files import FileContents

from day2 import kit, seeding, transfer
from facts.mariadb import MariadbReplicaStatus
from facts.postgresql import PostgresqlCluster, PostgresqlControlData, PostgresqlLiveRole
from facts.units import UnitState
from facts.zfs import ZfsDatasetProperties
from model.hostdata import HostConfig
from operations import postgresql_topology, runtime, seeding as ops
from operations.zfs import unmount_command
from roles import engine, mariadb

from tests.unit.conftest import GIB, host_data
from tests.unit.fact_stubs import FakeHost

PASSWORD = "s3cr'et-rep"
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
)
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfTheReplica root@pg2"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOneTimeKey dbzfs-seed:pg2:20261201T120000Z"
PG_DATA = "/datastore/postgresql/15/main"
HW = {"ram_bytes": 4 * GIB, "cpus": 2}


# --- helpers ------------------------------------------------------------------------------------


def with_second_replicas(fleet):
    """The conftest fleet's host data plus a second standby (pg3) and a second MariaDB replica (db3)."""
    data = dict(fleet)
    for name, engine_name, primary, address, extra in (
        ("pg3", "postgresql", "pg1", "10.99.0.23", {}),
        ("db3", "mariadb", "db1", "10.99.0.13", {"server_id": 3}),
    ):
        data[name] = host_data(
            engine=engine_name,
            role="replica",
            primary=primary,
            hardware=HW,
            replication_address=address,
            drive_pattern=f"nvme-TEST_{name}_*",
            drive_count=24,
            **extra,
        )
    return data


@pytest.fixture
def configs(fleet):
    return {name: HostConfig.from_data(name, d) for name, d in with_second_replicas(fleet).items()}


ALL = {"db1", "db2", "db3", "pg1", "pg2", "pg3"}


def plan_of(configs, replica, source=None, wipe=None):
    plan, problems = seeding.plan_problems(configs, replica, source, wipe, ALL)
    assert problems == []
    return plan


def props(**values):
    """ZfsDatasetProperties' value for one dataset: property -> value, source local."""
    return {k: {"value": str(v), "source": "local"} for k, v in values.items()}


def zfs(table):
    """A ZfsDatasetProperties stub over `table` (name -> properties), as `zfs get` answers."""

    def answer(datasets, recursive=False):
        wanted = [datasets] if isinstance(datasets, str) else list(datasets)
        out = {}
        for name, value in table.items():
            for asked in wanted:
                if name == asked or (recursive and name.startswith((f"{asked}/", f"{asked}@"))):
                    out[name] = value
        return out

    return answer


def run(op, facts, **kwargs):
    """(raw shell commands, {uploaded path: text}, fake host)"""
    host = FakeHost(facts)
    with ctx_host.use(host):
        produced = list(op._inner(**kwargs))
    uploads = {c.dest: c.src.getvalue().decode() for c in produced if isinstance(c, FileUploadCommand)}
    commands = [str(c.get_raw_value()) for c in produced if isinstance(c, StringCommand)]
    return commands, uploads, host


@pytest.fixture
def executing(monkeypatch):
    """Operations as pyinfra's execution runs them (not --dry's planning); no host failed."""
    state = SimpleNamespace(is_executing=True, failed_hosts=set())
    monkeypatch.setattr(ops, "state", state)
    return state


@pytest.fixture
def others(monkeypatch):
    """Other hosts of the inventory (name -> FakeHost) for the operations that read them."""
    hosts: dict[str, FakeHost] = {}
    monkeypatch.setattr(ops, "inventory", SimpleNamespace(get_host=lambda name: hosts[name]))
    return hosts


def stub(path: Path, text: str) -> None:
    path.write_text("#!/bin/bash\n" + text)
    path.chmod(0o755)


def ssh_stub(path: Path, wrapper: Path) -> None:
    """ssh: what follows the destination is the command the wrapper sees (sshd's forced command)."""
    stub(
        path,
        "while [ $# -gt 0 ]; do case $1 in root@*) shift; break;; esac; shift; done\n"
        f'SSH_ORIGINAL_COMMAND="$*" exec bash {wrapper}\n',
    )


def bash_syntax(command: str) -> None:
    result = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
    assert result.returncode == 0, f"{result.stderr}\n{command}"


# --- the plan and the pre-checks (pure) ---------------------------------------------------------


def test_the_plan_names_every_dataset_and_snapshot(configs):
    plan = plan_of(configs, "pg2")
    assert (plan.source.name, plan.primary.name, plan.wipe) == ("pg1", "pg1", False)
    data, log = plan.datasets
    assert (data.source, data.live, data.seed, data.aside) == (
        "dbpool/datastore/postgresql",
        "dbpool/datastore/postgresql",
        "dbpool/datastore/postgresql-seed",
        "dbpool/datastore/postgresql-replaced",
    )
    assert log.live == "dbpool/datastore/postgresql-wal"
    assert (plan.full, plan.catchup) == ("dbzfs-seed-pg2-full", "dbzfs-seed-pg2-catchup")
    assert plan.marker == "dbzfs-seed:pg2:"
    assert plan_of(configs, "db2", source="db3", wipe=True).wipe is True


def test_the_seed_records_the_compression_its_received_blocks_carry(configs):
    # Our sends keep the source's blocks: a later compression change must rewrite them on the
    # seeded replica too, so it records what the source recorded (absent stays absent).
    plan = plan_of(configs, "pg2")
    source = {
        "dbpool/datastore/postgresql": {"dbzfs:blocks-compression": {"value": "lz4", "source": "local"}},
        "dbpool/datastore/postgresql-wal": {"dbzfs:blocks-compression": {"value": "-", "source": "-"}},
    }
    assert seeding.received_blocks_compression(plan, source) == {"datastore/postgresql": "lz4"}
    assert seeding.received_blocks_compression(plan, {}) == {}


@pytest.mark.parametrize(
    "replica, source, wipe, key, message",
    [
        (None, None, None, "host", "missing"),
        ("db9", None, None, "host", "not a host of the inventory"),
        ("db1", None, None, "role", "not declared a replica of a primary of its group"),
        ("pg2", "db1", None, "source", "not a member of pg2's replication group"),
        ("pg2", "pg2", None, "source", "the replica itself"),
    ],
)
def test_the_plan_refuses_what_the_inventory_does_not_say(configs, replica, source, wipe, key, message):
    plan, problems = seeding.plan_problems(configs, replica, source, wipe, ALL)
    assert plan is None
    [problem] = problems
    assert problem.key == key and message in problem.message


def test_limit_must_include_the_replica_the_source_and_for_postgresql_the_primary(configs):
    _, [problem] = seeding.plan_problems(configs, "pg2", "pg3", None, {"pg2", "pg3"})
    assert problem.key == "--limit" and "leaves out pg1" in problem.message
    assert problem.fix == "limit to pg1,pg2,pg3 or more"
    plan, problems = seeding.plan_problems(configs, "db2", "db3", None, {"db2", "db3"})
    assert problems == [] and plan.primary.name == "db1"  # MariaDB's primary is not touched


def test_mountpoints_must_match_between_source_and_replica(fleet):
    fleet["pg1"]["zfs_dataset_properties"] = {"datastore/postgresql-wal": {"mountpoint": "/wal"}}
    configs = {name: HostConfig.from_data(name, d) for name, d in fleet.items()}
    _, [problem] = seeding.plan_problems(configs, "pg2", None, None, ALL)
    assert problem.key == "mountpoint" and "the log dataset is mounted at /wal on pg1" in problem.message


def found_for(plan, **changes):
    """Facts of a healthy group: the replica stopped and empty, room on its pool."""
    server = {
        "installed": True,
        "active": "inactive",
        "uid": "105",
        "gid": "111",
        "host_key": HOST_KEY,
        "pg_version": "",
        "directories": [],
    }
    parent = plan.replica.dataset_name(plan.replica.parent_dataset)
    if plan.replica.engine == "postgresql":
        live = {"in_recovery": False, "status": ""}
        replicating = {"in_recovery": True, "status": "streaming"}
    else:
        live = {"read_only": "0"}
        replicating = {"Master_Host": "10.99.0.11", "Slave_IO_Running": "Yes", "Slave_SQL_Running": "Yes"}
    found = {
        plan.replica.name: {
            "state": {**server, **changes.pop("replica_state", {})},
            "zfs": {parent: props(available=50 * GIB), **changes.pop("replica_zfs", {})},
        },
        plan.source.name: {
            "state": dict(server),
            "zfs": {d.source: props(referenced=GIB) for d in plan.datasets},
            "live": changes.pop("source_live", replicating if plan.source.role == "replica" else live),
        },
    }
    if plan.primary.name != plan.source.name:
        found[plan.primary.name] = {"live": changes.pop("primary_live", live)}
    assert not changes
    return found


def messages(problems):
    return [f"{p.host}: {p.key}: {p.message} / {p.fix}" for p in problems]


def test_a_healthy_group_passes(configs):
    plan = plan_of(configs, "pg2")
    assert seeding.live_problems(plan, found_for(plan)) == []


def test_the_source_and_the_primary_must_answer_as_the_inventory_says(configs):
    plan = plan_of(configs, "pg2")
    [problem] = seeding.live_problems(plan, found_for(plan, source_live=None))
    assert (problem.host, problem.message) == ("pg1", "PostgreSQL does not answer")
    [problem] = seeding.live_problems(plan, found_for(plan, source_live={"in_recovery": True, "status": ""}))
    assert "declared the primary, but the live server replicates" in problem.message

    plan = plan_of(configs, "pg2", source="pg3")
    stopped = {"in_recovery": True, "status": ""}
    [problem] = seeding.live_problems(plan, found_for(plan, source_live=stopped))
    assert "a replica that does not replicate now" in problem.message and problem.fix.endswith("from pg1")
    streaming = {"in_recovery": True, "status": "streaming"}
    [problem] = seeding.live_problems(plan, found_for(plan, source_live=streaming, primary_live=None))
    assert (problem.host, problem.message) == ("pg1", "PostgreSQL does not answer")

    plan = plan_of(configs, "db2", source="db3")
    running = {"Master_Host": "10.99.0.11", "Slave_IO_Running": "Yes", "Slave_SQL_Running": "Yes"}
    assert seeding.live_problems(plan, found_for(plan, source_live=running)) == []
    broken = {**running, "Slave_SQL_Running": "No"}
    [problem] = seeding.live_problems(plan, found_for(plan, source_live=broken))
    assert problem.host == "db3" and "does not replicate" in problem.message


def test_a_database_on_the_replica_is_replaced_only_with_wipe(configs):
    plan = plan_of(configs, "pg2")
    holding = found_for(plan, replica_state={"pg_version": "15", "active": "active"})
    [problem] = seeding.live_problems(plan, holding)
    assert problem.host == "pg2" and problem.key == "wipe"
    assert problem.message == "its data directory holds a PostgreSQL 15 cluster (PostgreSQL running)"
    assert problem.fix.startswith("re-run with --data wipe=yes to replace it")
    assert seeding.live_problems(plan_of(configs, "pg2", wipe=True), holding) == []

    plan = plan_of(configs, "db2")
    system_only = found_for(
        plan, replica_state={"directories": ["#innodb_redo", "mysql", "performance_schema", "sys"]}
    )
    assert seeding.live_problems(plan, system_only) == []
    own = found_for(plan, replica_state={"directories": ["app", "mysql", "sys"]})
    [problem] = seeding.live_problems(plan, own)
    assert "holds schemas of its own (app) (MariaDB stopped)" in problem.message


def test_a_seed_put_in_place_by_an_earlier_run_is_not_a_database_to_protect(configs):
    plan = plan_of(configs, "pg2")
    seeded = {f"{plan.data.live}@{plan.catchup}": props()}
    found = found_for(plan, replica_state={"pg_version": "15"}, replica_zfs=seeded)
    found["pg2"]["zfs"]["dbpool/datastore"] = props(available=1)  # no room needed any more
    assert seeding.live_problems(plan, found) == []


def test_the_replica_must_be_converged_with_the_same_service_account_and_a_host_key(configs):
    plan = plan_of(configs, "pg2")
    changes = {"installed": False, "host_key": "", "uid": "", "gid": ""}
    found = found_for(plan, replica_state=changes)
    assert messages(seeding.live_problems(plan, found)) == [
        "pg2: host: PostgreSQL is not installed / converge deploy.py on it first (the seed replaces its "
        "datasets, not its packages)",
        "pg2: host key: missing: the source pins the replica's ed25519 host key / ssh-keygen -A",
        "pg2: host: no postgres account / converge deploy.py on it first (the seed replaces its datasets, "
        "not its packages)",
    ]
    [problem] = seeding.live_problems(plan, found_for(plan, replica_state={"uid": "106"}))
    assert (problem.key, problem.value) == ("postgres", "106:111")
    assert "105:111 on pg1: received files keep their owner ids" in problem.message


def test_the_replicas_pool_needs_room_for_what_the_source_references(configs):
    plan = plan_of(configs, "pg2")
    found = found_for(plan)
    found["pg2"]["zfs"]["dbpool/datastore"] = props(available=2 * GIB)
    [problem] = seeding.live_problems(plan, found)
    assert problem.key == "zpool_name" and problem.value == "dbpool"
    assert problem.message == (
        "2.0 GiB available under dbpool/datastore, the seed needs 2.2 GiB (what pg1's datasets "
        "reference, plus 10%)"
    )
    # What a cut receive holds already counts.
    found["pg2"]["zfs"][plan.data.seed] = props(used=GIB // 2, receive_resume_token="1-abc")
    found["pg1"]["zfs"][f"{plan.data.source}@{plan.full}"] = props()
    assert seeding.live_problems(plan, found) == []
    del found["pg2"]["zfs"]["dbpool/datastore"]
    [problem] = seeding.live_problems(plan, found)
    assert (problem.key, problem.value, problem.message) == (
        "zfs_datasets",
        "dbpool/datastore",
        "does not exist",
    )


def test_names_in_the_way_are_reported_with_the_command_that_clears_them(configs):
    plan = plan_of(configs, "pg2")
    stale = {plan.data.seed: props(used=1, receive_resume_token="-"), plan.data.aside: props()}
    problems = seeding.live_problems(plan, found_for(plan, replica_zfs=stale))
    assert messages(problems) == [
        "pg2: dataset: exists, and is no receive this run can resume / zfs destroy -r "
        "dbpool/datastore/postgresql-seed (on pg2)",
        "pg2: dataset: exists (an earlier seed's?): dbpool/datastore/postgresql cannot be renamed aside / "
        "zfs destroy -r dbpool/datastore/postgresql-replaced once it is not needed, or rename it",
    ]
    # A full receive that completed, or one that was cut, resumes while the source's snapshot lives.
    resumable = {plan.data.seed: props(used=1, receive_resume_token="1-abc")}
    found = found_for(plan, replica_zfs=resumable)
    found["pg1"]["zfs"][f"{plan.data.source}@{plan.full}"] = props()
    assert seeding.live_problems(plan, found) == []


# --- the one-time key ---------------------------------------------------------------------------


def test_the_one_time_key_is_made_in_a_directory_that_is_gone_at_once(monkeypatch):
    made = []
    real = tempfile.TemporaryDirectory

    def recording(*args, **kwargs):
        directory = real(*args, **kwargs)
        made.append(directory.name)
        return directory

    monkeypatch.setattr(transfer.tempfile, "TemporaryDirectory", recording)
    private, public = transfer.one_time_key("dbzfs-seed:pg2:test")
    assert isinstance(private, HiddenValue) and "OPENSSH PRIVATE KEY" in private.unmask()
    assert public.startswith("ssh-ed25519 ") and public.endswith(" dbzfs-seed:pg2:test")
    assert made and not os.path.exists(made[0])


def test_the_key_line_and_the_pinned_host_key():
    expires = transfer.expiry(datetime(2026, 12, 1, 12, 30, tzinfo=UTC))
    assert expires == "202612031230Z"
    line = ops.authorized_key_line(PUBLIC_KEY, "10.99.0.21", expires)
    assert line == (
        'from="10.99.0.21",restrict,expiry-time="202612031230Z",command="/usr/local/sbin/dbzfs-seed-receive" '
        + PUBLIC_KEY
    )
    assert ops.known_hosts_line("10.99.0.22", HOST_KEY) == (
        "10.99.0.22 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfTheReplica\n"
    )
    ssh = shlex.split(ops.ssh_command("10.99.0.22", "10.99.0.21"))
    assert ssh[:5] == ["ssh", "-F", "/dev/null", "-i", ops.KEY]
    for option in (
        "StrictHostKeyChecking=yes",
        f"UserKnownHostsFile={ops.KNOWN_HOSTS}",
        "GlobalKnownHostsFile=/dev/null",
        "BatchMode=yes",
        "IdentitiesOnly=yes",
    ):
        assert option in ssh
    assert "StrictHostKeyChecking=no" not in ssh and ssh[-3:] == ["-b", "10.99.0.21", "root@10.99.0.22"]


# --- operations: the SSH path ---------------------------------------------------------------------


def test_the_server_is_stopped_once():
    commands, _, _ = run(
        ops.server_stopped, {UnitState: {"active": "active", "enabled": "enabled"}}, unit="x.service"
    )
    assert commands == ["systemctl stop x.service"]
    commands, _, host = run(
        ops.server_stopped, {UnitState: {"active": "inactive", "enabled": "enabled"}}, unit="x"
    )
    assert commands == [] and host.noops == ["x is inactive"]


def test_the_key_line_replaces_an_earlier_runs_and_is_removed(tmp_path):
    keys = tmp_path / "authorized_keys"

    def on_the_copy(command):
        local = command.replace(ops.AUTHORIZED_KEYS, str(keys)).replace("install -d -m 700 /root/.ssh;", "")
        subprocess.run(["bash", "-c", local], check=True)
        return keys.read_text().splitlines()

    line = ops.authorized_key_line(PUBLIC_KEY, "10.99.0.21", "202612031230Z")
    admin, earlier = "ssh-ed25519 AAAAother admin@laptop", "restrict ssh-ed25519 AAAAold dbzfs-seed:pg2:2026"
    keys.write_text(f"{admin}\n{earlier}\n")
    [write], _, _ = run(
        ops.authorized_key, {FileContents: [admin, earlier]}, line=line, marker="dbzfs-seed:pg2:"
    )
    assert on_the_copy(write) == [admin, line]
    assert oct(keys.stat().st_mode & 0o777) == "0o600"
    commands, _, host = run(
        ops.authorized_key, {FileContents: [admin, line]}, line=line, marker="dbzfs-seed:pg2:"
    )
    assert commands == [] and host.noops

    [remove], _, _ = run(ops.authorized_key_removed, {FileContents: [admin, line]}, marker="dbzfs-seed:pg2:")
    assert on_the_copy(remove) == [admin]
    commands, _, _ = run(ops.authorized_key_removed, {FileContents: None}, marker="dbzfs-seed:pg2:")
    assert commands == []


def test_the_private_key_is_uploaded_never_on_a_command_line():
    known = ops.known_hosts_line("10.99.0.22", HOST_KEY)
    commands, uploads, _ = run(ops.source_key, {}, private_key=HiddenValue(PRIVATE_KEY), known_hosts=known)
    assert uploads == {ops.KEY: PRIVATE_KEY, ops.KNOWN_HOSTS: known}
    assert commands == [
        "install -d -m 0700 -o root -g root /run/dbzfs",
        f"chmod 600 {ops.KEY}",
    ]
    assert not any("b3BlbnNzaC1rZXktdjEAAAAA" in c for c in commands)
    [remove], _, _ = run(ops.source_key_removed, {})
    assert remove == f"rm -f {ops.KEY} {ops.KNOWN_HOSTS} {ops.SEND_LOG}"


# --- operations: snapshots and sends --------------------------------------------------------------

PG_DATASETS = ["dbpool/datastore/postgresql", "dbpool/datastore/postgresql-wal"]
MARIADB_DATASETS = ["dbpool/datastore/mysql", "dbpool/datastore/mysql-log"]
SEEDED = "dbpool/datastore/postgresql@dbzfs-seed-pg2-catchup"
SNAPSHOT_ARGS = {"snapshot": "dbzfs-seed-pg2-full", "replica": "pg2", "seeded": SEEDED}


def test_postgresql_snapshots_both_datasets_in_one_command(executing, others):
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs({})})
    [command], _, _ = run(
        ops.snapshot,
        {ZfsDatasetProperties: zfs({})},
        engine_name="postgresql",
        datasets=PG_DATASETS,
        **SNAPSHOT_ARGS,
    )
    assert command.startswith(
        "zfs snapshot dbpool/datastore/postgresql@dbzfs-seed-pg2-full "
        "dbpool/datastore/postgresql-wal@dbzfs-seed-pg2-full && echo"
    )
    taken = zfs({f"{d}@dbzfs-seed-pg2-full": props() for d in PG_DATASETS})
    commands, _, host = run(
        ops.snapshot,
        {ZfsDatasetProperties: taken},
        engine_name="postgresql",
        datasets=PG_DATASETS,
        **SNAPSHOT_ARGS,
    )
    assert commands == [] and "exists" in host.noops[0]


def test_no_snapshot_once_the_seed_is_in_place_or_the_replica_failed(executing, others):
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs({SEEDED: props()})})
    commands, _, host = run(
        ops.snapshot,
        {ZfsDatasetProperties: zfs({})},
        engine_name="postgresql",
        datasets=PG_DATASETS,
        **SNAPSHOT_ARGS,
    )
    assert commands == [] and host.noops == [f"pg2 holds the seed in place ({SEEDED})"]
    executing.failed_hosts = [SimpleNamespace(name="pg2")]
    with pytest.raises(OperationError, match="pg2 failed an earlier step"):
        run(ops.snapshot, {}, engine_name="postgresql", datasets=PG_DATASETS, **SNAPSHOT_ARGS)


def test_mariadb_snapshots_under_backup_stage_and_retakes_one_without_its_gtid(executing, others):
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs({})})
    unpositioned = zfs({f"{d}@dbzfs-seed-pg2-full": props() for d in MARIADB_DATASETS})
    *destroy, session = run(
        ops.snapshot,
        {ZfsDatasetProperties: unpositioned},
        engine_name="mariadb",
        datasets=MARIADB_DATASETS,
        **SNAPSHOT_ARGS,
    )[0]
    words = shlex.split(session)
    first = words.index("%s\\n") + 1  # printf's format, then one argument per line of the session
    full = "dbpool/datastore/mysql@dbzfs-seed-pg2-full dbpool/datastore/mysql-log@dbzfs-seed-pg2-full"
    assert words[first : first + 7] == [
        "SET SESSION lock_wait_timeout = 60;",
        "BACKUP STAGE START;",
        "BACKUP STAGE BLOCK_COMMIT;",
        "SELECT @@global.gtid_binlog_pos;",
        f"system zfs snapshot {full}",
        "BACKUP STAGE END;",
        "|",
    ]
    assert destroy == [f"zfs destroy {name}" for name in full.split()]
    assert 'zfs set "dbzfs:gtid=${gtid:-empty}"' in session
    positioned = zfs(
        {f"{d}@dbzfs-seed-pg2-full": props(**{"dbzfs:gtid": "0-1-42"}) for d in MARIADB_DATASETS}
    )
    commands, _, host = run(
        ops.snapshot,
        {ZfsDatasetProperties: positioned},
        engine_name="mariadb",
        datasets=MARIADB_DATASETS,
        **SNAPSHOT_ARGS,
    )
    assert commands == [] and host.noops == [
        "dbpool/datastore/mysql@dbzfs-seed-pg2-full exists at GTID 0-1-42"
    ]


SENDS = [
    {"source": d, "seed": f"{d}-seed", "live": d}
    for d in ["dbpool/datastore/postgresql", "dbpool/datastore/postgresql-wal"]
]
TO = {"replica": "pg2", "address": "10.99.0.22", "bind_address": "10.99.0.21"}


def test_a_full_send_per_dataset_through_the_wrapper_resumable(executing, others):
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs({})})
    source = zfs(
        {f"{d['source']}@dbzfs-seed-pg2-full": props() for d in SENDS}
        | {SENDS[0]["source"]: props(encryption="off")}
    )
    data, wal = run(
        ops.send, {ZfsDatasetProperties: source}, datasets=SENDS, snapshot="dbzfs-seed-pg2-full", **TO
    )[0]
    assert "set -- zfs send -L -c dbpool/datastore/postgresql@dbzfs-seed-pg2-full;;" in data
    assert "r zfs get -H -o value receive_resume_token dbpool/datastore/postgresql-seed </dev/null" in data
    assert '*) set -- zfs send -t "$token";;' in data
    assert '"$@" | dd bs=1M 2>"$log" | r zfs recv -s -u dbpool/datastore/postgresql-seed && done=yes' in data
    assert "-b 10.99.0.21 root@10.99.0.22" in data
    assert "dbpool/datastore/postgresql-wal-seed" in wal


def test_an_incremental_send_raw_when_encrypted_and_none_for_what_the_replica_holds(executing, others):
    snap = "dbzfs-seed-pg2-catchup"
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs({f"{SENDS[1]['live']}@{snap}": props()})})
    source = zfs(
        {f"{d['source']}@{snap}": props() for d in SENDS}
        | {SENDS[0]["source"]: props(encryption="aes-256-gcm")}
    )
    [command], _, _ = run(
        ops.send,
        {ZfsDatasetProperties: source},
        datasets=SENDS,
        snapshot=snap,
        base="dbzfs-seed-pg2-full",
        **TO,
    )
    assert (
        "set -- zfs send -w -i dbpool/datastore/postgresql@dbzfs-seed-pg2-full "
        f"dbpool/datastore/postgresql@{snap};;" in command
    )
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs({f"{d['seed']}@{snap}": props() for d in SENDS})})
    commands, _, host = run(ops.send, {ZfsDatasetProperties: source}, datasets=SENDS, snapshot=snap, **TO)
    assert commands == [] and host.noops[0].startswith("pg2 holds @dbzfs-seed-pg2-catchup")


def test_a_send_needs_its_snapshot_when_executing_but_plans_without_it(executing, others):
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs({})})
    with pytest.raises(OperationError, match="postgresql@dbzfs-seed-pg2-full does not exist"):
        run(ops.send, {ZfsDatasetProperties: zfs({})}, datasets=SENDS, snapshot="dbzfs-seed-pg2-full", **TO)
    executing.is_executing = False
    commands, _, _ = run(
        ops.send, {ZfsDatasetProperties: zfs({})}, datasets=SENDS, snapshot="dbzfs-seed-pg2-full", **TO
    )
    assert len(commands) == 2


# --- operations: the replica's datasets -----------------------------------------------------------

PLACES = [
    {"live": d, "seed": f"{d}-seed", "aside": f"{d}-replaced"}
    for d in ["dbpool/datastore/postgresql", "dbpool/datastore/postgresql-wal"]
]
CATCHUP = "dbzfs-seed-pg2-catchup"


def UNMOUNT(dataset):
    return unmount_command(dataset).get_raw_value()


def received(*extra):
    table = {}
    for p in PLACES:
        table[p["live"]] = props(mounted="yes")
        table[p["seed"]] = props(receive_resume_token="-")
        table[f"{p['seed']}@{CATCHUP}"] = props()
    for name, value in extra:
        table[name] = value
    return table


def test_the_seed_takes_the_live_datasets_names(executing):
    commands, _, _ = run(
        ops.put_in_place, {ZfsDatasetProperties: zfs(received())}, datasets=PLACES, snapshot=CATCHUP
    )
    assert commands == [
        UNMOUNT("dbpool/datastore/postgresql"),
        "zfs set mountpoint=none dbpool/datastore/postgresql",
        "zfs rename dbpool/datastore/postgresql dbpool/datastore/postgresql-replaced",
        "zfs rename dbpool/datastore/postgresql-seed dbpool/datastore/postgresql",
        UNMOUNT("dbpool/datastore/postgresql-wal"),
        "zfs set mountpoint=none dbpool/datastore/postgresql-wal",
        "zfs rename dbpool/datastore/postgresql-wal dbpool/datastore/postgresql-wal-replaced",
        "zfs rename dbpool/datastore/postgresql-wal-seed dbpool/datastore/postgresql-wal",
    ]
    in_place = {f"{p['live']}@{CATCHUP}": props() for p in PLACES}
    commands, _, host = run(
        ops.put_in_place, {ZfsDatasetProperties: zfs(in_place)}, datasets=PLACES, snapshot=CATCHUP
    )
    assert commands == [] and "the seed is in place" in host.noops[0]


def test_a_held_seed_is_held_before_it_takes_the_live_name(executing):
    """A restored copy's snapshot is named as sanoid names its own: held before the rename, so
    the target's sanoid cannot prune it by name half-way (released by the runbook at its end)."""
    commands, _, _ = run(
        ops.put_in_place,
        {ZfsDatasetProperties: zfs(received())},
        datasets=PLACES,
        snapshot=CATCHUP,
        hold="dbzfs-restore-pg2",
    )
    seed = f"dbpool/datastore/postgresql-seed@{CATCHUP}"
    assert commands[0] == (
        f"zfs holds -H {shlex.quote(seed)} | cut -f2 | grep -qxF dbzfs-restore-pg2"
        f" || zfs hold dbzfs-restore-pg2 {shlex.quote(seed)}"
    )
    assert commands.index(commands[0]) < commands.index(
        "zfs rename dbpool/datastore/postgresql-seed dbpool/datastore/postgresql"
    )
    assert len(commands) == 10  # one hold per dataset, the eight of the plain case


@pytest.mark.parametrize(
    "change, match",
    [
        (
            ("dbpool/datastore/postgresql-seed", props(receive_resume_token="1-abc")),
            "holds a partial receive",
        ),
        (("dbpool/datastore/postgresql-seed/evil", props()), "has children"),
        (
            ("dbpool/datastore/postgresql-seed", {"mountpoint": {"value": "/etc", "source": "received"}}),
            r"carries received properties \(mountpoint\)",
        ),
        (("dbpool/datastore/postgresql-replaced", props()), "postgresql-replaced exists"),
    ],
)
def test_a_seed_that_is_incomplete_or_not_ours_is_not_put_in_place(executing, change, match):
    with pytest.raises(OperationError, match=match):
        run(
            ops.put_in_place, {ZfsDatasetProperties: zfs(received(change))}, datasets=PLACES, snapshot=CATCHUP
        )


def test_put_in_place_plans_before_the_sends_and_copies_the_gtid_position(executing, others):
    executing.is_executing = False
    live_only = {p["live"]: props() for p in PLACES}
    commands, _, _ = run(
        ops.put_in_place, {ZfsDatasetProperties: zfs(live_only)}, datasets=PLACES, snapshot=CATCHUP
    )
    assert len(commands) == 8
    executing.is_executing = True
    others["db1"] = FakeHost(
        {ZfsDatasetProperties: zfs({"src@" + CATCHUP: props(**{"dbzfs:gtid": "0-1-42"})})}
    )
    position = {"host": "db1", "snapshot": "src@" + CATCHUP, "onto": PLACES[0]["live"]}
    commands, _, _ = run(
        ops.put_in_place,
        {ZfsDatasetProperties: zfs(received())},
        datasets=PLACES,
        snapshot=CATCHUP,
        position_from=position,
    )
    assert commands[-1] == f"zfs set dbzfs:gtid=0-1-42 dbpool/datastore/postgresql@{CATCHUP}"


def test_mounted_and_the_seed_snapshots_destroyed(executing, others):
    lives = [p["live"] for p in PLACES]
    table = {lives[0]: props(mounted="no"), lives[1]: props(mounted="yes")}
    commands, _, _ = run(ops.mounted, {ZfsDatasetProperties: zfs(table)}, datasets=lives)
    assert commands == ["zfs mount dbpool/datastore/postgresql"]

    snaps = {f"{d}@{s}": props() for d in lives for s in ("dbzfs-seed-pg2-full", CATCHUP)}
    keep_unless = {"host": "pg2", "snapshot": SEEDED}
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs({})})
    args = {"datasets": lives, "snapshots": ["dbzfs-seed-pg2-full", CATCHUP], "needed_unless": keep_unless}
    commands, _, host = run(ops.snapshots_destroyed, {ZfsDatasetProperties: zfs(snaps)}, **args)
    assert commands == [] and host.noops[0].startswith("kept: pg2 has not put the seed in place")
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs({SEEDED: props()})})
    commands, _, _ = run(ops.snapshots_destroyed, {ZfsDatasetProperties: zfs(snaps)}, **args)
    assert commands == [f"zfs destroy {name}" for name in snaps]


def test_the_datasets_renamed_aside_are_destroyed_only_with_wipe():
    asides = [p["aside"] for p in PLACES]
    table = zfs({name: props() for name in asides})
    commands, _, host = run(
        ops.replaced_destroyed, {ZfsDatasetProperties: table}, datasets=asides, wipe=False
    )
    assert commands == [] and "kept for the operator" in host.noops[0]
    commands, _, _ = run(ops.replaced_destroyed, {ZfsDatasetProperties: table}, datasets=asides, wipe=True)
    assert commands == [f"zfs destroy -r {name}" for name in asides]


# --- operations: the replica's server -------------------------------------------------------------

CONNINFO = postgresql_topology.conninfo(
    "10.99.0.21", 5432, "replicator", "/var/lib/postgresql/.pgpass", "pg2"
)
STANDBY_ARGS = {
    "version": 15,
    "cluster_name": "main",
    "data_directory": PG_DATA,
    "seeded": SEEDED,
    "primary_address": "10.99.0.21",
    "conninfo": CONNINFO,
    "slot": "pg2",
}


def cluster(config=True):
    return {"config": config, "pg_version": "15", "data_entries": 20, "pg_wal": "", "standby_signal": False}


def test_the_received_data_directory_starts_as_a_standby(executing, monkeypatch):
    facts = {
        ZfsDatasetProperties: zfs({SEEDED: props()}),
        PostgresqlLiveRole: None,
        PostgresqlCluster: cluster(config=False),
    }
    commands, _, _ = run(ops.postgresql_standby, facts, **STANDBY_ARGS)
    position, cleanup, settings, touch, register, start = commands
    assert position.startswith('echo "dbzfs-seed: position redo LSN $(LC_ALL=C')
    assert "/usr/lib/postgresql/15/bin/pg_controldata -D /datastore/postgresql/15/main" in position
    assert cleanup == (
        f"rm -f {PG_DATA}/postmaster.pid && {{ [ ! -d {PG_DATA}/pg_replslot ] || find {PG_DATA}/pg_replslot "
        "-mindepth 1 -delete; }"
    )
    assert touch.startswith("runuser -u postgres -- touch") and "pg_ident.conf" in touch
    assert register == f"pg_createcluster -d {PG_DATA} 15 main"
    assert start == "systemctl start postgresql@15-main.service"
    # The connection settings are written exactly as the switchover's follow writes them.
    monkeypatch.setattr(postgresql_topology, "state", SimpleNamespace(is_executing=True))
    shut_down = {"state": "shut down", "checkpoint": "0/5000028", "timeline": 1}
    written, *_ = run(
        postgresql_topology.follow,
        {PostgresqlLiveRole: None, PostgresqlControlData: shut_down},
        version=15,
        cluster_name="main",
        data_directory=PG_DATA,
        primary_address="10.99.0.21",
        slot="pg2",
        application_name="pg2",
        passfile="/var/lib/postgresql/.pgpass",
    )[0]
    assert settings == written


def test_a_standby_started_from_the_seed_is_left_alone_and_anything_else_refused(executing):
    streaming = {"in_recovery": True, "sender": "10.99.0.21"}
    facts = {
        ZfsDatasetProperties: zfs({SEEDED: props()}),
        PostgresqlLiveRole: streaming,
        PostgresqlCluster: cluster(),
    }
    commands, _, host = run(ops.postgresql_standby, facts, **STANDBY_ARGS)
    assert commands == [] and host.noops
    facts[PostgresqlLiveRole] = {"in_recovery": False, "sender": ""}
    with pytest.raises(OperationError, match="PostgreSQL runs, not as a standby of 10.99.0.21"):
        run(ops.postgresql_standby, facts, **STANDBY_ARGS)
    facts[ZfsDatasetProperties] = zfs({})
    with pytest.raises(OperationError, match="the seed is not in place"):
        run(ops.postgresql_standby, facts, **STANDBY_ARGS)


MARIADB_SEEDED = "dbpool/datastore/mysql@dbzfs-seed-db2-catchup"
REPLICA_ARGS = {
    "datadir": "/datastore/mysql",
    "relay_log": "/datastore/mysql-log/relay/relay-bin",
    "seeded": MARIADB_SEEDED,
    "primary_address": "10.99.0.11",
    "replication_user": "replicator",
    "password": HiddenValue(PASSWORD),
}


def test_mariadb_starts_from_the_recorded_gtid_with_the_password_only_uploaded(executing):
    facts = {
        MariadbReplicaStatus: None,
        ZfsDatasetProperties: zfs({MARIADB_SEEDED: props(**{"dbzfs:gtid": "0-1-42"})}),
    }
    commands, uploads, _ = run(ops.mariadb_replica, facts, **REPLICA_ARGS)
    assert commands[0] == (
        "rm -f /datastore/mysql/master.info /datastore/mysql/relay-log.info "
        "/datastore/mysql/multi-master.info /datastore/mysql/master-*.info "
        "/datastore/mysql/relay-log-*.info /datastore/mysql-log/relay/relay-bin.*"
    )
    assert commands[1:3] == ["systemctl start mariadb.service", "echo 'dbzfs-seed: position GTID 0-1-42'"]
    [sql] = uploads.values()
    assert sql == (
        "STOP SLAVE;\nRESET SLAVE ALL;\nSET GLOBAL gtid_slave_pos = '0-1-42';\n"
        "CHANGE MASTER TO MASTER_HOST='10.99.0.11', MASTER_PORT=3306, MASTER_USER='replicator', "
        "MASTER_PASSWORD='s3cr\\'et-rep', MASTER_CONNECT_RETRY=10, MASTER_USE_GTID=slave_pos;\nSTART SLAVE;\n"
    )
    assert "mariadb < /run/dbzfs/seed-replica.sql" in commands[-2]
    assert commands[-1] == f"zfs set dbzfs:replication-configured=yes {MARIADB_SEEDED}"
    assert not any("s3cr" in c for c in commands)


def test_mariadb_never_resets_a_position_it_has_replicated_from(executing):
    configured = props(**{"dbzfs:gtid": "0-1-42", "dbzfs:replication-configured": "yes"})
    facts = {MariadbReplicaStatus: None, ZfsDatasetProperties: zfs({MARIADB_SEEDED: configured})}
    commands, uploads, _ = run(ops.mariadb_replica, facts, **REPLICA_ARGS)
    assert commands == ["systemctl start mariadb.service"] and uploads == {}
    facts[MariadbReplicaStatus] = {"Master_Host": "10.99.0.11"}
    commands, _, host = run(ops.mariadb_replica, facts, **REPLICA_ARGS)
    assert commands == [] and host.noops
    facts[MariadbReplicaStatus] = {}
    with pytest.raises(OperationError, match="replicates from nobody"):
        run(ops.mariadb_replica, facts, **REPLICA_ARGS)


def test_mariadb_plans_before_the_seed_exists_and_refuses_without_a_position(executing):
    facts = {MariadbReplicaStatus: {"Master_Host": "10.99.0.11"}, ZfsDatasetProperties: zfs({})}
    executing.is_executing = False
    commands, _, _ = run(ops.mariadb_replica, facts, **REPLICA_ARGS)
    assert "echo 'dbzfs-seed: position GTID <the GTID of the catch-up snapshot>'" in commands
    executing.is_executing = True
    facts[ZfsDatasetProperties] = zfs({MARIADB_SEEDED: props()})
    facts[MariadbReplicaStatus] = None
    with pytest.raises(OperationError, match="holds no GTID position"):
        run(ops.mariadb_replica, facts, **REPLICA_ARGS)


# --- every command parses, none holds a secret ----------------------------------------------------


def every_command(monkeypatch):
    """The commands of every operation in a state where it acts."""
    state = SimpleNamespace(is_executing=True, failed_hosts=set())
    monkeypatch.setattr(ops, "state", state)
    nothing = FakeHost({ZfsDatasetProperties: zfs({})})
    gtid_source = FakeHost({ZfsDatasetProperties: zfs({"src@" + CATCHUP: props(**{"dbzfs:gtid": "0-1-42"})})})
    monkeypatch.setattr(
        ops, "inventory", SimpleNamespace(get_host=lambda name: gtid_source if name == "db1" else nothing)
    )
    line = ops.authorized_key_line(PUBLIC_KEY, "10.99.0.21", "202612031230Z")
    full_snapshots = zfs({f"{d['source']}@dbzfs-seed-pg2-full": props() for d in SENDS})
    runs = [
        (ops.server_stopped, {UnitState: {"active": "active"}}, {"unit": "mariadb.service"}),
        (
            ops.authorized_key,
            {FileContents: ["x dbzfs-seed:pg2:old"]},
            {"line": line, "marker": "dbzfs-seed:pg2:"},
        ),
        (ops.authorized_key_removed, {FileContents: [line]}, {"marker": "dbzfs-seed:pg2:"}),
        (ops.source_key, {}, {"private_key": HiddenValue(PRIVATE_KEY), "known_hosts": "x ssh-ed25519 K\n"}),
        (ops.source_key_removed, {}, {}),
        (
            ops.snapshot,
            {ZfsDatasetProperties: zfs({})},
            {"engine_name": "postgresql", "datasets": PG_DATASETS, **SNAPSHOT_ARGS},
        ),
        (
            ops.snapshot,
            {ZfsDatasetProperties: zfs({})},
            {"engine_name": "mariadb", "datasets": MARIADB_DATASETS, **SNAPSHOT_ARGS},
        ),
        (
            ops.send,
            {ZfsDatasetProperties: full_snapshots},
            {"datasets": SENDS, "snapshot": "dbzfs-seed-pg2-full", **TO},
        ),
        (
            ops.put_in_place,
            {ZfsDatasetProperties: zfs(received())},
            {
                "datasets": PLACES,
                "snapshot": CATCHUP,
                "position_from": {"host": "db1", "snapshot": "src@" + CATCHUP, "onto": PLACES[0]["live"]},
            },
        ),
        (ops.mounted, {ZfsDatasetProperties: zfs({})}, {"datasets": [PLACES[0]["live"]]}),
        (
            ops.snapshots_destroyed,
            {ZfsDatasetProperties: zfs({SEEDED: props()})},
            {"datasets": [PLACES[0]["live"]], "snapshots": [CATCHUP]},
        ),
        (
            ops.replaced_destroyed,
            {ZfsDatasetProperties: zfs({"a": props()})},
            {"datasets": ["a"], "wipe": True},
        ),
        (
            ops.postgresql_standby,
            {
                ZfsDatasetProperties: zfs({SEEDED: props()}),
                PostgresqlLiveRole: None,
                PostgresqlCluster: cluster(False),
            },
            STANDBY_ARGS,
        ),
        (
            ops.mariadb_replica,
            {
                MariadbReplicaStatus: None,
                ZfsDatasetProperties: zfs({MARIADB_SEEDED: props(**{"dbzfs:gtid": "empty"})}),
            },
            REPLICA_ARGS,
        ),
    ]
    commands = []
    for op, facts, kwargs in runs:
        produced, _, _ = run(op, facts, **kwargs)
        assert produced, op.__name__
        commands += produced
    cleanup = [c for role in ("source", "replica") for c in ops.key_cleanup(role, "dbzfs-seed:pg2:")]
    commands += [str(c.get_raw_value()) for c in cleanup]
    return commands


def test_every_generated_command_is_valid_bash(monkeypatch):
    for command in every_command(monkeypatch):
        bash_syntax(command)


def test_no_secret_is_on_any_command_line(monkeypatch):
    for command in every_command(monkeypatch):
        assert "s3cr" not in command and "b3BlbnNzaC1rZXktdjEAAAAA" not in command, command


# --- the receive wrapper ----------------------------------------------------------------------------


@pytest.fixture
def wrapper(tmp_path, configs):
    """The rendered wrapper for pg2, a stub `zfs` that logs its arguments, and a runner."""
    plan = plan_of(configs, "pg2")
    script = tmp_path / "dbzfs-seed-receive"
    script.write_text(seeding.wrapper_text(plan))
    stubs = tmp_path / "bin"
    stubs.mkdir()
    stub(
        stubs / "zfs",
        'printf \'%s\\n\' "$*" >> "$ZFS_LOG"\n'
        'case $1 in list) [ -n "${ZFS_EXISTS-}" ];; get) echo 1-token-abc;; recv) cat >/dev/null;; esac\n',
    )
    log = tmp_path / "zfs.log"

    def call(request, exists=True, stdin=""):
        env = {
            **os.environ,
            "PATH": f"{stubs}:{os.environ['PATH']}",
            "SSH_ORIGINAL_COMMAND": request,
            "ZFS_LOG": str(log),
        }
        if exists:
            env["ZFS_EXISTS"] = "1"
        log.write_text("")
        result = subprocess.run(["bash", str(script)], env=env, input=stdin, capture_output=True, text=True)
        return result, log.read_text().splitlines()

    call.script = script
    return call


def test_the_wrapper_renders_valid_bash_naming_only_the_seed_datasets(wrapper):
    text = wrapper.script.read_text()
    bash_syntax(text)
    assert "allowed=( dbpool/datastore/postgresql-seed dbpool/datastore/postgresql-wal-seed )" in text


def test_the_wrapper_runs_a_resumable_unmounted_receive_into_a_seed_dataset(wrapper):
    result, calls = wrapper("zfs recv -s -u dbpool/datastore/postgresql-seed", stdin="stream")
    assert result.returncode == 0, result.stderr
    assert calls == ["recv -s -u dbpool/datastore/postgresql-seed"]


def test_the_wrapper_reads_the_resume_token(wrapper):
    request = "zfs get -H -o value receive_resume_token dbpool/datastore/postgresql-wal-seed"
    result, calls = wrapper(request)
    assert (result.returncode, result.stdout) == (0, "1-token-abc\n")
    assert calls[-1] == "get -H -o value receive_resume_token dbpool/datastore/postgresql-wal-seed"
    result, calls = wrapper(request, exists=False)
    assert (result.returncode, result.stdout) == (0, "-\n") and not any(c.startswith("get") for c in calls)


@pytest.mark.parametrize(
    "request_",
    [
        "zfs recv -s -u dbpool/datastore/postgresql",  # the live dataset
        "zfs recv -s -u dbpool/datastore/postgresql-seed/child",
        "zfs recv -F -s -u dbpool/datastore/postgresql-seed",
        "zfs recv -s -u -F dbpool/datastore/postgresql-seed",
        "zfs recv -s dbpool/datastore/postgresql-seed",
        "zfs destroy -r dbpool/datastore/postgresql-seed",
        "zfs get all dbpool/datastore/postgresql-seed",
        "zfs recv -s -u dbpool/datastore/postgresql-seed; rm -rf /",
        "zfs recv -s -u $(id)",
        "zfs recv -s -u `id`",
        "bash -i",
        "",
    ],
)
def test_the_wrapper_refuses_anything_else(wrapper, request_):
    result, calls = wrapper(request_)
    assert result.returncode == 1 and "dbzfs-seed-receive: refused" in result.stderr
    assert calls == []


# --- the send and snapshot scripts against stub programs ------------------------------------------


def test_a_cut_send_resumes_from_the_token_and_counts_every_byte(tmp_path, wrapper, monkeypatch):
    """The send script, the wrapper and a stub zfs on both ends: the first receive is cut after
    some bytes (leaving a token), the second attempt resumes with zfs send -t."""
    monkeypatch.setattr(ops, "SEND_LOG", str(tmp_path / "send.log"))
    monkeypatch.setattr(ops, "RETRY_PAUSE", 0)
    state = tmp_path / "state"
    state.mkdir()
    stubs = tmp_path / "bin"
    stub(
        stubs / "zfs",
        'echo "$*" >> "$STATE/log"\n'
        'case "$1 $2" in\n'
        '"send -t") head -c 1500000 /dev/zero;;\n'
        '"send "*) head -c 2000000 /dev/zero;;\n'
        '"list -H") [ -e "$STATE/exists" ];;\n'
        '"get -H") cat "$STATE/token";;\n'
        '"recv -s") touch "$STATE/exists"\n'
        '  if [ -e "$STATE/cut" ]; then rm "$STATE/cut"; head -c 500000 >/dev/null\n'
        '    echo 1-abc-0 > "$STATE/token"; exit 1; fi\n'
        '  wc -c >> "$STATE/received"; echo - > "$STATE/token";;\n'
        "esac\n",
    )
    ssh_stub(stubs / "ssh", wrapper.script)
    (state / "cut").touch()
    script = ops.send_script(
        "dbpool/datastore/postgresql",
        "dbpool/datastore/postgresql-seed",
        "dbzfs-seed-pg2-full",
        None,
        False,
        "10.99.0.22",
        "10.99.0.21",
    )
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STATE": str(state)}
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "was cut (attempt 1 of 3)" in result.stderr
    log = (state / "log").read_text().splitlines()
    sends = [line for line in log if line.startswith("send")]
    assert sends == ["send -L -c dbpool/datastore/postgresql@dbzfs-seed-pg2-full", "send -t 1-abc-0"]
    assert (state / "received").read_text().split() == ["1500000"]
    [line] = result.stdout.splitlines()
    size, seconds, count = transfer.sent([line])
    assert count == 1 and 2000000 <= size <= 3500000 and seconds >= 0
    assert not (tmp_path / "send.log").exists()


def test_a_send_that_keeps_failing_stops_and_says_how_to_resume(tmp_path, wrapper, monkeypatch):
    monkeypatch.setattr(ops, "SEND_LOG", str(tmp_path / "send.log"))
    monkeypatch.setattr(ops, "RETRY_PAUSE", 0)
    stubs = tmp_path / "bin"
    stub(stubs / "zfs", "case $1 in send) head -c 1000 /dev/zero;; list) exit 1;; recv) exit 1;; esac\n")
    ssh_stub(stubs / "ssh", wrapper.script)
    live = "dbpool/datastore/postgresql"
    script = ops.send_script(live, f"{live}-seed", "s", None, False, "10.99.0.22", "10.99.0.21")
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "was cut (attempt 3 of 3)" in result.stderr and "re-run the runbook: it resumes" in result.stderr
    # A receive the wrapper refuses stops at once: nothing is sent.
    script = ops.send_script(live, live, "s", None, False, "10.99.0.22", "10.99.0.21")
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.splitlines() == [
        f"dbzfs-seed-receive: refused: not a seed dataset: {live}",
        f"cannot ask 10.99.0.22 over ssh for the state of {live}",
    ]


def test_the_mariadb_snapshot_is_taken_inside_block_commit_with_its_gtid(tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "log"
    stub(
        stubs / "mariadb",
        'while IFS= read -r line; do echo "sql: $line" >> "$LOG"\n'
        '  case $line in "SELECT @@global.gtid_binlog_pos;") echo 0-1-42,1-2-7;;\n'
        '    system\\ *) sh -c "${line#system }";; esac\n'
        "done\n",
    )
    stub(
        stubs / "zfs",
        'echo "zfs: $*" >> "$LOG"\n'
        'case $1 in snapshot) [ -z "${FAIL-}" ] || exit 1; touch "$DIR/taken";;\n'
        '  list) [ -e "$DIR/taken" ];; esac\n',
    )
    script = ops.mariadb_snapshot_script(MARIADB_DATASETS, "s")
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "LOG": str(log), "DIR": str(tmp_path)}
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "dbzfs-seed: snapshot dbpool/datastore/mysql@s at GTID 0-1-42,1-2-7\n"
    lines = log.read_text().splitlines()
    snapshot = "zfs: snapshot dbpool/datastore/mysql@s dbpool/datastore/mysql-log@s"
    assert (
        lines.index("sql: BACKUP STAGE BLOCK_COMMIT;")
        < lines.index(snapshot)
        < lines.index("sql: BACKUP STAGE END;")
    )
    assert (
        lines[-1] == "zfs: set dbzfs:gtid=0-1-42,1-2-7 dbpool/datastore/mysql@s dbpool/datastore/mysql-log@s"
    )

    (tmp_path / "taken").unlink()
    log.write_text("")
    result = subprocess.run(["bash", "-c", script], env={**env, "FAIL": "1"}, capture_output=True, text=True)
    assert result.returncode == 1 and "zfs snapshot failed inside the BACKUP STAGE session" in result.stderr
    assert not any(line.startswith("zfs: set") for line in log.read_text().splitlines())


# --- the report ---------------------------------------------------------------------------------------


def test_the_report_gives_bytes_seconds_position_and_what_is_left(configs):
    plan = plan_of(configs, "pg2")
    full = ["dbzfs-seed: sent a@s 1048576 bytes in 1500 ms", "dbzfs-seed: sent b@s 2097152 bytes in 500 ms"]
    lines = seeding.report_lines(plan, full, [], ["dbzfs-seed: position redo LSN 0/5000028"])
    assert lines == [
        "==> seeding done: pg2 replicates from pg1 (postgresql, postgresql), seeded from pg1's snapshots",
        "    full send: 3145728 bytes (3.0 MiB) in 2.0 s, 2 dataset(s)",
        "    incremental send: nothing sent in this run (received in an earlier one)",
        "    started from redo LSN 0/5000028",
        "    left for you: pg2's datasets from before the seed, once not needed:",
        "      zfs destroy -r dbpool/datastore/postgresql-replaced "
        "dbpool/datastore/postgresql-wal-replaced   (on pg2)",
    ]
    wiped = seeding.report_lines(plan_of(configs, "pg2", wipe=True), full, full, [])
    assert wiped[-1] == "    pg2's datasets from before the seed were destroyed (--data wipe=yes)"


def test_a_failed_step_removes_that_hosts_key_at_once(configs, caplog):
    plan = plan_of(configs, "pg2")
    report = seeding.Report(plan, {"full": "f", "catchup": "c", "start": "s", "last": "l"})
    ran = []
    failed = SimpleNamespace(
        name="pg1",
        run_shell_command=lambda command, **kwargs: ran.append((str(command), kwargs)) or (True, []),
    )
    state = SimpleNamespace(
        get_op_data_for_host=lambda host, op_hash: SimpleNamespace(
            global_arguments={"_sudo": False, "_ignore_errors": False}
        ),
        get_op_meta=lambda op_hash: SimpleNamespace(names={"Full send"}),
    )
    report.operation_host_error(state, failed, "f", 0, 0)
    report.operation_host_error(state, failed, "f", 0, 0)  # once per host
    assert ran == [
        (f"rm -f {ops.KEY} {ops.KNOWN_HOSTS} {ops.SEND_LOG}", {"print_output": False, "_sudo": False})
    ]
    assert "stopped on pg1 at 'Full send'; the one-time key was removed from it" in caplog.text
    replica = SimpleNamespace(name="pg2", run_shell_command=lambda command, **kwargs: (False, []))
    report.operation_host_error(state, replica, "s", 0, 0)
    assert (
        "could NOT be removed from it: remove the line with dbzfs-seed:pg2: from /root/.ssh/authorized_keys"
        in caplog.text
    )


# --- the run: every step, on the right host, with arguments its operation takes --------------------


@pytest.fixture
def wired(monkeypatch, fleet):
    """day2.seeding.run against a stand-in inventory (the fleet plus pg3 and db3): records every
    engine.step of one host's deploy."""
    hosts = {name: SimpleNamespace(name=name, data=d) for name, d in with_second_replicas(fleet).items()}

    class Inventory:
        def __iter__(self):
            return iter(hosts.values())

        def get_host(self, name):
            return hosts[name]

        def get_active_hosts(self):
            return list(hosts.values())

    current = SimpleNamespace(name=None, data=None)
    for module in (seeding, engine, kit):
        monkeypatch.setattr(module, "inventory", Inventory())
    monkeypatch.setattr(engine, "host", current)
    monkeypatch.setattr(runtime, "_once", {})
    monkeypatch.setattr(seeding, "read_members", found_for)
    monkeypatch.setattr(seeding, "one_time_key", lambda comment: (HiddenValue(PRIVATE_KEY), PUBLIC_KEY))
    monkeypatch.setattr(engine, "secret", lambda key: HiddenValue(PASSWORD))
    steps, role_files, reports = [], [], []

    def step(applies, why_not, op, **kwargs):
        steps.append((applies, op, kwargs))
        return OperationMeta(f"op{len(steps)}", None)

    monkeypatch.setattr(engine, "step", step)
    monkeypatch.setattr(
        mariadb, "role_config", lambda cfg: role_files.append((current.name, cfg.name, cfg.role))
    )
    monkeypatch.setattr(kit, "report_once", lambda key, report: reports.append(report))

    def deploy(name, **arguments):
        current.name, current.data = name, hosts[name].data
        steps.clear()
        seeding.run(arguments)
        return list(steps)

    deploy.role_files, deploy.reports = role_files, reports
    return deploy


def acting(steps):
    return [op._inner.__name__ for applies, op, _ in steps if applies]


SOURCE_STEPS = [
    "source_key",
    "snapshot",
    "send",
    "snapshot",
    "send",
    "source_key_removed",
    "snapshots_destroyed",
]
REPLICA_BEFORE = ["server_stopped", "config_file", "authorized_key", "put_in_place", "dataset", "dataset"]
REPLICA_BEFORE += ["mounted", "directory", "directory"]
REPLICA_AFTER = ["authorized_key_removed", "snapshots_destroyed", "replaced_destroyed", "first_taken"]


@pytest.mark.parametrize(
    "replica, primary, starts",
    [
        ("pg2", "pg1", ["directory", "secret_file", "postgresql_standby", "streams_from"]),
        ("db2", "db1", ["mariadb_replica", "read_only", "replicates_from"]),
    ],
)
def test_every_host_of_the_group_passes_every_step_with_valid_arguments(wired, replica, primary, starts):
    arguments = {"host": replica, "wipe": True}
    on_replica, on_primary = wired(replica, **arguments), wired(primary, **arguments)
    assert [op for _, op, _ in on_replica] == [op for _, op, _ in on_primary]  # one sequence of steps
    for applies, op, kwargs in on_replica + on_primary:
        if applies:  # the arguments bind to the operation's signature
            inspect.signature(op._inner).bind(**{k: v for k, v in kwargs.items() if k != "name"})
    assert acting(on_replica) == REPLICA_BEFORE + starts + REPLICA_AFTER
    slot = ["replication_slot"] if replica == "pg2" else []
    assert acting(on_primary) == SOURCE_STEPS[:1] + slot + SOURCE_STEPS[1:]
    if replica == "db2":
        assert wired.role_files == [("db2", "db2", "replica")]
    [report] = wired.reports[-1:]
    assert report.plan.replica.name == replica and report.plan.wipe


def test_a_standby_source_leaves_the_slot_to_the_primary(wired):
    arguments = {"host": "pg2", "source": "pg3"}
    assert acting(wired("pg1", **arguments)) == ["replication_slot"]
    assert acting(wired("pg3", **arguments)) == SOURCE_STEPS


def test_hosts_of_other_groups_take_no_part(wired):
    assert wired("db1", host="pg2") == []


def test_the_report_is_printed_once_the_replica_did_the_last_step(configs, caplog):
    caplog.set_level(logging.INFO)
    plan = plan_of(configs, "pg2")
    hashes = {"full": "f", "catchup": "c", "start": "s", "last": "l"}
    report = seeding.Report(plan, hashes)
    outputs = {
        ("pg1", "f"): ["dbzfs-seed: sent dbpool/datastore/postgresql@x 4096 bytes in 250 ms"],
        ("pg2", "s"): ["dbzfs-seed: position redo LSN 0/5000028"],
        ("pg2", "l"): [],
    }
    succeeded = {key: True for key in outputs}

    def op_data(host, op_hash):
        key = (host.name, op_hash)
        meta = SimpleNamespace(
            is_complete=lambda: key in outputs,
            did_succeed=lambda: succeeded.get(key, False),
            stdout_lines=outputs.get(key, []),
        )
        return SimpleNamespace(operation_meta=meta)

    state = SimpleNamespace(
        get_op_data_for_host=op_data,
        inventory=SimpleNamespace(get_host=lambda name: SimpleNamespace(name=name)),
    )
    succeeded[("pg2", "l")] = False
    report.operation_end(state, "l")
    assert "seeding done" not in caplog.text
    succeeded[("pg2", "l")] = True
    report.operation_end(state, "f")
    assert "seeding done" not in caplog.text
    report.operation_end(state, "l")
    assert "==> seeding done: pg2 replicates from pg1" in caplog.text
    assert "full send: 4096 bytes (0.0 MiB) in 0.2 s, 1 dataset(s)" in caplog.text
    assert "started from redo LSN 0/5000028" in caplog.text


MARK = {"snapshot": f"dbpool/datastore/postgresql@{CATCHUP}", "property": "dbzfs:restore", "value": "replica"}


def test_with_a_mark_a_live_snapshot_of_the_same_name_is_in_place_only_when_marked(executing, others):
    """A restore's copy is a sanoid snapshot the target may hold itself, from before: a live
    dataset holding it is the copy in place only with the restore's mark."""
    own = {f"{p['live']}@{CATCHUP}": props() for p in PLACES}
    commands, _, _ = run(
        ops.put_in_place,
        {ZfsDatasetProperties: zfs(received() | own)},
        datasets=PLACES,
        snapshot=CATCHUP,
        mark=MARK,
    )
    assert commands[:4] == [
        UNMOUNT("dbpool/datastore/postgresql"),
        "zfs set mountpoint=none dbpool/datastore/postgresql",
        "zfs rename dbpool/datastore/postgresql dbpool/datastore/postgresql-replaced",
        "zfs rename dbpool/datastore/postgresql-seed dbpool/datastore/postgresql",
    ]
    assert commands[-1] == f"zfs set dbzfs:restore=replica dbpool/datastore/postgresql@{CATCHUP}"
    marked = own | {MARK["snapshot"]: props(**{"dbzfs:restore": "replica"})}
    commands, _, host = run(
        ops.put_in_place, {ZfsDatasetProperties: zfs(marked)}, datasets=PLACES, snapshot=CATCHUP, mark=MARK
    )
    assert commands == [] and "the seed is in place" in host.noops[0]
    source = zfs({f"{d['source']}@{CATCHUP}": props() for d in SENDS})
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs({f"{d['live']}@{CATCHUP}": props() for d in SENDS})})
    commands, _, _ = run(
        ops.send, {ZfsDatasetProperties: source}, datasets=SENDS, snapshot=CATCHUP, mark=MARK, **TO
    )
    assert len(commands) == 2
    others["pg2"] = FakeHost({ZfsDatasetProperties: zfs(marked)})
    commands, _, _ = run(
        ops.send, {ZfsDatasetProperties: source}, datasets=SENDS, snapshot=CATCHUP, mark=MARK, **TO
    )
    assert commands == []
