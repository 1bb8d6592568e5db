"""The benchmark's report: from the results of a run (a JSON-able dict) to a folder holding
`results.json`, `report.md` and PNG charts (matplotlib's Agg renderer: no display needed).

Results, as the runner builds them:

    {
      "machine": {"host": ..., "cpu": ..., ...},   # what it ran on, shown as given
      "command": "./dbzfs bench --engine mariadb",  # how to reproduce it
      "date": "2026-12-03T12:00:00Z",
      "engines": {
        "mariadb": {
          "variants": {"tuned": "one-line description", "zfs-defaults": ..., ...},
          "workloads": {"oltp_write_only": {"tuned": [run, run, run], ...}, ...},
        },
        ...
      },
      "compression": [{"engine", "model", "compression", "compressratio", "logical_bytes",
                       "physical_bytes", "load_seconds"}, ...],
    }

where each run is `bench.measure.run_figures(...)`. Speed under emulation says little in absolute
terms, so TPS appears only as a ratio to `zfs-defaults` measured in the same run; bytes written,
the engine's counters and CPU per transaction are figures of the work itself.

`check_complete(results)` raises IncompleteResults naming the first missing or non-finite figure:
`./dbzfs bench --quick` asserts with it that the benchmark still produces every figure, never how
fast anything was.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

from matplotlib.figure import Figure

from bench import measure
from bench.variants import BASELINE

COMPRESSIONS = ("lz4", "zstd", "zstd-1", "zstd-fast")
ENGINE_LABELS = {"mariadb": "MariaDB", "postgresql": "PostgreSQL"}
# The engine counters the tables show per transaction: counter -> column heading.
COUNTER_COLUMNS = {
    "mariadb": {
        "Innodb_dblwr_pages_written": "doublewrite pages",
        "Innodb_os_log_written": "redo bytes",
        "Innodb_data_written": "InnoDB data bytes",
    },
    "postgresql": {"wal_bytes": "WAL bytes", "wal_fpi": "full-page images", "wal_records": "WAL records"},
}
COMPRESSION_FIELDS = ("compressratio", "logical_bytes", "physical_bytes", "load_seconds")
CHARTS = {"bytes": "bytes_per_transaction.png", "tps": "tps_ratio.png"}


class IncompleteResults(ValueError):
    """A figure the report needs is missing or not a finite number."""


# --- completeness -------------------------------------------------------------------------------


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise IncompleteResults(f"{where} is missing (got {value!r})")
    if not math.isfinite(value):
        raise IncompleteResults(f"{where} is {value}, not a finite number")
    return float(value)


def _run_numbers(engine: str, run: dict, where: str) -> Iterator[tuple[str, object]]:
    load = run.get("load") or {}
    yield f"{where}: load.transactions", load.get("transactions")
    yield f"{where}: load.tps", load.get("tps")
    yield f"{where}: load.latency_p95_ms", load.get("latency_p95_ms")
    yield f"{where}: bytes_per_transaction", run.get("bytes_per_transaction")
    yield f"{where}: cpu_ms_per_transaction", run.get("cpu_ms_per_transaction")
    per_txn = run.get("counters_per_transaction") or {}
    for name in measure.COUNTERS[engine]:
        yield f"{where}: counters_per_transaction.{name}", per_txn.get(name)


def check_complete(results: dict) -> None:
    """Raise IncompleteResults naming the first figure that is missing or not finite: every
    engine's every variant has at least one run in every workload, with every figure; the
    baseline's TPS is above zero; the compression table has every engine and algorithm."""
    for key in ("machine", "command", "date"):
        if not results.get(key):
            raise IncompleteResults(f"results: {key} is missing")
    engines = results.get("engines") or {}
    converge = results.get("converge") or []
    if not engines and not converge:
        raise IncompleteResults("results: no engine was measured and no converge timed")
    for run in converge:
        where = f"converge {run.get('name')!r}"
        _number(run.get("wall_seconds"), f"{where}: wall_seconds")
        _number(run.get("operations"), f"{where}: operations")
        if not run.get("hosts"):
            raise IncompleteResults(f"{where}: no host")
        for host, figures in run["hosts"].items():
            for key in ("operations", "changed", "seconds"):
                _number(figures.get(key), f"{where}: {host}.{key}")
    for engine, measured in engines.items():
        if engine not in measure.COUNTERS:
            raise IncompleteResults(f"results: unknown engine {engine!r}")
        variants = measured.get("variants") or {}
        if BASELINE not in variants:
            raise IncompleteResults(f"{engine}: no {BASELINE} variant to take ratios to")
        workloads = measured.get("workloads") or {}
        if not workloads:
            raise IncompleteResults(f"{engine}: no workload was run")
        for workload, by_variant in workloads.items():
            for variant in variants:
                runs = by_variant.get(variant) or []
                if not runs:
                    raise IncompleteResults(f"{engine}/{workload}/{variant}: no runs")
                for i, run in enumerate(runs, 1):
                    for where, value in _run_numbers(engine, run, f"{engine}/{workload}/{variant} run {i}"):
                        _number(value, where)
                    if run["load"]["transactions"] <= 0:
                        raise IncompleteResults(
                            f"{engine}/{workload}/{variant} run {i}: no transaction committed"
                        )
            tps = measure.spread(run["load"]["tps"] for run in by_variant[BASELINE]).median
            if tps <= 0:
                raise IncompleteResults(f"{engine}/{workload}/{BASELINE}: median TPS is {tps}")
    rows = results.get("compression") or []
    for i, row in enumerate(rows, 1):
        for name in COMPRESSION_FIELDS:
            _number(
                row.get(name), f"compression row {i} ({row.get('engine')}, {row.get('compression')}): {name}"
            )
    for engine in engines:
        have = {row.get("compression") for row in rows if row.get("engine") == engine}
        for algorithm in COMPRESSIONS:
            if algorithm not in have:
                raise IncompleteResults(f"compression: no {algorithm} row for {engine}")


