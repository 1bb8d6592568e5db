"""The compression rewrite: what is rewritten and what refuses (day2/compression_rewrite.py), the
commands of each step against fact stubs, cut runs included (operations/rewrite.py), and the
roll's before/after report (day2/rolling.py)."""

from types import SimpleNamespace

import pytest

from day2 import compression_rewrite as cr, rolling
from facts.zfs import ZfsDatasetProperties, ZpoolProperties
from model.hostdata import HostConfig
from model.zfs_properties import BLOCKS_COMPRESSION
from operations import rewrite, runtime, zfs as zfs_ops
from roles import engine

from tests.unit.conftest import GIB, host_data
from tests.unit.fact_stubs import FakeHost, run_operation

DATA, WAL = "dbpool/datastore/postgresql", "dbpool/datastore/postgresql-wal"


def config(**overrides):
    return HostConfig.from_data(
        "pg2",
        host_data(
            engine="postgresql", role="replica", primary="pg1", **{"zfs_compression": "zstd", **overrides}
        ),
    )


def dataset(compression="zstd", blocks="lz4", used=GIB):
    found = {"compression": compression, "used": used, BLOCKS_COMPRESSION: blocks}
    return {k: {"value": str(v), "source": "local"} for k, v in found.items() if v is not None}


def zfs(table):
    def answer(datasets, recursive=False):
        wanted = [datasets] if isinstance(datasets, str) else list(datasets)
        return {name: value for name, value in table.items() if name in wanted}

    return answer


def pool(size_gib, allocated_gib):
    return {"size": {"value": str(size_gib * GIB)}, "allocated": {"value": str(allocated_gib * GIB)}}


# --- what is rewritten, what refuses -------------------------------------------------------------


def test_a_dataset_whose_blocks_carry_another_compression_is_rewritten():
    cfg = config()
    found = {DATA: dataset(blocks="lz4"), WAL: dataset(blocks="zstd-3")}
    targets = cr.targets(cfg, found)
    assert [(t.live, t.wanted, t.recorded) for t in targets] == [
        (DATA, "zstd", "lz4"),
        (WAL, "zstd", "zstd-3"),
    ]
    assert [t.live for t in cr.to_rewrite(targets)] == [DATA]  # zstd-3 is zstd


def test_a_dataset_without_the_record_is_left_alone():
    found = {DATA: dataset(blocks=None), WAL: dataset(blocks="zstd")}
    assert cr.to_rewrite(cr.targets(config(), found)) == []


def test_a_child_declaring_its_own_compression_gets_it():
    cfg = config(zfs_dataset_properties={"datastore/postgresql-wal": {"compression": "lz4"}})
    assert (cfg.compression_of("datastore/postgresql"), cfg.compression_of("datastore/postgresql-wal")) == (
        "zstd",
        "lz4",
    )


def test_the_rewrite_refuses_a_host_not_converged_yet():
    found = {DATA: dataset(compression="lz4", blocks="lz4"), WAL: dataset(compression="lz4", blocks="lz4")}
    problems = cr.problems(config(), found, pool(100, 10))
    assert [(p.key, p.message) for p in problems] == [
        ("zfs_compression", f"{DATA} still gets compression=lz4 for new blocks"),
        ("zfs_compression", f"{WAL} still gets compression=lz4 for new blocks"),
    ]
    assert problems[0].fix.startswith("converge the host first")


def test_the_rewrite_refuses_copies_that_would_cross_the_capacity_threshold():
    found = {DATA: dataset(used=30 * GIB), WAL: dataset(used=5 * GIB)}
    assert cr.problems(config(), found, pool(100, 40)) == []  # 40 + 35 < 80
    [problem] = cr.problems(config(), found, pool(100, 50))
    assert (problem.host, problem.key, problem.value) == ("pg2", "zfs_capacity_threshold", 80)
    assert problem.message == (
        "the copies need 35.0 GiB; pool dbpool has 30.0 GiB below the threshold (50.0 of 100.0 GiB allocated)"
    )


# --- the steps' commands ---------------------------------------------------------------------------


def snapshots(*names):
    return {name: {} for name in names}


