"""tests/e2e/test_firewall.py: rules that let no new SSH session from this machine in, put in
place by operations/firewall.py directly (roles/firewall.py would refuse them before any change:
`session_problems`), its revert armed for 20 s: the operation must fail and the previous rules
come back."""

import dataclasses

from pyinfra import host, inventory

from model.hostdata import FirewallSpec, HostConfig
from operations import firewall as ops
from roles import firewall

cfg = HostConfig.from_data(host.name, host.data)
cfg = dataclasses.replace(cfg, firewall_spec=FirewallSpec(enabled=True, admin_networks=("192.0.2.0/24",)))
ops.rules(
    name="Rules that refuse this machine's new SSH sessions",
    path=firewall.RULES_FILE,
    content=firewall.ruleset_text(cfg, [HostConfig.from_data(h.name, h.data) for h in inventory]),
    table=firewall.TABLE,
    revert_after=20,
)