# --- tables -------------------------------------------------------------------------------------


def human_bytes(value: float) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def _number_text(value: float) -> str:
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _cell(spread: measure.Spread, fmt=_number_text) -> str:  # noqa: ANN001 - a formatter
    if spread.low == spread.high:
        return fmt(spread.median)
    return f"{fmt(spread.median)} ({fmt(spread.low)}..{fmt(spread.high)})"


def variant_figures(engine: str, by_variant: dict, variants: dict) -> dict[str, dict]:
    """Per variant: the spread of each figure the table and charts show, and the ratios of
    bytes and TPS to the baseline's medians."""
    figures = {}
    for variant in variants:
        runs = by_variant[variant]
        figures[variant] = {
            "runs": len(runs),
            "bytes": measure.spread(r["bytes_per_transaction"] for r in runs),
            "tps": measure.spread(r["load"]["tps"] for r in runs),
            "p95": measure.spread(r["load"]["latency_p95_ms"] for r in runs),
            "cpu": measure.spread(r["cpu_ms_per_transaction"] for r in runs),
            "counters": {
                name: measure.spread(r["counters_per_transaction"][name] for r in runs)
                for name in COUNTER_COLUMNS[engine]
            },
        }
    base = figures[BASELINE]
    for fig in figures.values():
        fig["bytes_ratio"] = fig["bytes"].median / base["bytes"].median if base["bytes"].median else math.nan
        # The spread of a ratio: the variant's lowest and highest run against the baseline's median.
        tps, base_tps = fig["tps"], base["tps"].median
        fig["tps_ratio"] = measure.Spread(tps.median / base_tps, tps.low / base_tps, tps.high / base_tps)
    return figures