def test_full_copy_snapshots_both_datasets_at_once_and_receives_with_the_declared_properties():
    found = {DATA: dataset(), WAL: dataset()}
    received = {DATA: {"recordsize": "32k", BLOCKS_COMPRESSION: "zstd"}, WAL: {BLOCKS_COMPRESSION: "zstd"}}
    commands, _ = run_operation(rewrite.full_copy, {ZfsDatasetProperties: zfs(found)}, received)
    assert commands == [
        f"zfs snapshot {DATA}@dbzfs-rewrite-full {WAL}@dbzfs-rewrite-full",
        f"set -o pipefail; zfs send -L {DATA}@dbzfs-rewrite-full | zfs recv -u -o recordsize=32k "
        f"-o {BLOCKS_COMPRESSION}=zstd {DATA}-rewrite",
        f"set -o pipefail; zfs send -L {WAL}@dbzfs-rewrite-full | zfs recv -u -o {BLOCKS_COMPRESSION}=zstd "
        f"{WAL}-rewrite",
    ]
    assert all("-c" not in c.split() for c in commands)  # -c would keep the old compression


def test_full_copy_after_a_cut_receive_starts_that_copy_again_and_keeps_the_finished_one():
    found = {
        DATA: dataset(),
        WAL: dataset(),
        **snapshots(f"{DATA}@dbzfs-rewrite-full", f"{WAL}@dbzfs-rewrite-full"),
        f"{DATA}-rewrite": dataset(),
        f"{DATA}-rewrite@dbzfs-rewrite-full": {},
        f"{WAL}-rewrite": dataset(),  # cut before its snapshot arrived
    }
    received = {DATA: {BLOCKS_COMPRESSION: "zstd"}, WAL: {BLOCKS_COMPRESSION: "zstd"}}
    commands, _ = run_operation(rewrite.full_copy, {ZfsDatasetProperties: zfs(found)}, received)
    assert commands == [
        f"zfs destroy -r {WAL}-rewrite",
        f"set -o pipefail; zfs send -L {WAL}@dbzfs-rewrite-full | zfs recv -u -o {BLOCKS_COMPRESSION}=zstd "
        f"{WAL}-rewrite",
    ]


def test_nothing_is_copied_once_the_live_datasets_carry_the_record():
    found = {DATA: dataset(blocks="zstd"), WAL: dataset(blocks="zstd")}
    for op, args in (
        (rewrite.full_copy, {DATA: {BLOCKS_COMPRESSION: "zstd"}, WAL: {BLOCKS_COMPRESSION: "zstd"}}),
        (rewrite.final_copy, {DATA: "zstd", WAL: "zstd"}),
    ):
        commands, host = run_operation(op, {ZfsDatasetProperties: zfs(found)}, args)
        assert commands == [] and host.noops == [f"rewritten: {DATA}, {WAL}"]


def test_final_copy_takes_its_snapshot_again_since_an_older_one_may_predate_writes():
    found = {
        DATA: dataset(),
        f"{DATA}@dbzfs-rewrite-final": {},
        f"{DATA}-rewrite@dbzfs-rewrite-final": {},
        f"{DATA}-rewrite@dbzfs-rewritten": {},
    }
    commands, _ = run_operation(rewrite.final_copy, {ZfsDatasetProperties: zfs(found)}, {DATA: "zstd"})
    assert commands == [
        f"zfs destroy {DATA}@dbzfs-rewrite-final",
        f"zfs rollback -r {DATA}-rewrite@dbzfs-rewrite-full",
        f"zfs snapshot {DATA}@dbzfs-rewrite-final",
        f"set -o pipefail; zfs send -L -i {DATA}@dbzfs-rewrite-full {DATA}@dbzfs-rewrite-final | zfs recv -u "
        f"{DATA}-rewrite",
        f"zfs snapshot {DATA}-rewrite@dbzfs-rewritten",
    ]


