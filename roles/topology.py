"""The inventory against the live replication topology, read before any operation: a converge
never fights what runs. After a switchover or a failover the operator updates the inventory;
until then a converge whose inventory disagrees with the live servers (declares a primary that now
replicates, a replica that replicates from another host, or a replica that now takes writes as a
primary) stops before any host is changed, naming each host, what it declares and what runs. It
never re-points or demotes a live server itself.

A server that does not answer (not installed yet, stopped) has no live role: nothing to fight.
"""

from __future__ import annotations

from pyinfra import inventory
from pyinfra.api.host import Host

import engines
from facts.mariadb import MariadbLiveRole
from facts.postgresql import PostgresqlLiveRole
from model.hostdata import HostConfig
from model.problems import Problem, format_problems
from operations import runtime
from roles import engine

FACTS = {"mariadb": MariadbLiveRole, "postgresql": PostgresqlLiveRole}
# What a server that replicates from another is called, per engine.
FOLLOWER = engines.by_engine("follower")


def live_role(engine_name: str, fact: dict | None) -> dict | None:
    """{"source": address it replicates from or None, "follower": bool, "writable": bool} from
    the engine's live-role fact, or None when the server does not answer."""
    if fact is None:
        return None
    if engine_name == "mariadb":
        source = fact.get("Master_Host") or None
        return {"source": source, "follower": source is not None, "writable": fact.get("read_only") == "0"}
    follower = bool(fact.get("in_recovery"))
    return {
        "source": fact.get("sender") or None if follower else None,
        "follower": follower,
        "writable": not follower,
    }


def problems(cfg: HostConfig, group: engine.Group, live: dict | None) -> list[Problem]:
    """What is wrong with `cfg`'s declared role given its live role (see live_role)."""
    if live is None:
        return []
    names = {m.replication_address: m.name for m in group.members if m.replication_address}

    def who(address: str | None) -> str:
        if not address:
            return "no primary (it is in recovery without a primary_conninfo host)"
        return f"{names[address]} ({address})" if address in names else f"{address} (not in the inventory)"

    kind = FOLLOWER[cfg.engine]
    if live["follower"]:
        runs = f"role 'replica', primary {names.get(live['source'], live['source'])!r}"
    else:
        runs = "role 'primary'"
    fix = (
        f"declare what runs ({cfg.name}: {runs}) in the inventory, or change the topology by hand "
        "first; a converge never re-points or demotes a live server"
    )
    if cfg.role == "primary" and live["follower"]:
        return [
            Problem(
                cfg.name,
                "role",
                cfg.role,
                f"the inventory declares it a primary, but the live server is a {kind} of "
                f"{who(live['source'])}",
                fix,
            )
        ]
    if cfg.role != "replica":
        return []
    declared = group.primary
    declared_address = declared.replication_address if declared else None
    if live["follower"] and live["source"] != declared_address:
        return [
            Problem(
                cfg.name,
                "primary",
                cfg.primary,
                f"the inventory declares it a {kind} of {cfg.primary} ({declared_address}), but the live "
                f"server replicates from {who(live['source'])}",
                fix,
            )
        ]
    if not live["follower"] and live["writable"]:
        return [
            Problem(
                cfg.name,
                "role",
                cfg.role,
                f"the inventory declares it a {kind} of {cfg.primary}, but the live server is a primary: "
                "it replicates from nobody and takes writes",
                fix,
            )
        ]
    return []


def check(group_of: str | None = None) -> None:
    """Stop the deploy, before any host is changed, when the inventory disagrees with the live
    topology of any host it converges. Read once per run for every active host in parallel, so
    that every disagreement is reported at once. A runbook that acts on one replication group
    passes a host of it (`group_of`): only that group is checked, so another group's switchover
    that the inventory does not show yet does not stop it."""
    names = {h.name for h in inventory}
    scope = group_of if group_of in names else None
    found = runtime.once_per_run(f"topology {scope or ''}", lambda: _read_all(scope))
    if found:
        raise runtime.Refused(
            "\n" + format_problems(found, what="between the inventory and the live replication topology")
        )


def _group_key(h: Host) -> tuple[str, str]:
    cfg = HostConfig.from_data(h.name, h.data)
    return cfg.engine, cfg.cluster


def _read_all(scope: str | None = None) -> list[Problem]:
    def one(other: Host) -> list[Problem]:
        cfg = HostConfig.from_data(other.name, other.data)
        if cfg.engine not in FACTS:
            return []
        fact = other.get_fact(FACTS[cfg.engine])
        return problems(cfg, engine.group(cfg), live_role(cfg.engine, fact))

    active = {h.name for h in inventory.get_active_hosts()}
    hosts = [h for h in inventory if h.name in active]
    if scope is not None:
        key = _group_key(inventory.get_host(scope))
        hosts = [h for h in hosts if _group_key(h) == key]
    return [p for found in runtime.on_every_host(hosts, one) for p in found]