def _engine_table(engine: str, figures: dict) -> list[str]:
    counters = COUNTER_COLUMNS[engine]
    head = [
        "variant",
        "runs",
        "bytes written / txn",
        "bytes vs zfs-defaults",
        *(f"{label} / txn" for label in counters.values()),
        "TPS vs zfs-defaults",
        "p95 latency (ms)",
        "CPU ms / txn",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for variant, fig in figures.items():
        row = [
            f"`{variant}`",
            str(fig["runs"]),
            _cell(fig["bytes"], human_bytes),
            f"{fig['bytes_ratio']:.2f}",
            *(_cell(fig["counters"][name]) for name in counters),
            _cell(fig["tps_ratio"], lambda v: f"{v:.2f}"),
            _cell(fig["p95"]),
            _cell(fig["cpu"]),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _compression_table(rows: list[dict]) -> list[str]:
    head = ["engine", "model", "compression", "compressratio", "logical", "physical", "load time (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [
            ENGINE_LABELS.get(row["engine"], row["engine"]),
            str(row.get("model", "")),
            f"`{row['compression']}`",
            f"{row['compressratio']:.2f}x",
            human_bytes(row["logical_bytes"]),
            human_bytes(row["physical_bytes"]),
            f"{row['load_seconds']:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _converge_table(runs: list[dict]) -> list[str]:
    hosts = sorted({host for run in runs for host in run["hosts"]})
    head = [
        "run",
        "wall (s)",
        "host-operations (changed)",
        "fact reads",
        *(f"{h} (s, operations)" for h in hosts),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run in runs:
        cells = [
            run["name"],
            f"{run['wall_seconds']:.0f}",
            f"{run['operations']} ({run['changed']})",
            str(run.get("facts", "-")),
        ]
        for h in hosts:
            fig = run["hosts"].get(h)
            cells.append(f"{fig['seconds']:.0f} s, {fig['operations']}" if fig else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _machine_text(machine: object) -> str:
    if isinstance(machine, dict):
        return ", ".join(f"{key}: {value}" for key, value in machine.items())
    return str(machine)


def markdown(results: dict, figures: dict) -> str:
    """report.md: the run's provenance, a table per engine and workload, the compression table."""
    lines = [
        "# What the ZFS tuning buys: benchmark report",
        "",
        f"- Date: {results['date']}",
        f"- Machine: {_machine_text(results['machine'])}",
        f"- Command: `{results['command']}`",
        "",
        "Each figure is the median of the runs, with the lowest and highest in brackets. Bytes "
        "written are what the pool's member drives wrote (both sides of each mirror), per committed "
        f"transaction. TPS is a ratio to `{BASELINE}` in the same run: under emulation an absolute "
        "speed says nothing about real hardware.",
    ]
    if results["engines"]:
        lines += [
            "",
            f"![bytes written per transaction]({CHARTS['bytes']})",
            f"![TPS relative to {BASELINE}]({CHARTS['tps']})",
        ]
    for engine, measured in results["engines"].items():
        lines += ["", f"## {ENGINE_LABELS[engine]}", ""]
        lines += [f"- `{name}`: {description}" for name, description in measured["variants"].items()]
        for workload in measured["workloads"]:
            lines += ["", f"### {ENGINE_LABELS[engine]}, {workload}", ""]
            lines += _engine_table(engine, figures[(engine, workload)])
    if results.get("compression"):
        lines += [
            "",
            "## Compression",
            "",
            "The same generated data (bench/datagen.py's models) loaded into a dataset per algorithm.",
            "",
        ]
        lines += _compression_table(results["compression"])
    if results.get("converge"):
        lines += [
            "",
            "## Converge cost",
            "",
            "The lab's VMs from fresh images, `pyinfra inventories/lab.py deploy.py` under "
            "lab/converge_profile.py: wall time, and per host the seconds its operations and fact "
            "reads took, with its operations. A `--dry` run executes no operation: it reads the "
            "facts and shows the changes it detects.",
            "",
        ]
        lines += _converge_table(results["converge"])
    return "\n".join(lines) + "\n"


# --- charts -------------------------------------------------------------------------------------


def _bar_chart(path: Path, figures: dict, value: str, title: str, xlabel: str, scale: float = 1.0) -> None:
    """Horizontal bars, a panel per engine and workload: the median, whiskers from the lowest to
    the highest run."""
    panels = list(figures.items())
    fig = Figure(figsize=(8, 0.6 + 2.4 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, ((engine, workload), by_variant) in zip(axes, panels, strict=True):
        names = list(by_variant)
        spreads = [by_variant[name][value] for name in names]
        medians = [s.median / scale for s in spreads]
        errors = [
            [(s.median - s.low) / scale for s in spreads],
            [(s.high - s.median) / scale for s in spreads],
        ]
        colors = ["tab:gray" if name == BASELINE else "tab:blue" for name in names]
        ax.barh(names, medians, xerr=errors, color=colors, capsize=3)
        ax.invert_yaxis()
        ax.set_title(f"{ENGINE_LABELS[engine]}, {workload}")
        ax.set_xlabel(xlabel)
    fig.suptitle(title)
    fig.savefig(path, format="png", dpi=100)


def charts(folder: Path, figures: dict) -> list[Path]:
    bytes_chart, tps_chart = folder / CHARTS["bytes"], folder / CHARTS["tps"]
    _bar_chart(
        bytes_chart, figures, "bytes", "Bytes written to the drives per transaction", "KiB", scale=1024
    )
    _bar_chart(tps_chart, figures, "tps_ratio", f"Transactions per second relative to {BASELINE}", "ratio")
    return [bytes_chart, tps_chart]


# --- the folder ---------------------------------------------------------------------------------


def write_report(results: dict, folder: Path) -> Path:
    """Write the report folder and return report.md's path. results.json comes first and keeps
    whatever was measured (a non-finite figure as NaN, which Python's json reads back), then the
    completeness check, then report.md and the charts."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    check_complete(results)
    figures = {
        (engine, workload): variant_figures(engine, by_variant, measured["variants"])
        for engine, measured in results["engines"].items()
        for workload, by_variant in measured["workloads"].items()
    }
    if figures:
        charts(folder, figures)
    report = folder / "report.md"
    report.write_text(markdown(results, figures))
    return report


def load_results(folder: Path) -> dict:
    return json.loads((Path(folder) / "results.json").read_text())
