"""The snapshots role's rules (roles/snapshots.py): snapshot_on and snapshot_retention, and the
{kind: count} shape the backup host's retention and the pgBackRest repository's snapshots share.
validation runs them (validation/checks.py) before any host is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model.checking import ENGINES, Context, close, is_int
from model.hostdata import HostConfig
from roles import snapshots


def kind_counts(ctx: Context, name: str, where: str, retention: Mapping[Any, Any]) -> bool:
    """{kind: count}: kinds sanoid knows, counts whole numbers >= 0."""
    good = True
    for kind, count in retention.items():
        at = f"{where}[{kind!r}]"
        if kind not in snapshots.KINDS:
            hint = close(str(kind), snapshots.KINDS)
            fix = f"did you mean {hint[0]!r}?" if hint else f"one of {', '.join(snapshots.KINDS)}"
            ctx.add(name, at, count, "not a kind of snapshot sanoid keeps", fix)
            good = False
        elif not is_int(count) or count < 0:
            ctx.add(name, at, count, "not a count", "a whole number >= 0, e.g. 36")
            good = False
    return good


def type_retention(ctx: Context, name: str, key: str, value: Mapping[Any, Any]) -> bool:
    """engine -> {kind: count}."""
    if not ctx.type_engine_keys(name, key, value):
        return False
    good = True
    for engine, retention in value.items():
        good = kind_counts(ctx, name, f"{key}[{engine!r}]", retention) and good
    return good


TYPES = {"snapshot_retention": type_retention}


def host(ctx: Context, c: HostConfig) -> None:
    ctx.choice(c, "snapshot_on", c.snapshot_on)
    if not ctx.ok(c, "snapshot_retention") or c.engine not in ENGINES:
        return
    key = f"snapshot_retention[{c.engine!r}]"
    retention = c.snapshot_retention
    if c.snapshot_on != "none" and not any(is_int(n) and n > 0 for n in retention.values()):
        ctx.add(
            c.name,
            key,
            retention,
            f"keeps no snapshot, yet snapshot_on is {c.snapshot_on!r}",
            'a count for at least one kind, e.g. {"hourly": 36, "daily": 30}, or snapshot_on = "none"',
        )
