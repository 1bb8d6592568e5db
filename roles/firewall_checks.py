"""The host firewall's rules over its keys (roles/firewall.py): firewall_admin_networks are
networks, and a host with the firewall on lists at least one (else no operator reaches it again).
validation runs them (validation/checks.py) before any host is touched; the live side (the
converge's own SSH session let in again) is roles/firewall.py's `session_problems`."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from model import keys
from model.checking import Context
from model.hostdata import HostConfig
from model.key import STRING

_EXAMPLE = f"e.g. {keys.KEYS['firewall_admin_networks'].example}"


def type_admin_networks(ctx: Context, name: str, key: str, value: Sequence[object]) -> bool:
    return ctx.type_items(name, key, value, STRING, '"192.0.2.0/24"')


TYPES = {"firewall_admin_networks": type_admin_networks}


def host(ctx: Context, c: HostConfig) -> None:
    spec = c.firewall_spec
    if not ctx.ok(c, "firewall_admin_networks"):
        return
    for net in spec.admin_networks:
        try:
            ipaddress.ip_network(net)
        except ValueError:
            ctx.add(c.name, "firewall_admin_networks", net, "not a network (CIDR, host bits zero)", _EXAMPLE)
    if spec.enabled and not spec.admin_networks and ctx.ok(c, "firewall"):
        ctx.add(
            c.name,
            "firewall_admin_networks",
            [],
            "empty with firewall on: SSH would be refused from every operator's machine",
            f"list the networks the operators converge from, {_EXAMPLE}",
        )
