"""The runbooks' kit (day2/kit.py): every runbook refuses a --data key that is not one of its
arguments (read from pyinfra's override data, apart from the inventory's host data), a host
argument naming more than one host, and a --limit that leaves out a host it needs, before anything
runs; the once-per-run report and the reading of an operation's output."""

import runpy
from types import SimpleNamespace

import pytest
from pyinfra.api import Config, Inventory, OperationError, State
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.operation import OperationMeta
from pyinfra.context import ctx_host, ctx_inventory, ctx_state

import validation
from day2 import (
    compression_rewrite,
    drive_replacement,
    failover,
    kit,
    restore,
    rolling,
    rolling_run,
    seeding,
    switchover,
    switchover_mariadb,
    switchover_run,
)
from facts.mariadb import MariadbReplicaStatus, MariadbSchemas, MariadbVariables
from model.hostdata import HostConfig
from operations import mariadb as mariadb_ops, mariadb_topology, runtime
from roles import engine, mariadb

from tests.unit.fact_stubs import FakeHost

RUNBOOKS = {
    "runbooks/seed.py": seeding.RUNBOOK,
    "runbooks/restore.py": restore.RUNBOOK,
    "runbooks/switchover.py": switchover.RUNBOOK,
    "runbooks/failover.py": failover.RUNBOOK,
    "runbooks/replace_drive.py": drive_replacement.RUNBOOK,
    "runbooks/rewrite_compression.py": compression_rewrite.RUNBOOK,
}
HOSTS = ["db1", "db2", "pg1", "pg2"]
EVERYONE = set(HOSTS)


def valid(runbook):
    """Arguments a runbook takes: every required one, with a host where it names one."""
    values = {"host": "db2", "new_primary": "db2", "failed": "db1", "mode": "replica"}
    values |= {"old": "/dev/disk/by-id/a", "new": "/dev/disk/by-id/b"}
    return {p.name: values[p.name] for p in runbook.parameters if p.required}


# --- unknown keys ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(RUNBOOKS))
def test_a_key_that_is_no_argument_is_refused_naming_every_argument(path):
    runbook = RUNBOOKS[path]
    args, problems = kit.parsed(runbook, {**valid(runbook), "bogus": "1"}, HOSTS, EVERYONE)
    [problem] = problems
    assert (problem.host, problem.key, problem.value) == (None, "bogus", "1")
    assert problem.message == f"not an argument of {path}"
    assert problem.fix.startswith(f"{path} takes ")
    for name in runbook.names():
        assert f"{name} (" in problem.fix
    assert str(problem).startswith(f"bogus = '1': not an argument of {path}. Fix: {path} takes ")
    assert kit.parsed(runbook, valid(runbook), HOSTS, EVERYONE)[1] == []


def test_a_misspelt_time_is_refused_not_restored_to_the_newest_backup():
    args, [problem] = kit.parsed(
        restore.RUNBOOK,
        {"host": "pg2", "mode": "standalone", "tme": "2026-12-05 06:10:00+00"},
        HOSTS,
        EVERYONE,
    )
    assert problem.key == "tme" and problem.fix.startswith(
        "did you mean time? runbooks/restore.py takes host ("
    )


def test_max_lag_spelt_with_a_dash_is_refused_not_defaulted():
    _, [problem] = kit.parsed(switchover.RUNBOOK, {"new_primary": "db2", "max-lag": 60}, HOSTS, EVERYONE)
    assert problem.key == "max-lag" and problem.fix.startswith("did you mean max_lag?")


@pytest.mark.parametrize(
    "runbook, old, given, new",
    [
        (seeding.RUNBOOK, "replica", "db2", "--data host=db2"),
        (restore.RUNBOOK, "target", "pg2", "--data host=pg2"),
        (drive_replacement.RUNBOOK, "on", "db1", "--data host=db1"),
    ],
)
def test_an_old_name_is_refused_with_the_new_one(runbook, old, given, new):
    _, problems = kit.parsed(runbook, {**valid(runbook), old: given}, HOSTS, EVERYONE)
    [problem] = [p for p in problems if p.key == old]
    assert problem.message.startswith(f"renamed: {runbook.path} takes host=") and problem.fix == new


