"""bench/report.py: a report folder from a small synthetic results dict (results.json that round-
trips, report.md with its tables, PNG charts), and a completeness check that names what is
missing or not finite."""

import copy
import json
import math

import pytest

from bench import measure, report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(engine, tps, bytes_per_txn, counters, p95=2.0, cpu_ms=1.5, transactions=1000):
    load = measure.Load(transactions, 0, tps, 1.0, p95, transactions / tps)
    written = measure.Written(
        {"nvme0n1": bytes_per_txn * transactions // 2, "nvme1n1": bytes_per_txn * transactions // 2}
    )
    totals = {name: value * transactions for name, value in counters.items()}
    return measure.run_figures(load, written, totals, cpu_ms * transactions / 1000)


MARIADB = {"Innodb_dblwr_pages_written": 2, "Innodb_os_log_written": 3000, "Innodb_data_written": 40000}
POSTGRESQL = {"wal_bytes": 5000, "wal_fpi": 1, "wal_records": 12}


def synthetic_results():
    def three(engine, tps, nbytes, counters):
        return [run(engine, tps * f, nbytes, counters) for f in (0.9, 1.0, 1.1)]

    return {
        "machine": {"host": "test", "cpus": 2, "ram": "8 GiB"},
        "command": "./dbzfs bench --quick",
        "date": "2026-12-03T12:00:00Z",
        "engines": {
            "mariadb": {
                "variants": {
                    "tuned": "what deploy.py converges",
                    "zfs-defaults": "nothing set",
                    "md-ext4": "md RAID10, ext4",
                },
                "workloads": {
                    "oltp_write_only": {
                        "tuned": three("mariadb", 300, 20000, MARIADB),
                        "zfs-defaults": three("mariadb", 200, 60000, MARIADB),
                        "md-ext4": three("mariadb", 250, 40000, MARIADB),
                    }
                },
            },
            "postgresql": {
                "variants": {"tuned": "deploy.py", "zfs-defaults": "nothing set"},
                "workloads": {
                    "tpcb-like": {
                        "tuned": three("postgresql", 500, 10000, POSTGRESQL),
                        "zfs-defaults": three("postgresql", 400, 30000, POSTGRESQL),
                    }
                },
            },
        },
        "compression": [
            {
                "engine": engine,
                "model": model,
                "compression": algorithm,
                "compressratio": ratio,
                "logical_bytes": 100 * 1024**2,
                "physical_bytes": int(100 * 1024**2 / ratio),
                "load_seconds": 12.5,
            }
            for engine, model in (("mariadb", "ca"), ("postgresql", "events"))
            for algorithm, ratio in zip(report.COMPRESSIONS, (1.8, 2.4, 2.2, 1.6), strict=True)
        ],
    }


def test_the_report_folder(tmp_path):
    results = synthetic_results()
    path = report.write_report(results, tmp_path / "out")
    assert path == tmp_path / "out" / "report.md"
    assert report.load_results(tmp_path / "out") == results
    for chart in report.CHARTS.values():
        data = (tmp_path / "out" / chart).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 5000
    text = path.read_text()
    for heading in (
        "## MariaDB",
        "### MariaDB, oltp_write_only",
        "### PostgreSQL, tpcb-like",
        "## Compression",
    ):
        assert heading in text
    assert "`./dbzfs bench --quick`" in text and "host: test" in text
    assert f"]({report.CHARTS['bytes']})" in text and f"]({report.CHARTS['tps']})" in text


def table_rows(text, title):
    """The rows of the table under a heading: variant -> cells."""
    block = text.split(title, 1)[1].split("\n\n", 2)[1]
    rows = [line.strip("|").split(" | ") for line in block.splitlines() if line.startswith("| `")]
    return {row[0].strip(" `"): [cell.strip() for cell in row[1:]] for row in rows}


def test_tables_hold_medians_spreads_and_ratios_not_absolute_speed(tmp_path):
    text = report.write_report(synthetic_results(), tmp_path).read_text()
    header = next(line for line in text.splitlines() if line.startswith("| variant"))
    assert "TPS vs zfs-defaults" in header and "doublewrite pages / txn" in header
    columns = [column.strip() for column in header.strip("|").split("|")]
    assert all("vs zfs-defaults" in column for column in columns if "TPS" in column)
    rows = table_rows(text, "### MariaDB, oltp_write_only")
    # runs, bytes/txn, bytes ratio, 3 counters, TPS ratio (spread), p95, CPU
    assert rows["tuned"][:3] == ["3", "19.5 KiB", "0.33"]
    assert rows["zfs-defaults"][2] == "1.00" and rows["md-ext4"][2] == "0.67"
    assert rows["tuned"][6] == "1.50 (1.35..1.65)"
    assert rows["zfs-defaults"][6] == "1.00 (0.90..1.10)"
    assert rows["tuned"][3] == "2" and rows["tuned"][7] == "2" and rows["tuned"][8] == "1.5"
    pg = table_rows(text, "### PostgreSQL, tpcb-like")
    assert "WAL bytes / txn" in text and pg["tuned"][3:6] == ["5,000", "1", "12"]
    compression = [line for line in text.split("## Compression")[1].splitlines() if line.startswith("| ")]
    assert (
        len(compression) == 1 + 8  # the heading, a row per engine and algorithm
        and "| MariaDB | ca | `zstd` | 2.40x | 100.0 MiB | 41.7 MiB | 12.5 |" in compression
    )


def test_variant_figures_spread_of_each_figure():
    results = synthetic_results()
    maria = results["engines"]["mariadb"]
    figures = report.variant_figures("mariadb", maria["workloads"]["oltp_write_only"], maria["variants"])
    assert figures["tuned"]["tps"] == measure.Spread(300.0, 270.0, 330.0)
    assert figures["tuned"]["bytes_ratio"] == pytest.approx(1 / 3)
    assert figures["tuned"]["counters"]["Innodb_os_log_written"].median == 3000


def broken(mutate):
    results = synthetic_results()
    mutate(results)
    return results


MARIADB_RUNS = ("engines", "mariadb", "workloads", "oltp_write_only")


def runs_of(results, variant):
    node = results
    for key in MARIADB_RUNS:
        node = node[key]
    return node[variant]


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (lambda r: r.pop("date"), "results: date is missing"),
        (lambda r: r["engines"].clear(), "no engine was measured"),
        (lambda r: runs_of(r, "md-ext4").clear(), "mariadb/oltp_write_only/md-ext4: no runs"),
        (
            lambda r: runs_of(r, "tuned")[1].__setitem__("bytes_per_transaction", math.nan),
            "mariadb/oltp_write_only/tuned run 2: bytes_per_transaction is nan",
        ),
        (
            lambda r: runs_of(r, "tuned")[0]["load"].__setitem__("tps", math.inf),
            "mariadb/oltp_write_only/tuned run 1: load.tps is inf",
        ),
        (
            lambda r: runs_of(r, "tuned")[0]["counters_per_transaction"].pop("Innodb_dblwr_pages_written"),
            "tuned run 1: counters_per_transaction.Innodb_dblwr_pages_written is missing",
        ),
        (
            lambda r: runs_of(r, "zfs-defaults")[2]["load"].pop("latency_p95_ms"),
            "zfs-defaults run 3: load.latency_p95_ms is missing",
        ),
        (
            lambda r: r["engines"]["postgresql"]["variants"].pop("zfs-defaults"),
            "postgresql: no zfs-defaults variant",
        ),
        (
            lambda r: r["compression"].__setitem__(0, {**r["compression"][0], "compressratio": math.nan}),
            "compression row 1 (mariadb, lz4): compressratio is nan",
        ),
        (
            lambda r: r.__setitem__(
                "compression", [c for c in r["compression"] if c["compression"] != "zstd-fast"]
            ),
            "compression: no zstd-fast row for mariadb",
        ),
    ],
)
def test_the_completeness_check_names_what_is_missing(mutate, named):
    results = broken(mutate)
    with pytest.raises(report.IncompleteResults, match=named.replace("(", r"\(").replace(")", r"\)")):
        report.check_complete(results)


def test_an_incomplete_report_keeps_its_results_and_writes_nothing_else(tmp_path):
    results = broken(lambda r: runs_of(r, "tuned")[0].__setitem__("cpu_ms_per_transaction", math.nan))
    with pytest.raises(report.IncompleteResults, match="cpu_ms_per_transaction is nan"):
        report.write_report(results, tmp_path)
    kept = json.loads((tmp_path / "results.json").read_text())
    assert math.isnan(runs_of(kept, "tuned")[0]["cpu_ms_per_transaction"])
    assert not (tmp_path / "report.md").exists() and not list(tmp_path.glob("*.png"))


def test_complete_results_pass_and_are_not_changed():
    results = synthetic_results()
    before = copy.deepcopy(results)
    report.check_complete(results)
    assert results == before
