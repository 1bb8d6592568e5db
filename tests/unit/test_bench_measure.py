"""bench/measure.py on real outputs (tests/unit/fixtures/bench/README.md says how each was
captured): sysbench 1.0.20 against MariaDB 10.11, pgbench 15 with its per-transaction log, the
engines' counters, /proc/diskstats and /proc/stat around each run; then the arithmetic."""

import math
from pathlib import Path

import pytest

from bench import measure

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "bench"


def fixture(name):
    return (FIXTURES / name).read_text()


# --- sysbench, pgbench --------------------------------------------------------------------------


def test_sysbench_oltp_write_only():
    load = measure.parse_sysbench(fixture("sysbench/oltp_write_only.stdout.txt"))
    assert load == measure.Load(
        transactions=300, failed=0, tps=1085.66, latency_avg_ms=1.82, latency_p95_ms=4.82, seconds=0.2751
    )


def test_sysbench_oltp_read_write():
    load = measure.parse_sysbench(fixture("sysbench/oltp_read_write.stdout.txt"))
    assert (load.transactions, load.tps, load.latency_p95_ms, load.seconds) == (300, 418.10, 11.04, 0.7163)


def test_sysbench_output_without_its_percentile_is_refused():
    text = fixture("sysbench/oltp_write_only.stdout.txt").replace("95th percentile", "99th percentile")
    with pytest.raises(ValueError, match="95th percentile"):
        measure.parse_sysbench(text)


def test_pgbench_report_and_its_log():
    log = fixture("pgbench/pgbench_log.txt")
    load = measure.parse_pgbench(fixture("pgbench/pgbench.stdout.txt"), [log])
    assert (load.transactions, load.failed, load.tps, load.latency_avg_ms) == (300, 0, 2132.423499, 0.938)
    assert load.seconds == pytest.approx(300 / 2132.423499)
    latencies = measure.pgbench_latencies_ms(log)
    assert len(latencies) == 300 and load.latency_p95_ms == measure.percentile(latencies, 95)
    # The log's latencies are the report's: their mean is near pgbench's latency average (which
    # it computes from the run's time, not from the log).
    assert statistics_mean(latencies) == pytest.approx(load.latency_avg_ms, rel=0.3)
    assert min(latencies) < load.latency_p95_ms < max(latencies)


def statistics_mean(values):
    return sum(values) / len(values)


def test_pgbench_p95_over_the_log_files_of_several_threads():
    lines = fixture("pgbench/pgbench_log.txt").splitlines(keepends=True)
    halves = ["".join(lines[:150]), "".join(lines[150:])]
    assert measure.pgbench_p95(halves) == measure.pgbench_p95(["".join(lines)])


def test_pgbench_log_skips_failed_and_skipped_transactions():
    log = "0 1 1500 0 1796297677 180486\n0 2 failed 0 1796297677 180490\n1 1 skipped 0 1796297677 180491\n"
    assert measure.pgbench_latencies_ms(log) == [1.5]


def test_pgbench_report_and_log_that_disagree_are_refused():
    lines = fixture("pgbench/pgbench_log.txt").splitlines(keepends=True)
    with pytest.raises(ValueError, match="log holds 299 transactions, its report 300"):
        measure.parse_pgbench(fixture("pgbench/pgbench.stdout.txt"), ["".join(lines[1:])])


def test_pgbench_without_tps_is_refused():
    text = "\n".join(line for line in fixture("pgbench/pgbench.stdout.txt").splitlines() if "tps" not in line)
    with pytest.raises(ValueError, match="no tps in the pgbench output"):
        measure.parse_pgbench(text, [fixture("pgbench/pgbench_log.txt")])


def test_nearest_rank_percentile():
    assert measure.percentile(range(1, 101), 95) == 95
    assert measure.percentile([3.0], 95) == 3.0
    assert measure.percentile([1, 2, 3, 4], 50) == 2
    with pytest.raises(ValueError):
        measure.percentile([], 95)


# --- engine counters ----------------------------------------------------------------------------