def test_pyinfras_connection_data_is_no_argument_and_passes():
    given = {"host": "db2", "ssh_user": "admin", "ssh_port": 2222, "ssh_key": "/k"}
    assert kit.parsed(seeding.RUNBOOK, given, HOSTS, EVERYONE) == (
        {"host": "db2", "source": None, "wipe": False},
        [],
    )


def test_values_are_parsed_and_defaulted():
    args, problems = kit.parsed(switchover.RUNBOOK, {"new_primary": "db2"}, HOSTS, EVERYONE)
    assert problems == [] and args == {"new_primary": "db2", "max_lag": 30}
    args, _ = kit.parsed(switchover.RUNBOOK, {"new_primary": "db2", "max_lag": 60}, HOSTS, EVERYONE)
    assert args["max_lag"] == 60
    _, [problem] = kit.parsed(switchover.RUNBOOK, {"new_primary": "db2", "max_lag": "soon"}, HOSTS, EVERYONE)
    assert str(problem).startswith("max_lag = 'soon': not a whole number of seconds. Fix: --data max_lag=30")
    for yes in ("yes", True, 1, "on"):
        assert kit.parsed(seeding.RUNBOOK, {"host": "db2", "wipe": yes}, HOSTS, EVERYONE)[0]["wipe"] is True
    _, [problem] = kit.parsed(seeding.RUNBOOK, {"host": "db2", "wipe": "db2"}, HOSTS, EVERYONE)
    assert (problem.key, problem.message) == ("wipe", "not yes or no")
    _, [problem] = kit.parsed(seeding.RUNBOOK, {}, HOSTS, EVERYONE)
    assert str(problem).startswith("host = None: missing (the replica to seed")
    assert problem.fix == "run with --data host=HOST"


# --- the host a runbook acts on ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["db1,db2", ["db1", "db2"]])
@pytest.mark.parametrize("path", sorted(RUNBOOKS))
def test_a_host_argument_naming_more_than_one_host_is_refused(path, value):
    runbook = RUNBOOKS[path]
    name = runbook.acts_on or "failed"
    _, problems = kit.parsed(runbook, {**valid(runbook), name: value}, HOSTS, EVERYONE)
    [problem] = problems
    assert problem.key == name and problem.message.startswith("names more than one host")


def test_a_group_or_an_unknown_name_is_no_host():
    groups = {"mariadb": ["db1", "db2"]}
    _, [problem] = kit.parsed(seeding.RUNBOOK, {"host": "mariadb"}, HOSTS, EVERYONE, groups)
    assert problem.message == "a group of the inventory, not a host (its hosts: db1, db2)"
    _, [problem] = kit.parsed(seeding.RUNBOOK, {"host": "db9"}, HOSTS, EVERYONE, groups)
    assert str(problem) == "host = 'db9': not a host of the inventory. Fix: one of db1, db2, pg1, pg2"


@pytest.mark.parametrize("path", sorted(RUNBOOKS))
def test_the_host_acted_on_left_out_by_limit_is_refused(path):
    runbook = RUNBOOKS[path]
    args = valid(runbook)
    _, problems = kit.parsed(runbook, args, HOSTS, {"pg1", "pg2"})
    if runbook.acts_on is None:  # failover: the failed primary may be down; its replicas are checked
        assert problems == []
        return
    [problem] = problems
    assert str(problem) == (
        f"--limit = 'pg1,pg2': leaves out {args[runbook.acts_on]}. Fix: include "
        f"{args[runbook.acts_on]} (--limit), and check it answers SSH"
    )


def test_left_out_names_the_hosts_needed_that_take_no_part():
    assert kit.left_out(["db1", "db2"], {"db1", "db2", "pg1"}) == []
    [problem] = kit.left_out(["db1", "db2", "pg1"], {"db2"}, "which it reads", host="db1")
    assert (
        str(problem)
        == "db1: --limit = 'db2': leaves out db1, pg1, which it reads. Fix: limit to db1,db2,pg1 or more"
    )


def test_no_argument_is_named_like_a_host_data_key():
    """pyinfra's --data overrides a host-data key on every host: `--data primary=yes` would make
    every host a replica of "yes"."""
    for runbook in [*RUNBOOKS.values(), rolling_run.ROLL]:
        assert not set(runbook.names()) & validation.KNOWN_KEYS, runbook.path


# --- through pyinfra: the runbook files, their --data ----------------------------------------------------


