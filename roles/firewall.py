"""The host firewall (issue 48; key `firewall`): nftables from Debian's archive, one table of ours
(`inet dbzfs`), inbound denied but for what the fleet itself needs, each rule derived from the
inventory (`allowed`) and rendered (`ruleset_text`), nothing declared by hand.

What a host accepts, and from where (IPv4 and IPv6 networks alike; a host address is a /32 or
/128):
- always: loopback, the replies to its own connections (conntrack), ICMP's errors and echo, and
  IPv6's neighbour discovery;
- SSH (22): firewall_admin_networks (the operator's machines: every converge and runbook comes
  from there); the other members of its replication group (a seed sends `zfs send | ssh` from a
  member's replication address); the backup hosts (syncoid pulls, pgBackRest's remote protocol);
  on a backup host, the PostgreSQL hosts (pgBackRest's archive-push);
- the database port (MariaDB 3306, PostgreSQL 5432): db_client_networks, the group's members
  (replication), and for MariaDB the backup hosts (the binary log stream);
- the exporters (node_exporter and the engine's; a backup host's node_exporter): the Prometheus
  hosts (a Prometheus host scrapes itself over loopback);
- Prometheus' port on a Prometheus host: firewall_admin_networks.

The table replaces only itself (`table`, `delete table`, then the table: one nft transaction), so
rules of other tools in other tables stay. Outbound and forwarded traffic are not filtered here.

Lockout: a converge refuses, before any change, rules that would not let the SSH session it runs
on in again (`session_problems`: its source address must be in SSH's sources).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from pyinfra import host, inventory
from pyinfra.api.host import Host

from facts.firewall import SessionAddress
from model.hostdata import HostConfig
from model.problems import Problem, format_problems
from operations import firewall as firewall_ops, runtime
from roles import engine

TABLE = "dbzfs"
RULES_FILE = "/etc/nftables.conf"  # what Debian's nftables.service loads at boot
SSH_PORT = 22
ENGINE_PORTS = {"mariadb": 3306, "postgresql": 5432}


@dataclass(frozen=True)
class Allow:
    """One port accepted from a set of networks, and why."""

    port: int
    sources: tuple[str, ...]  # networks, CIDR, sorted, IPv4 first
    why: str


def _network(address: str) -> str:
    return str(ipaddress.ip_network(address, strict=False))


def _networks(addresses) -> tuple[str, ...]:  # noqa: ANN001 - any iterable of addresses or networks
    nets = {ipaddress.ip_network(a, strict=False) for a in addresses if a}
    return tuple(str(n) for n in sorted(nets, key=lambda n: (n.version, n.network_address, n.prefixlen)))


def _addresses(hosts: Sequence[HostConfig]) -> list[str]:
    return [h.replication_address for h in hosts if h.replication_address]


def members(cfg: HostConfig, hosts: Sequence[HostConfig]) -> list[HostConfig]:
    """The other members of the host's replication group (same engine and cluster)."""
    return [
        h
        for h in hosts
        if h.name != cfg.name
        and h.engine
        and h.engine == cfg.engine
        and h.cluster == cfg.cluster
        and not h.is_backup_host
    ]


def allowed(cfg: HostConfig, hosts: Sequence[HostConfig]) -> list[Allow]:
    """What the host accepts, port by port (see the module's docstring). Pure."""
    admin = cfg.firewall_spec.admin_networks
    backups = [h for h in hosts if h.is_backup_host]
    prometheus = [h for h in hosts if h.prometheus_server and h.name != cfg.name]
    found = []
    scrapers = _networks(_addresses(prometheus))
    if cfg.is_backup_host:
        pg = [h for h in hosts if h.engine == "postgresql" and not h.is_backup_host]
        found.append(
            Allow(SSH_PORT, _networks([*admin, *_addresses(pg)]), "SSH: operators, pgBackRest's archive-push")
        )
        found.append(
            Allow(cfg.monitoring.node_exporter_port, scrapers, "node_exporter: the Prometheus hosts")
        )
    elif cfg.engine:
        group = members(cfg, hosts)
        found.append(
            Allow(
                SSH_PORT,
                _networks([*admin, *_addresses(group), *_addresses(backups)]),
                "SSH: operators, seeding from the group's members, the backup host's pulls",
            )
        )
        db = [*cfg.client_networks, *_addresses(group)]
        why = "the database: clients, replication"
        if cfg.engine == "mariadb" and backups:
            db += _addresses(backups)
            why += ", the backup host's binary log stream"
        found.append(Allow(ENGINE_PORTS[cfg.engine], _networks(db), why))
        m = cfg.monitoring
        exporter = m.mysqld_exporter_port if cfg.engine == "mariadb" else m.postgres_exporter_port
        for port, name in ((m.node_exporter_port, "node_exporter"), (exporter, f"{cfg.engine}'s exporter")):
            found.append(Allow(port, scrapers, f"{name}: the Prometheus hosts"))
    else:
        found.append(Allow(SSH_PORT, _networks(admin), "SSH: operators"))
    if cfg.prometheus_server:
        found.append(Allow(cfg.monitoring.prometheus_port, _networks(admin), "Prometheus: operators"))
    return found