def test_a_run_cut_after_the_last_receive_rolls_the_copy_back_to_its_full_snapshot():
    """test-long at 7f92a69: killed between the incremental receive and @DONE, the copy held
    @FINAL's blocks; destroying @FINAL alone left it "modified since most recent snapshot"."""
    found = {
        DATA: dataset(),
        f"{DATA}@dbzfs-rewrite-full": {},
        f"{DATA}@dbzfs-rewrite-final": {},
        f"{DATA}-rewrite": dataset(),
        f"{DATA}-rewrite@dbzfs-rewrite-full": {},
        f"{DATA}-rewrite@dbzfs-rewrite-final": {},
    }
    commands, _ = run_operation(rewrite.final_copy, {ZfsDatasetProperties: zfs(found)}, {DATA: "zstd"})
    assert commands[:2] == [
        f"zfs destroy {DATA}@dbzfs-rewrite-final",
        f"zfs rollback -r {DATA}-rewrite@dbzfs-rewrite-full",
    ]
    # Cut inside the receive instead: nothing arrived, the copy still ends at @FULL, no rollback.
    del found[f"{DATA}-rewrite@dbzfs-rewrite-final"]
    commands, _ = run_operation(rewrite.final_copy, {ZfsDatasetProperties: zfs(found)}, {DATA: "zstd"})
    assert not any("rollback" in c for c in commands)


def test_cleanup_waits_for_every_dataset_and_then_destroys_what_the_rewrite_left():
    left = snapshots(f"{DATA}-before-rewrite", f"{DATA}@dbzfs-rewrite-full", f"{DATA}@dbzfs-rewritten")
    found = {DATA: dataset(blocks="zstd"), WAL: dataset(blocks="lz4"), **left}
    commands, _ = run_operation(
        rewrite.cleaned_up, {ZfsDatasetProperties: zfs(found)}, {DATA: "zstd", WAL: "zstd"}
    )
    assert commands == []
    found[WAL] = dataset(blocks="zstd")
    commands, _ = run_operation(
        rewrite.cleaned_up, {ZfsDatasetProperties: zfs(found)}, {DATA: "zstd", WAL: "zstd"}
    )
    assert commands == [
        f"zfs destroy -r {DATA}-before-rewrite",
        f"zfs destroy {DATA}@dbzfs-rewrite-full",
        f"zfs destroy {DATA}@dbzfs-rewritten",
    ]


def test_a_new_dataset_records_the_compression_of_its_blocks_and_a_converge_never_compares_it():
    commands, _ = run_operation(
        zfs_ops.dataset,
        {ZfsDatasetProperties: {}},
        DATA,
        properties={"recordsize": "32k"},
        on_create={BLOCKS_COMPRESSION: "lz4"},
    )
    assert commands == [f"zfs create -o recordsize=32k -o {BLOCKS_COMPRESSION}=lz4 {DATA}"]
    live = {DATA: {"recordsize": {"value": "32768", "source": "local"}}}
    commands, host = run_operation(
        zfs_ops.dataset,
        {ZfsDatasetProperties: live},
        DATA,
        properties={"recordsize": "32k"},
        on_create={BLOCKS_COMPRESSION: "zstd"},
    )
    assert commands == [] and host.noops == [f"dataset {DATA} has the declared properties"]


# --- the roll's report ---------------------------------------------------------------------------


def test_the_report_sums_physical_and_logical_sizes_before_and_after():
    before = rolling.parse_sizes(
        f"{DATA}\tused\t300\n{DATA}\tlogicalused\t900\n{DATA}\tcompressratio\t3.00\n{DATA}\t{BLOCKS_COMPRESSION}\tlz4\n"
        f"{WAL}\tused\t100\n{WAL}\tlogicalused\t100\n{WAL}\t{BLOCKS_COMPRESSION}\t-\n"
    )
    assert rolling.needs_rewrite(before, {DATA: "zstd", WAL: "zstd"}) == [DATA]
    assert rolling.unrecorded(before, {DATA: "zstd", WAL: "zstd"}) == [WAL]  # said, never guessed
    after = {DATA: {"used": "200", "logicalused": "900", BLOCKS_COMPRESSION: "zstd"}}
    report = rolling.rewrite_report(before, after, [DATA])
    assert report["before"] == {"used": 300, "logicalused": 900, "compressratio": 3.0}
    assert report["after"] == {"used": 200, "logicalused": 900, "compressratio": 4.5}
    assert report["datasets"][DATA]["before"]["compression"] == "lz4"
    assert rolling.rewrite_line(report) == (
        "0.0 MiB -> 0.0 MiB on the pool (33% less; logical 0.0 MiB -> 0.0 MiB), compressratio 3.00x -> 4.50x"
    )