@pytest.fixture
def pyinfra_run(fleet, monkeypatch):
    """A runbook file loaded for db1 as pyinfra loads it, with `data` as --data and `limit` as
    --limit (the hosts pyinfra activates); the inventory is never validated (it would refuse)."""

    def load(path, data, limit=HOSTS):
        inventory = Inventory(
            ([(name, fleet[name]) for name in HOSTS], {}),
            override_data=data,
            mariadb=(["db1", "db2"], {}),
            postgresql=(["pg1", "pg2"], {}),
        )
        state = State(inventory, Config())
        for name in limit:
            state.activate_host(inventory.get_host(name))
        validated = []
        monkeypatch.setattr(runtime, "_once", {})  # keyed by id(state), which a new State may reuse
        monkeypatch.setattr(kit.preflight, "validate_inventory", lambda **kwargs: validated.append(kwargs))
        with ctx_state.use(state), ctx_inventory.use(inventory), ctx_host.use(inventory.get_host(limit[0])):
            try:
                runpy.run_path(path)
            finally:
                load.validated = validated

    return load


@pytest.mark.parametrize("path", sorted(RUNBOOKS))
def test_every_runbook_refuses_an_unknown_data_key_before_anything(pyinfra_run, path, capsys, monkeypatch):
    runbook = RUNBOOKS[path]
    monkeypatch.setattr(runtime, "_refusals_shown", set())
    with pytest.raises(SystemExit) as raised:
        pyinfra_run(path, {**valid(runbook), "tme": "2026-12-05 06:10:00+00"})
    assert raised.value.code == 2  # refused: the convention's exit status, not pyinfra's 1
    text = capsys.readouterr().err
    assert f"1 problem(s) before {runbook.what}; no host was changed:" in text
    assert f"  - tme = '2026-12-05 06:10:00+00': not an argument of {path}. Fix: " in text
    for name in runbook.names():
        assert f"{name} (" in text
    assert pyinfra_run.validated == []  # refused before the inventory is even validated


def test_a_switchover_limited_away_from_its_group_is_refused_not_an_empty_plan(
    pyinfra_run, monkeypatch, capsys
):
    """`--limit mariadb --data new_primary=pg2 --dry` planned nothing and exited 0."""
    monkeypatch.setattr(runtime, "_refusals_shown", set())
    with pytest.raises(SystemExit) as raised:
        pyinfra_run("runbooks/switchover.py", {"new_primary": "pg2"}, limit=["db1", "db2"])
    assert raised.value.code == 2
    text = capsys.readouterr().err
    assert "new_primary = 'pg2'" not in text
    assert "--limit = 'db1,db2': leaves out pg2. Fix: include pg2" in text


@pytest.fixture
def stand_in(fleet, monkeypatch):
    """The inventory for a module's run() (its active hosts given), without pyinfra."""

    def make(active, me="db1"):
        hosts = {n: SimpleNamespace(name=n, data=d) for n, d in fleet.items()}
        inventory = SimpleNamespace(
            get_host=hosts.__getitem__,
            get_active_hosts=lambda: [hosts[n] for n in active],
        )

        class Inv:
            def __iter__(self):
                return iter(hosts.values())

            def __getattr__(self, name):
                return getattr(inventory, name)

        for module in (kit, switchover_run, failover, engine):
            monkeypatch.setattr(module, "inventory", Inv())
        monkeypatch.setattr(engine, "host", hosts[me])
        monkeypatch.setattr(runtime, "_once", {})

    return make


def test_the_switchover_checks_limit_on_every_host_even_outside_the_group(stand_in):
    stand_in(active={"db1", "db2"})
    with pytest.raises(PyinfraError, match="leaves out pg1, pg2, of pg2's replication group"):
        switchover_run.run({"new_primary": "pg2", "max_lag": 30})


def test_the_failover_checks_limit_on_every_host_even_outside_the_group(stand_in):
    stand_in(active={"db1"})
    with pytest.raises(PyinfraError, match="leaves out pg2, which must follow the new primary"):
        failover.run({"failed": "pg1", "new_primary": None})


# --- rewrite_compression: one host, a primary only when asked ------------------------------------------


def test_the_rewrite_acts_on_one_host_named(fleet):
    _, [problem] = kit.parsed(compression_rewrite.RUNBOOK, {}, HOSTS, EVERYONE)
    assert str(problem).startswith("host = None: missing (the host whose datasets are rewritten")
    _, [problem] = kit.parsed(compression_rewrite.RUNBOOK, {"host": "db2,pg2"}, HOSTS, EVERYONE)
    assert problem.message.startswith("names more than one host")


