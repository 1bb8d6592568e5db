"""The replication groups' rules (roles/topology.py, roles/engine.py): across the inventory's
database hosts, one primary per group, replicas that follow it, addresses and a replication
password where a group replicates, server_ids unique in a group. Checked before any host is
touched; validation runs them (validation/checks.py). Pure: no pyinfra.
"""

from __future__ import annotations

from collections import defaultdict

from model import secrets as secrets_mod
from model.checking import ENGINES, Context
from model.hostdata import HostConfig
from model.releases import RELEASES

DATABASE_ROLES = ("primary", "replica")  # a database host's (model/keys.py: role)


def identified(ctx: Context, c: HostConfig) -> bool:
    """Engine, role and replication group are right (a wrong one was reported already)."""
    return (
        ctx.ok(c, "engine", "role", "cluster", "primary") and c.engine in ENGINES and c.role in DATABASE_ROLES
    )


def fleet(ctx: Context) -> None:
    # Hosts whose identity is wrong were reported already: left out here, so that one mistake is
    # not reported again from their peers' side.
    known = {name: c for name, c in ctx.cfg.items() if identified(ctx, c)}
    members = defaultdict(list)
    for c in known.values():
        members[c.cluster].append(c)
    for cluster, hosts in members.items():
        group(ctx, cluster, hosts)
    for c in known.values():
        if c.role != "replica":
            if c.primary is not None:
                ctx.add(
                    c.name,
                    "primary",
                    c.primary,
                    "set on a host whose role is not replica",
                    "remove it, or make the host a replica",
                )
            continue
        p = known.get(c.primary)
        if c.primary in ctx.cfg and p is None:
            continue  # the primary's own data is wrong, and reported
        if c.primary is None:
            ctx.add(
                c.name,
                "primary",
                None,
                "a replica must name the primary it follows",
                "set primary to the primary's inventory name",
            )
        elif c.primary == c.name:
            ctx.add(
                c.name, "primary", c.primary, "a replica cannot follow itself", "name the group's primary"
            )
        elif p is None:
            ctx.add(
                c.name, "primary", c.primary, "no such host in the inventory", f"use one of {sorted(ctx.cfg)}"
            )
        elif p.role != "primary":
            ctx.add(
                c.name,
                "primary",
                c.primary,
                f"{p.name} is a {p.role}, not a primary",
                "replicas follow the group's primary (cascading is not supported)",
            )
        elif p.engine != c.engine:
            ctx.add(
                c.name,
                "primary",
                c.primary,
                f"{p.name} runs {p.engine}, this host runs {c.engine}",
                "a replica follows a primary of the same engine",
            )
        elif p.cluster != c.cluster:
            ctx.add(
                c.name,
                "primary",
                c.primary,
                f"{p.name} is in replication group {p.cluster!r}, this host in {c.cluster!r}",
                "put both in the same cluster",
            )
        elif ctx.ok(c, "debian_release", "postgresql_version") and ctx.ok(
            p, "debian_release", "postgresql_version"
        ):
            releases_of(ctx, c, p)


def releases_of(ctx: Context, c: HostConfig, p: HostConfig) -> None:
    """A replica's release against its primary's: PostgreSQL streams between servers of one major
    version only; a MariaDB replica may run a newer server than its primary (replicas are upgraded
    first), never an older one."""
    if c.debian_release not in RELEASES or p.debian_release not in RELEASES:
        return
    if c.engine == "postgresql":
        if c.server_version != p.server_version:
            key = "postgresql_version" if c.postgresql_version else "debian_release"
            ctx.add(
                c.name,
                key,
                c.postgresql_version or c.debian_release,
                f"PostgreSQL {c.server_version} here, {p.server_version} on its primary {p.name} "
                f"(debian_release {p.debian_release!r}): a standby streams from the same major version only",
                "give both the same PostgreSQL version (a group moves to a new release as "
                "docs/releases.md says)",
            )
        return
    if int(c.debian_release) < int(p.debian_release):
        ctx.add(
            c.name,
            "debian_release",
            c.debian_release,
            f"MariaDB {c.server_version} here, {p.server_version} on its primary {p.name}: a replica "
            "may not run an older server than its primary",
            f'upgrade this replica first (debian_release: "{p.debian_release}"), then the primary',
        )


def group(ctx: Context, cluster: str, hosts: list[HostConfig]) -> None:
    """One replication group's hosts."""
    primaries = [c for c in hosts if c.role == "primary"]
    if len(primaries) > 1:
        for c in primaries[1:]:
            ctx.add(
                c.name,
                "role",
                c.role,
                f"second primary in replication group {cluster!r} (also {primaries[0].name})",
                "make it a replica, or give it its own cluster name",
            )
    replicas = [c for c in hosts if c.role == "replica"]
    if replicas:
        for c in hosts:
            if not c.replication_address and ctx.ok(c, "replication_address"):
                ctx.add(
                    c.name,
                    "replication_address",
                    None,
                    f"replication group {cluster!r} has replicas but this host has no replication address",
                    "set its address on the private network",
                )
        if secrets_mod.REPLICATION_PASSWORD not in ctx.secrets:
            ctx.add(
                hosts[0].name,
                "secrets.replication_password",
                None,
                f"replication group {cluster!r} needs a replication password "
                f"(looked in: {ctx.secrets.source})",
                f"export {secrets_mod.env_name(secrets_mod.REPLICATION_PASSWORD)} or "
                f"add replication_password to {secrets_mod.DEFAULT_FILE}",
            )
    ids = defaultdict(list)
    for c in hosts:
        if c.engine == "mariadb" and c.server_id is not None:
            ids[c.server_id].append(c.name)
    for sid, names in ids.items():
        for name in names[1:]:
            ctx.add(
                name,
                "server_id",
                sid,
                f"also used by {names[0]} in {cluster!r}",
                "give every host of a replication group its own server_id",
            )