def test_mariadb_status_delta():
    delta = measure.counter_delta(
        fixture("sysbench/oltp_write_only.status.before.txt"),
        fixture("sysbench/oltp_write_only.status.after.txt"),
        measure.MARIADB_COUNTERS,
    )
    assert delta == {
        "Innodb_dblwr_pages_written": 1066 - 75,
        "Innodb_os_log_written": 13740932 - 13176237,
        "Innodb_data_written": 52805632 - 16924672,
    }


def test_pg_stat_wal_delta():
    delta = measure.counter_delta(
        fixture("pgbench/pg_stat_wal.before.txt"),
        fixture("pgbench/pg_stat_wal.after.txt"),
        measure.POSTGRESQL_COUNTERS,
    )
    assert delta == {"wal_bytes": 24996103 - 22546515, "wal_fpi": 1983 - 1688, "wal_records": 33608 - 31434}


def test_counter_queries_name_the_counters_read():
    for engine, names in measure.COUNTERS.items():
        command = " ".join(measure.COUNTER_QUERIES[engine])
        assert all(name in command for name in names)


def test_a_missing_or_shrinking_counter_is_named():
    before = fixture("pgbench/pg_stat_wal.before.txt")
    with pytest.raises(ValueError, match="counter wal_sync is not in both"):
        measure.counter_delta(before, before, ["wal_sync"])
    with pytest.raises(ValueError, match="counter wal_fpi went back"):
        measure.counter_delta(fixture("pgbench/pg_stat_wal.after.txt"), before, ["wal_fpi"])
    with pytest.raises(ValueError, match="not a counter line"):
        measure.parse_counters("wal_bytes|lots\n")


# --- /proc/diskstats ----------------------------------------------------------------------------


def test_bytes_written_is_the_sector_field_times_512():
    before = measure.diskstats_written(fixture("pgbench/diskstats.before.txt"))
    assert before["vda"] == 221078336 * 512 and before["loop1"] == 0
    written = measure.written_delta(
        fixture("pgbench/diskstats.before.txt"), fixture("pgbench/diskstats.after.txt"), ["vda"]
    )
    assert written.per_drive == {"vda": (221088304 - 221078336) * 512} and written.total == 9968 * 512


def renamed(text, names):
    """The real vda line once per name (this host has no NVMe drive), with its counters."""
    line = next(line for line in text.splitlines() if " vda " in line)
    return "".join(line.replace(" vda ", f" {name} ") + "\n" for name in names) + text


def test_nvme_drives_are_found_by_name_partitions_and_other_devices_left_out():
    names = ["nvme0n1", "nvme0n1p1", "nvme0n1p9", "nvme1n1", "nvme10n1", "nvme2n1", "vda", "loop0"]
    assert measure.nvme_drives(names) == ["nvme0n1", "nvme1n1", "nvme2n1", "nvme10n1"]
    before = renamed(fixture("pgbench/diskstats.before.txt"), ["nvme0n1", "nvme0n1p1", "nvme1n1"])
    after = renamed(fixture("pgbench/diskstats.after.txt"), ["nvme0n1", "nvme0n1p1", "nvme1n1"])
    written = measure.written_delta(before, after)
    assert written.per_drive == {"nvme0n1": 9968 * 512, "nvme1n1": 9968 * 512}
    assert written.total == 2 * 9968 * 512  # both sides of a mirror count


def test_with_multipath_the_paths_count_and_not_their_heads():
    names = ["nvme0n1", "nvme0c0n1", "nvme1n1", "nvme1c1n1", "nvme2n1"]
    # nvme2n1 has no path device listed: its head is all there is to count.
    assert measure.nvme_drives(names) == ["nvme0c0n1", "nvme1c1n1", "nvme2n1"]


def test_a_drive_missing_from_a_snapshot_or_going_back_is_named():
    before, after = fixture("pgbench/diskstats.before.txt"), fixture("pgbench/diskstats.after.txt")
    with pytest.raises(ValueError, match="drive nvme3n1 is not in both"):
        measure.written_delta(before, after, ["vda", "nvme3n1"])
    with pytest.raises(ValueError, match="drive vda's write counter went back"):
        measure.written_delta(after, before, ["vda"])
    with pytest.raises(ValueError, match="no NVMe device"):
        measure.written_delta(before, after)