def test_the_rewrite_refuses_a_primary_unless_asked(fleet):
    primary = HostConfig.from_data("db1", fleet["db1"])
    [problem] = compression_rewrite.host_problems(primary, allow_primary=False)
    assert str(problem).startswith("db1: host = 'db1': is its group's primary")
    assert "./dbzfs roll INVENTORY --limit db1" in problem.fix and "--data allow_primary=yes" in problem.fix
    assert compression_rewrite.host_problems(primary, allow_primary=True) == []
    assert compression_rewrite.host_problems(HostConfig.from_data("db2", fleet["db2"]), False) == []
    args, problems = kit.parsed(
        compression_rewrite.RUNBOOK, {"host": "db1", "allow_primary": "yes"}, HOSTS, EVERYONE
    )
    assert problems == [] and args["allow_primary"] is True


def test_the_roll_names_the_host_and_allows_a_primary_it_rolls_in_place():
    replica = rolling.Step("db2", "mariadb", "mariadb", "replica", "db1")
    primary = rolling.Step("db1", "mariadb", "mariadb", "primary", None)
    assert rolling_run.rewrite_data(replica) == ("host=db2",)
    assert rolling_run.rewrite_data(primary) == ("host=db1", "allow_primary=yes")


# --- the roll's options ------------------------------------------------------------------------------


def test_the_roll_takes_limit_and_data_as_the_runbooks_do(monkeypatch):
    seen = []
    monkeypatch.setattr(rolling_run, "roll", lambda args: seen.append(args) or 0)
    assert rolling_run.main(["inv.py", "--limit", "pg2,pg1", "--limit", "db2", "--data", "max_lag=5"]) == 0
    [args] = seen
    assert args.limit == ["pg2,pg1", "db2"] and args.max_lag == 5
    assert rolling_run.main(["inv.py"]) == 0 and seen[-1].max_lag == 30


def test_the_roll_refuses_an_unknown_data_key_with_2(monkeypatch, capsys):
    monkeypatch.setattr(rolling_run, "roll", lambda args: pytest.fail("ran"))
    assert rolling_run.main(["inv.py", "--data", "max-lag=60"]) == 2
    out = capsys.readouterr().out
    assert "max-lag = '60': not an argument of ./dbzfs roll. Fix: did you mean max_lag?" in out
    assert rolling_run.main(["inv.py", "--data", "max_lag=soon"]) == 2


@pytest.mark.parametrize("old, new", [("--hosts", "--limit A,B"), ("--max-lag", "--data max_lag=S")])
def test_the_rolls_old_option_names_are_refused_with_a_hint(monkeypatch, capsys, old, new):
    monkeypatch.setattr(rolling_run, "roll", lambda args: pytest.fail("ran"))
    with pytest.raises(SystemExit) as exited:
        rolling_run.main(["inv.py", old, "5"])
    assert exited.value.code == 2 and f"{old} is now {new}" in capsys.readouterr().err


# --- the report and the output of an operation --------------------------------------------------------


def test_an_operations_output_is_read_once_it_succeeded_on_that_host():
    outputs = {("pg1", "f"): (True, ["sent 4096"]), ("pg2", "f"): (False, ["half"])}

    def op_data(host, op_hash):
        done, lines = outputs[(host.name, op_hash)]
        meta = SimpleNamespace(is_complete=lambda: True, did_succeed=lambda: done, stdout_lines=lines)
        return SimpleNamespace(operation_meta=meta)

    state = SimpleNamespace(
        get_op_data_for_host=op_data, inventory=SimpleNamespace(get_host=lambda n: SimpleNamespace(name=n))
    )
    op = OperationMeta("f", None)
    assert kit.op_id(op) == "f" and kit.op_id("f") == "f"
    assert kit.output(state, op, "pg1") == ["sent 4096"]
    assert kit.output(state, op, "pg2") == [] and kit.ran(state, op, "pg2") is None
    assert kit.output(state, op, "db9") == []  # not one of its hosts: KeyError inside pyinfra