@pytest.mark.parametrize("relative", ["datastore/postgresql", "datastore/postgresql-wal"])
def test_the_storage_role_records_the_compression_at_creation(relative):
    cfg = config()
    assert relative in cfg.child_datasets and cfg.compression_of(relative) == "zstd"


# --- the run itself: facts read, pre-checks, then the steps -------------------------------------


@pytest.fixture
def run_on(monkeypatch):
    """cr.run on one stand-in host (fact_stubs.FakeHost, named pg2, with its data); returns what
    reached cr.steps (None: it stopped before)."""

    def run(table, pool_answer, args):
        h = FakeHost({ZfsDatasetProperties: zfs(table), ZpoolProperties: pool_answer})
        h.name, h.print_prefix = "pg2", "[pg2] "
        h.data = host_data(engine="postgresql", role="replica", primary="pg1", zfs_compression="zstd")
        monkeypatch.setattr(cr, "inventory", SimpleNamespace(get_host=lambda name: h))
        monkeypatch.setattr(cr, "host", h)
        monkeypatch.setattr(engine, "host", h)
        monkeypatch.setattr(runtime, "_once", {})
        reached = []
        monkeypatch.setattr(cr, "steps", lambda cfg, these, found: reached.append([t.live for t in these]))
        cr.run(args)
        return reached[0] if reached else None

    return run


def test_the_run_reads_the_host_checks_and_reaches_its_steps(run_on):
    """The path every real rewrite takes (a local name once shadowed the pre-check function here,
    and every rewrite raised a TypeError on the lab)."""
    table = {DATA: dataset(blocks="lz4"), WAL: dataset(blocks="zstd")}
    assert run_on(table, pool(100, 10), {"host": "pg2"}) == [DATA]


def test_the_run_refuses_before_any_step_when_the_pool_lacks_the_space(run_on):
    table = {DATA: dataset(blocks="lz4", used=50 * GIB), WAL: dataset(blocks="zstd")}
    with pytest.raises(runtime.Refused, match="the copies need"):
        run_on(table, pool(100, 60), {"host": "pg2"})


def test_the_run_does_nothing_when_every_dataset_carries_its_compression(run_on):
    table = {DATA: dataset(blocks="zstd"), WAL: dataset(blocks="zstd")}
    assert run_on(table, pool(100, 10), {"host": "pg2"}) is None


@pytest.mark.parametrize(
    ("engine_name", "release", "unit"),
    [
        ("postgresql", "13", "postgresql@17-main.service"),
        ("postgresql", "12", "postgresql@15-main.service"),
        ("mariadb", "13", "mariadb.service"),
    ],
)
def test_the_steps_stop_and_start_the_hosts_own_server(monkeypatch, engine_name, release, unit):
    """The unit the rewrite starts is the host's server on its release (a lookup by engine name
    alone raised on the lab once, at 5f676cc, before any step)."""
    calls = []

    def recorder(module):
        return SimpleNamespace(**{f: (lambda f=f, **kw: calls.append((module, f, kw))) for f in module})

    monkeypatch.setattr(cr, "rewrite", recorder(["full_copy", "final_copy", "cleaned_up"]))
    monkeypatch.setattr(cr, "seeding_ops", recorder(["server_stopped", "put_in_place", "mounted"]))
    monkeypatch.setattr(cr, "systemd", recorder(["service"]))
    monkeypatch.setattr(cr, "snapshots", recorder(["retaken"]))
    data = host_data(engine=engine_name, role="replica", primary="x", debian_release=release)
    cr.steps(HostConfig.from_data("h", data), [], [])
    [service] = [kw for _, f, kw in calls if f == "service"]
    assert service["service"] == unit and service["running"] is True
