"""bench/guest.py's scripts (what the benchmark runs on its VM) and bench/run.py's pure parts:
every script parses as bash, and each variant's storage is built from its own data only."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from bench import guest, run, variants
from lab import definition

VM = definition.load().vm(run.VM_NAME)
DATA = {engine: run.host_data(VM, engine) for engine in variants.ENGINES}
DRIVES = run.drive_paths(VM)


def by_name(engine):
    return {v.name: v for v in variants.variants(engine, DATA[engine])}


def bash_parses(text):
    result = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return text


def every_script():
    for engine in variants.ENGINES:
        for v in variants.variants(engine, DATA[engine]):
            yield (
                f"{engine}/{v.name}/storage",
                (
                    guest.zfs_storage(v, "dbpool", DRIVES, run.module_params(v, DATA[engine]))
                    if v.storage == "zfs"
                    else guest.md_storage(v, DRIVES)
                ),
            )
            yield (
                f"{engine}/{v.name}/config",
                guest.server_config(v, variants.variant_config(v, DATA[engine])),
            )
            yield f"{engine}/{v.name}/caches", guest.cold_caches(v, "dbpool")
            yield f"{engine}/{v.name}/flushed", guest.flushed(engine, v.storage, "dbpool")
        tuned = variants.variants(engine, DATA[engine])[0]
        yield f"{engine}/new", guest.new_database(engine, tuned.directories)
        yield f"{engine}/start", guest.start(engine)
        yield f"{engine}/stop", guest.stop(engine)
        yield f"{engine}/readings", guest.readings(engine)
        yield f"{engine}/save", guest.save_golden(engine, tuned.directories, "mariadb tables=2 rows=9")
        yield f"{engine}/saved key", guest.saved_key(engine)
        yield f"{engine}/restore", guest.restore_golden(engine, tuned.directories)
        yield f"{engine}/sql_load", guest.sql_load(engine, "/var/tmp/x.sql", "dbpool")
    yield "snapshot", guest.snapshot_start("dbpool")
    yield "rollback", guest.rollback_start("dbpool")
    yield "packages", guest.packages()
    yield "teardown", guest.teardown(DRIVES)
    yield "drives", guest.drive_names(DRIVES)
    yield "sysbench prepare", guest.sysbench_prepare(2, 100, 1)
    yield "sysbench run", guest.sysbench_run("oltp_write_only", 2, 100, 10, 4, 1)
    yield "pgbench init", guest.pgbench_init(1)
    yield "pgbench run", guest.pgbench_run(100, 4, 1)


@pytest.mark.parametrize("name,text", list(every_script()), ids=[n for n, _ in every_script()])
def test_every_script_is_bash_that_stops_at_the_first_error(name, text):
    bash_parses(text)
    assert text.startswith("set -euo pipefail\n")


def test_the_bench_vm_is_sized_as_deploy_sizes_a_2_gib_host():
    assert DATA["mariadb"]["hardware"] == {"ram_bytes": 2 * 1024**3, "cpus": 2}
    assert DATA["mariadb"]["db_settings"] == {"innodb_buffer_pool_size": "256M"}
    assert DATA["postgresql"]["db_settings"] == {"shared_buffers": "128MB"}
    assert len(DRIVES) == 24 and DRIVES[0] == "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_bench1-nvme00"


def test_mirrors_and_spares():
    assert guest.mirror_vdevs(["a", "b", "c", "d", "e"], 2, 1) == [
        "mirror",
        "a",
        "b",
        "mirror",
        "c",
        "d",
        "spare",
        "e",
    ]
    with pytest.raises(ValueError, match="3 drives do not make mirrors of 2"):
        guest.mirror_vdevs(["a", "b", "c"], 2, 0)


def test_tuned_storage_is_the_pool_and_datasets_deploy_converges():
    text = guest.zfs_storage(
        by_name("mariadb")["tuned"], "dbpool", DRIVES, {"zfs_arc_max": 1, "zfs_prefetch_disable": 1}
    )
    lines = text.splitlines()
    assert "echo 1 > /sys/module/zfs/parameters/zfs_prefetch_disable" in lines
    create = next(line for line in lines if line.startswith("zpool create"))
    assert create.startswith("zpool create -o ashift=12 -o autoreplace=on -o autotrim=on dbpool mirror ")
    assert create.count(" mirror ") == 12 and " spare " not in create
    assert (
        "zfs create -o mountpoint=/datastore/mysql -o recordsize=16k -o logbias=throughput "
        "-o redundant_metadata=most -o primarycache=metadata dbpool/datastore/mysql"
    ) in lines


def test_zfs_defaults_name_no_property_but_the_mountpoint_and_put_prefetch_back():
    v = by_name("postgresql")["zfs-defaults"]
    params = run.module_params(v, DATA["postgresql"])
    assert params["zfs_prefetch_disable"] == 0 and params["zfs_arc_max"] > 0
    lines = guest.zfs_storage(v, "dbpool", DRIVES, params).splitlines()
    create = next(line for line in lines if line.startswith("zpool create"))
    assert create.startswith("zpool create dbpool mirror ")
    assert [line for line in lines if line.startswith("zfs create")] == [
        "zfs create -o mountpoint=/datastore dbpool/datastore"
    ]


def test_md_ext4_is_raid10_near_2_over_every_drive_with_ext4_defaults():
    text = guest.md_storage(by_name("mariadb")["md-ext4"], DRIVES)
    assert "--level=10 --layout=n2 --raid-devices=24 " in text and "--assume-clean" in text
    assert "mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 /dev/md/bench" in text
    assert "mount -o defaults /dev/md/bench /datastore" in text


def test_the_config_goes_where_the_server_reads_it_with_its_directories():
    v = by_name("postgresql")["tuned+full_page_writes"]
    text = guest.server_config(v, variants.variant_config(v, DATA["postgresql"]))
    assert "shared_buffers = '128MB'" in text
    assert f"cat > /etc/postgresql/{guest.PG_VERSION}/main/postgresql.conf <<'DBZFS_BENCH_CONFIG'" in text
    assert "full_page_writes = on" in text
    assert (
        f"install -d -m 0700 -o postgres -g postgres /datastore/postgresql-wal/{guest.PG_VERSION}/main"
        in text
    )
    v = by_name("mariadb")["tuned"]
    text = guest.server_config(v, variants.variant_config(v, DATA["mariadb"]))
    assert "innodb_buffer_pool_size        = 256M" in text
    assert (
        "cat > /etc/mysql/mariadb.conf.d/90-dbzfs.cnf" in text
        and "server_id                      = 1" in text
    )
    assert "install -d -m 0700 -o mysql -g mysql /datastore/mysql-log/redo" in text


def test_readings_and_pgbench_output_split():
    sep = guest.SEPARATOR + "\n"
    assert guest.split_readings(f"disk\n{sep}stat\n{sep}counters\n") == ("disk\n", "stat\n", "counters\n")
    report, logs = guest.split_pgbench(f"report\n{sep}log one\n{sep}log two\n{sep}")
    assert report == "report\n" and logs == ["log one\n", "log two\n"]
    with pytest.raises(ValueError, match="no log file"):
        guest.split_pgbench("report\n")


def test_a_sql_load_prints_its_seconds():
    result = subprocess.run(
        [
            "bash",
            "-c",
            "t0=$EPOCHREALTIME; sleep 0.2; awk -v t0=$t0 -v t1=$EPOCHREALTIME "
            "'BEGIN {printf \"%.3f\\n\", t1 - t0}'",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert 0.2 <= float(result.stdout) < 2
    assert "awk -v t0=$t0 -v t1=$EPOCHREALTIME 'BEGIN {printf \"%.3f\\n\", t1 - t0}'" in guest.sql_load(
        "mariadb", "/x", "dbpool"
    )


def test_the_compression_figures_are_what_the_load_added():
    from bench import measure

    empty = {"compressratio": 5.0, "logical_bytes": 10_000, "physical_bytes": 2_000}
    loaded = {"compressratio": 2.5, "logical_bytes": 310_000, "physical_bytes": 102_000}
    assert measure.compression_delta(empty, loaded) == {
        "compressratio": 3.0,
        "logical_bytes": 300_000,
        "physical_bytes": 100_000,
    }
    with pytest.raises(ValueError, match="the load added no data"):
        measure.compression_delta(loaded, loaded)


def test_a_failure_is_one_line_not_a_traceback(monkeypatch, capsys):
    from lab.vm import LabError

    def down(*args):
        raise LabError("bench1: no ssh after 300 s (console: .lab/bench1/console.log)")

    monkeypatch.setattr(run, "bench", down)
    assert run.main(["--quick"]) == 1
    assert capsys.readouterr().err == (
        "==> bench FAILED: bench1: no ssh after 300 s (console: .lab/bench1/console.log)\n"
    )


class FakeGuest:
    """Records the steps a bench would run on its VM; `answers` maps a step to what it prints."""

    def __init__(self, answers=None):
        self.ran: list[str] = []
        self.steps: list = []
        self.answers = answers or {}

    def run(self, what, script, timeout=3600, quiet=False):
        self.ran.append(what)
        return self.answers.get(what, "")


def engine_bench(engine, guest_, sizes=run.QUICK):
    b = run.EngineBench.__new__(run.EngineBench)
    b.g, b.engine, b.sizes, b.log = guest_, engine, sizes, lambda m: None
    b.data = DATA[engine]
    b.variants = variants.variants(engine, b.data)
    b.pool = "dbpool"
    b.drives = DRIVES
    b.kernel_names = []
    return b


def test_rounds_interleave_the_variants_and_roll_zfs_back_for_the_second_workload(monkeypatch):
    b = engine_bench("mariadb", FakeGuest(), run.FULL)
    calls = []
    monkeypatch.setattr(b, "one_run", lambda w, v, fresh: calls.append((w, v.name, fresh)) or {})
    measured = b.rounds()
    names = [v.name for v in b.variants]
    per_round = [
        (w, n, w == "oltp_write_only" or n == "md-ext4") for n in names for w in run.WORKLOADS["mariadb"]
    ]
    assert calls == per_round * run.FULL.runs
    assert all(len(runs) == run.FULL.runs for w in measured.values() for runs in w.values())


def test_a_zfs_variant_snapshots_what_it_restored_and_its_next_run_rolls_back_to_it(monkeypatch):
    monkeypatch.setattr(run.measure, "run_figures", lambda *a: {"bytes_per_transaction": 1})
    monkeypatch.setattr(run.measure, "written_delta", lambda *a: 0)
    monkeypatch.setattr(run.measure, "counter_delta", lambda *a: {})
    monkeypatch.setattr(run.measure, "cpu_seconds", lambda *a: 0)
    monkeypatch.setattr(run.guest, "split_readings", lambda text: ("", "", ""))
    tuned = by_name("mariadb")["tuned"]
    g = FakeGuest()
    b = engine_bench("mariadb", g)
    load = SimpleNamespace(transactions=1, tps=1.0)
    monkeypatch.setattr(run.measure, "parse_sysbench", lambda out: load)
    b.one_run("oltp_write_only", tuned, fresh=True)
    assert "data restored" in g.ran and g.ran.index("snapshot @start") == g.ran.index("data restored") + 1
    g.ran.clear()
    b.one_run("oltp_read_write", tuned, fresh=False)
    assert g.ran[0] == "rolled back to @start" and "data restored" not in g.ran
    assert not any(step.endswith(": storage") for step in g.ran)
    g.ran.clear()
    b.one_run("oltp_write_only", by_name("mariadb")["md-ext4"], fresh=True)
    assert "data restored" in g.ran and "snapshot @start" not in g.ran


def test_a_saved_data_set_with_the_same_key_is_reused_and_another_is_loaded_again():
    b = engine_bench("mariadb", FakeGuest())
    key = b.golden_key()
    assert key == f"mariadb sysbench tables=2 rows=2000 seed={run.SEED} binlog=reset"
    b.g = FakeGuest({"saved data set": key + "\n"})
    b.golden()
    assert b.g.ran == ["saved data set"]
    b.g = FakeGuest({"saved data set": "mariadb sysbench tables=4 rows=750000 seed=1\n"})
    b.golden()
    assert "data set saved to the root disk" in b.g.ran and any("sysbench prepare" in r for r in b.g.ran)


def test_the_key_is_written_after_the_copy_is_complete():
    tuned = by_name("mariadb")["tuned"]
    text = guest.save_golden("mariadb", tuned.directories, "k 1")
    assert text.rstrip().splitlines()[-1] == f"printf '%s\\n' 'k 1' > {guest.GOLDEN_DIR}/mariadb/key"
    assert text.index("sync") > text.rindex("tar -C")


FAKE_MARIADB = """#!/bin/sh
# The dirty-page count from a list, one per SHOW, the last one repeated; settings answer 90.
case "$*" in
  *Innodb_buffer_pool_pages_dirty*)
    n=$(head -n 1 "$COUNTS"); [ "$(wc -l < "$COUNTS")" -gt 1 ] && sed -i 1d "$COUNTS"
    printf 'Innodb_buffer_pool_pages_dirty\\t%s\\n' "$n" ;;
  *SELECT*) echo 90 ;;
esac
"""


@pytest.mark.parametrize(
    ("counts", "ok"),
    [
        # clean once, dirtied again in the background after the settings are restored: done
        ([3, 0, 7], True),
        ([0], True),
        # never clean within the timeout (2 s)
        ([5], False),
    ],
)
def test_flushed_waits_for_the_load_s_pages_only(tmp_path, counts, ok):
    (tmp_path / "mariadb").write_text(FAKE_MARIADB)
    (tmp_path / "mariadb").chmod(0o755)
    (tmp_path / "counts").write_text("".join(f"{n}\n" for n in counts))
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "COUNTS": str(tmp_path / "counts")}
    script = guest.flushed("mariadb", "md-ext4", "dbpool", timeout=2)
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert (result.returncode == 0) is ok, result.stderr
    if not ok:
        assert result.stderr.strip() == "InnoDB still has dirty pages after 2 s"