def test_a_report_reacts_to_its_steps_and_is_registered_once_per_run(monkeypatch):
    seen = []

    class Report(kit.Report):
        def step_started(self, state_, step):
            seen.append(("start", step))

        def step_ended(self, state_, step):
            seen.append(("end", step))

    report = Report({"stop": OperationMeta("a", None), "last": OperationMeta("b", None)})
    for op_hash in ("a", "x", "b"):
        report.operation_start(None, op_hash)
        report.operation_end(None, op_hash)
    assert seen == [("start", "stop"), ("end", "stop"), ("start", "last"), ("end", "last")]
    handlers = []
    monkeypatch.setattr(kit, "state", SimpleNamespace(add_callback_handler=handlers.append))
    monkeypatch.setattr(kit, "_reported", set())
    kit.report_once("r", report)
    kit.report_once("r", Report({}))
    assert handlers == [report]


# --- the switchover's plan (--dry) on a primary holding a database the inventory does not declare ----------

STATUS_OF_A_PRIMARY = {}  # SHOW SLAVE STATUS: replicates from nobody
PLANNING = SimpleNamespace(is_executing=False)


def test_a_dry_switchover_plans_the_old_primarys_check_it_does_not_refuse_or_seed_it(fleet, monkeypatch):
    """`runbooks/switchover.py --dry` on a lab whose primary db1 holds `crashck`, which no
    inventory declares: the plan read db1 replicating from nobody (the facts before the switch)
    and the converge's mariadb.replica refused to seed it over crashck, while the real run
    (operations generated after db1 follows db2) succeeded. Every step of db1 is generated here
    as pyinfra's --dry generates it, against db1's facts before the switch."""
    group = engine.group(HostConfig.from_data("db1", fleet["db1"]))
    group = engine.Group(group.me, tuple(HostConfig.from_data(n, fleet[n]) for n in ("db1", "db2")))
    facts = {
        MariadbReplicaStatus: STATUS_OF_A_PRIMARY,
        MariadbSchemas: ["crashck", "mysql", "performance_schema", "sys"],
        MariadbVariables: lambda *a, **k: {"read_only": "OFF"},
    }
    monkeypatch.setattr(engine, "secret", lambda key: "s3cret")
    monkeypatch.setattr(mariadb, "role_config", lambda cfg: None)
    monkeypatch.setattr(kit, "report_once", lambda key, report: None)
    monkeypatch.setattr(mariadb_topology, "state", PLANNING)
    ran = []

    def step(applies, why_not, op, **kwargs):
        if applies:
            kwargs.pop("name", None)
            with ctx_host.use(FakeHost(facts)) as _:
                ran.append((op._inner.__name__, list(op._inner(**kwargs))))
        return OperationMeta(f"op{len(ran)}", None)

    monkeypatch.setattr(engine, "step", step)
    switchover_mariadb.steps(group.me, group, "db2")  # db1's deploy: no OperationError
    names = [name for name, _ in ran]
    assert names == ["read_only", "follow", "replicates_from"]
    assert ran[-1][1] == []  # the check is planned, not judged from facts read before the follow
    # The converge's operation, which the runbook used: it refuses (and without crashck it would
    # plan a mariadb-dump seed of the old primary, which the run never does).
    with ctx_host.use(FakeHost(facts)), pytest.raises(OperationError, match="refusing to seed it"):
        list(mariadb_ops.replica._inner(primary_address="10.99.0.12", replication_user="r", password="p"))


def test_the_check_after_the_switch_judges_the_live_status(monkeypatch):
    monkeypatch.setattr(mariadb_topology, "state", SimpleNamespace(is_executing=True))
    healthy = {
        "Master_Host": "10.99.0.12",
        "Master_Port": "3306",
        "Using_Gtid": "Slave_Pos",
        "Slave_IO_Running": "Yes",
        "Slave_SQL_Running": "Yes",
        "Seconds_Behind_Master": "0",
    }
    host = FakeHost({MariadbReplicaStatus: healthy})
    with ctx_host.use(host):
        assert list(mariadb_topology.replicates_from._inner(primary_address="10.99.0.12")) == []
    assert "replicates from 10.99.0.12" in host.noops[0]
    for status, match in (({}, "replicates from nobody"), ({**healthy, "Slave_SQL_Running": "No"}, "SQL")):
        with (
            ctx_host.use(FakeHost({MariadbReplicaStatus: status})),
            pytest.raises(OperationError, match=match),
        ):
            list(mariadb_topology.replicates_from._inner(primary_address="10.99.0.12"))
