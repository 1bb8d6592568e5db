"""`./dbzfs status`'s two renderings of the report day2/status.py builds: the table a person reads
and the JSON a script reads (its keys: day2/status.py's docstring). Pure."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence

import engines

ENGINE_NAMES = engines.by_engine("label")


def render_json(report: Mapping) -> str:
    return json.dumps(report, indent=2)


def seconds(value: float) -> str:
    return f"{round(value, 1):g} s"


def duration(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 120 * 60:
        return f"{seconds // 60} min"
    if seconds < 48 * 3600:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def _bytes(value: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value} B"  # not reached


def _role_cell(h: Mapping) -> str:
    if h["error"] is not None:
        return "UNREADABLE" if h["reachable"] else "UNREACHABLE"
    if not h["server_answers"]:
        return f"DOWN (inventory: {h['inventory_role']})"
    if h["role"] != h["inventory_role"]:
        return f"{h['role']} (inventory: {h['inventory_role']})"
    return h["role"]


def _replication_cell(h: Mapping) -> str:
    r = h["replication"]
    if h["error"] is not None or not h["server_answers"]:
        return "?"
    if r is None:
        return "-"
    if r["source"] is None:
        return "from nobody"
    if r["state"] is not None or r["io_running"] is None:  # PostgreSQL
        state = r["state"] or "not streaming"
        text = f"from {r['source']}: {state}"
    elif r["running"]:
        text = f"from {r['source']}: running"
    else:
        text = f"from {r['source']}: STOPPED (IO {r['io_running']}, SQL {r['sql_running']})"
    if r["lag_seconds"] is not None:
        text += f", {seconds(r['lag_seconds'])} behind"
    elif r["running"]:
        text += ", lag unknown"
    if r["unreplayed_bytes"]:
        text += f", {_bytes(r['unreplayed_bytes'])} to replay"
    return text


def _pool_cell(pool: Mapping | None) -> str:
    if pool is None:
        return "?"
    if pool["health"] is None:
        return f"{pool['name']} NOT IMPORTED"
    text = f"{pool['name']} {pool['health']} {pool['capacity_percent']}%"
    if pool["over_threshold"]:
        text += f" (over {pool['threshold_percent']}%)"
    return text


def _snapshot_name(name: str) -> str:
    return name.partition("@")[2] or name


def _snapshot_cell(h: Mapping) -> str:
    snap = h["newest_snapshot"]
    if h["error"] is not None:
        return "?"
    if snap is None:
        return "none"
    return f"{_snapshot_name(snap['name'])} ({duration(snap['age_seconds'])} ago)"


def _backup_cell(h: Mapping) -> str:
    b = h["newest_backup"]
    if b is None:
        return "-"
    if not b["read"]:
        return f"{b['host']}: ?"
    if b["name"] is None:
        return f"{b['host']}: none"
    return f"{b['host']}: {_snapshot_name(b['name'])} ({duration(b['age_seconds'])} ago)"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    # The last column is not padded (no trailing blanks).
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return [
        (indent + "  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)), r[-1]])).rstrip()
        for r in [header, *rows]
    ]


def _pgbackrest_line(archive: Mapping) -> str:
    if not archive["read"]:
        return f"pgBackRest on {archive['host']}: ?"
    if archive["label"] is None:
        return f"pgBackRest on {archive['host']}: no backup ({archive['message']})"
    return (
        f"pgBackRest on {archive['host']}: {archive['label']} ({archive['type']}, "
        f"{duration(archive['age_seconds'])} ago)"
    )


def render_text(report: Mapping) -> str:
    """The report as tables, one per group, then the backup hosts and the problems."""
    read_at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(report["read_at"]))
    count = sum(len(g["hosts"]) for g in report["groups"].values()) + len(report["backup_hosts"])
    lines = [f"{report['inventory']}: {count} host(s), read at {read_at}"]
    header = ["HOST", "ROLE", "REPLICATION", "POOL", "NEWEST SNAPSHOT", "NEWEST BACKUP"]
    for name, group in report["groups"].items():
        title = f"{name} ({ENGINE_NAMES.get(group['engine'], group['engine'])})"
        if group["pgbackrest"] is not None:
            title += f"; {_pgbackrest_line(group['pgbackrest'])}"
        rows = [
            [
                host,
                _role_cell(h),
                _replication_cell(h),
                _pool_cell(h["pool"]),
                _snapshot_cell(h),
                _backup_cell(h),
            ]
            for host, h in group["hosts"].items()
        ]
        lines += ["", title, *_table(header, rows)]
    if report["backup_hosts"]:
        rows = [
            [
                host,
                _pool_cell(h["pool"]) if h["error"] is None else _role_cell(h),
                "?" if h["copies"] is None else str(h["copies"]),
            ]
            for host, h in report["backup_hosts"].items()
        ]
        lines += ["", "backup hosts", *_table(["HOST", "POOL", "COPIES"], rows)]
    lines.append("")
    if report["problems"]:
        lines.append(f"{len(report['problems'])} problem(s):")
        lines += [f"  - {p}" for p in report["problems"]]
    else:
        lines.append("healthy: every host read, no problem")
    return "\n".join(lines)


# --- the glue: connect, read the facts -------------------------------------------------------