# --- /proc/stat ---------------------------------------------------------------------------------


def test_cpu_seconds_count_busy_time_only():
    # cpu  6149710 10390 487981 10348726 10043 0 5520 3563 2 0  ->
    # cpu  6149737 10390 487989 10348726 10044 0 5522 3563 2 0: user +27, system +8, softirq +2
    # (iowait +1 is not work)
    seconds = measure.cpu_seconds(fixture("pgbench/stat.before.txt"), fixture("pgbench/stat.after.txt"))
    assert seconds == pytest.approx(0.37)
    with pytest.raises(ValueError, match="went back"):
        measure.cpu_seconds(fixture("pgbench/stat.after.txt"), fixture("pgbench/stat.before.txt"))
    with pytest.raises(ValueError, match="no cpu line"):
        measure.cpu_busy_ticks("intr 1 2 3\n")


# --- a run, runs, ratios ------------------------------------------------------------------------


def test_run_figures_per_transaction_from_a_real_run():
    load = measure.parse_sysbench(fixture("sysbench/oltp_write_only.stdout.txt"))
    written = measure.written_delta(
        fixture("sysbench/oltp_write_only.diskstats.before.txt"),
        fixture("sysbench/oltp_write_only.diskstats.after.txt"),
        ["vda"],
    )
    counters = measure.counter_delta(
        fixture("sysbench/oltp_write_only.status.before.txt"),
        fixture("sysbench/oltp_write_only.status.after.txt"),
        measure.MARIADB_COUNTERS,
    )
    cpu = measure.cpu_seconds(
        fixture("sysbench/oltp_write_only.stat.before.txt"),
        fixture("sysbench/oltp_write_only.stat.after.txt"),
    )
    figures = measure.run_figures(load, written, counters, cpu)
    assert figures["bytes_per_transaction"] == written.total / 300 > 0
    assert figures["counters_per_transaction"]["Innodb_dblwr_pages_written"] == pytest.approx(991 / 300)
    assert figures["cpu_ms_per_transaction"] == pytest.approx(cpu * 1000 / 300)
    assert figures["load"]["latency_p95_ms"] == 4.82
    with pytest.raises(ValueError, match="no committed transaction"):
        measure.run_figures(measure.Load(0, 0, 0.0, 0.0, 0.0, 0.0), written, counters, cpu)


def test_median_and_spread():
    assert measure.spread([3.0, 1.0, 2.0]) == measure.Spread(2.0, 1.0, 3.0)
    assert measure.spread([4, 1, 2, 3]) == measure.Spread(2.5, 1, 4)
    with pytest.raises(ValueError, match="no runs"):
        measure.spread([])


def test_ratios_to_the_baseline():
    assert measure.ratios({"tuned": 3.0, "zfs-defaults": 2.0, "md-ext4": 1.0}, "zfs-defaults") == {
        "tuned": 1.5,
        "zfs-defaults": 1.0,
        "md-ext4": 0.5,
    }
    with pytest.raises(ValueError, match="no zfs-defaults figure"):
        measure.ratios({"tuned": 1.0}, "zfs-defaults")
    with pytest.raises(ValueError, match="zfs-defaults figure is 0"):
        measure.ratios({"zfs-defaults": 0.0}, "zfs-defaults")
    with pytest.raises(ValueError, match="zfs-defaults figure is nan"):
        measure.ratios({"zfs-defaults": math.nan}, "zfs-defaults")


# --- compression --------------------------------------------------------------------------------


def test_compression_figures_from_a_real_zfs_get():
    """The lab's `zfs get -H -p all` of a converged MariaDB host (fixtures/zfs)."""
    text = (FIXTURES.parent / "zfs" / "zfs_get_mariadb.txt").read_text()
    assert measure.compression_figures(text, "dbpool/datastore/mysql") == {
        "compressratio": 1.0,
        "logical_bytes": 26624,
        "physical_bytes": 49152,
    }
    with pytest.raises(ValueError, match="no compressratio, logicalused, used for dbpool/other"):
        measure.compression_figures(text, "dbpool/other")