def _elements(sources: Sequence[str], version: int) -> str:
    return ", ".join(s for s in sources if ipaddress.ip_network(s).version == version)


def ruleset_text(cfg: HostConfig, hosts: Sequence[HostConfig]) -> str:
    """The host's nftables rules (/etc/nftables.conf's content: `nft -f` loads it in one
    transaction). Pure."""
    lines = [
        "#!/usr/sbin/nft -f",
        f"# {cfg.name}: rendered by dbzfs (roles/firewall.py) from the inventory; edits are overwritten.",
        f"table inet {TABLE}",
        f"delete table inet {TABLE}",
        f"table inet {TABLE} {{",
        "    chain input {",
        "        type filter hook input priority filter; policy drop;",
        '        iif "lo" accept',
        "        ct state established,related accept",
        "        ct state invalid drop",
        "        meta l4proto icmp icmp type { echo-request, destination-unreachable, time-exceeded, "
        "parameter-problem } accept",
        "        meta l4proto ipv6-icmp icmpv6 type { echo-request, destination-unreachable, "
        "packet-too-big, time-exceeded, parameter-problem, nd-router-advert, nd-neighbor-solicit, "
        "nd-neighbor-advert } accept",
    ]
    for allow in allowed(cfg, hosts):
        lines.append(f"        # {allow.port}: {allow.why}")
        for family, version in (("ip", 4), ("ip6", 6)):
            elements = _elements(allow.sources, version)
            if elements:
                lines.append(f"        {family} saddr {{ {elements} }} tcp dport {allow.port} accept")
    lines += ["    }", "}", ""]
    return "\n".join(lines)


def session_problems(
    cfg: HostConfig, hosts: Sequence[HostConfig], session_address: str | None
) -> list[Problem]:
    """The rules would not let the SSH session the converge runs on in again: refused. Pure."""
    if not cfg.firewall_spec.enabled:
        return []
    ssh = next((a for a in allowed(cfg, hosts) if a.port == SSH_PORT), None)
    sources = [ipaddress.ip_network(s) for s in (ssh.sources if ssh else ())]
    try:
        address = ipaddress.ip_address((session_address or "").split("%")[0])
    except ValueError:
        return [
            Problem(
                cfg.name,
                "firewall_admin_networks",
                list(cfg.firewall_spec.admin_networks),
                f"the converge's SSH session has no address the host reports ({session_address!r})",
                "run the converge over SSH, from one of firewall_admin_networks",
            )
        ]
    if any(address in net for net in sources):
        return []
    return [
        Problem(
            cfg.name,
            "firewall_admin_networks",
            list(cfg.firewall_spec.admin_networks),
            f"the converge's own SSH session comes from {address}, which the new rules would refuse",
            f'add the operators\' network, e.g. "{_network(str(address))}", or converge from one listed',
        )
    ]


# --- pyinfra glue ------------------------------------------------------------------------------


def _configs() -> list[HostConfig]:
    return [HostConfig.from_data(h.name, h.data) for h in inventory]


def check() -> None:
    """Stop the run before any host is changed when a host's new rules would not let the SSH
    session the run is on in again (read on every active host with the firewall on, at once)."""

    def one(h: Host) -> list[Problem]:
        cfg = HostConfig.from_data(h.name, h.data)
        if not cfg.firewall_spec.enabled:
            return []
        return session_problems(cfg, _configs(), h.get_fact(SessionAddress))

    def read_all() -> list[Problem]:
        active = {h.name for h in inventory.get_active_hosts()}
        hosts = [h for h in inventory if h.name in active]
        return [p for found in runtime.on_every_host(hosts, one) for p in found]

    found = runtime.once_per_run("firewall session", read_all)
    if found:
        raise runtime.Refused("\n" + format_problems(found, what="in the firewall's rules"))


def apply() -> None:
    """The host's rules in place (operations/firewall.py), when its firewall is on."""
    cfg = HostConfig.from_data(host.name, host.data)
    if not cfg.firewall_spec.enabled:
        return
    hosts = _configs()
    engine.packages("nftables", ["nftables"])
    firewall_ops.rules(
        name=f"Firewall: {RULES_FILE} ({len(allowed(cfg, hosts))} ports open, the rest dropped)",
        path=RULES_FILE,
        content=ruleset_text(cfg, hosts),
        table=TABLE,
    )
