"""TLS's rules over its keys (roles/tls.py): a certificate's days and renewal window, and a
replication group that agrees on `tls` (a replica on TLS cannot follow a primary without it, nor
the other way). validation runs them (validation/checks.py) before any host is touched."""

from __future__ import annotations

from collections import defaultdict

from model.checking import Context
from model.hostdata import HostConfig
from roles import tls

MAX_DAYS = 3650


def host(ctx: Context, c: HostConfig) -> None:
    spec = c.tls_spec
    if ctx.ok(c, "tls_certificate_days") and not 1 <= spec.certificate_days <= MAX_DAYS:
        ctx.add(
            c.name, "tls_certificate_days", spec.certificate_days, f"out of range 1..{MAX_DAYS}", "e.g. 397"
        )
    elif (
        ctx.ok(c, "tls_renew_days", "tls_certificate_days")
        and not 1 <= spec.renew_days < spec.certificate_days
    ):
        ctx.add(
            c.name,
            "tls_renew_days",
            spec.renew_days,
            f"must be at least 1 and under tls_certificate_days ({spec.certificate_days})",
            "e.g. 30",
        )


def fleet(ctx: Context) -> None:
    groups: dict[tuple[str, str], list[HostConfig]] = defaultdict(list)
    for c in ctx.cfg.values():
        if c.engine and not c.is_backup_host and ctx.ok(c, "tls"):
            groups[(c.engine, c.cluster)].append(c)
    for members in groups.values():
        for c, why in tls.group_problems(members):
            ctx.add(c.name, "tls", c.tls_spec.enabled, why, "set the same tls for every host of the group")
