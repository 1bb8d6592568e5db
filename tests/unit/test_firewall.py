"""The host firewall's rules (roles/firewall.py), derived from the inventory: what each host
accepts and from where, the rendered nftables rules, and the lockout refusal."""

import hashlib
import shutil
import subprocess

import pytest

from facts.firewall import FirewallState, SessionAddress
from model.hostdata import HostConfig
from operations import firewall as firewall_ops
from roles import firewall
from validation import validate

from tests.unit.conftest import backup_data
from tests.unit.fact_stubs import run_operation

ADMIN = ["192.0.2.0/24"]


def configs(fleet, **data):
    fleet["backup1"] = backup_data()
    fleet["pg2"]["prometheus_server"] = True
    for d in fleet.values():
        d.update({"firewall": True, "firewall_admin_networks": ADMIN, **data})
    fleet["db1"]["db_client_networks"] = ["10.1.0.0/16"]
    return {n: HostConfig.from_data(n, d) for n, d in fleet.items()}


def by_port(cfg, hosts):
    return {a.port: a.sources for a in firewall.allowed(cfg, list(hosts.values()))}


def test_a_mariadb_host_accepts_its_group_clients_the_backup_host_and_prometheus(fleet):
    hosts = configs(fleet)
    ports = by_port(hosts["db1"], hosts)
    assert ports[22] == ("10.99.0.12/32", "10.99.0.51/32", "192.0.2.0/24")
    assert ports[3306] == ("10.1.0.0/16", "10.99.0.12/32", "10.99.0.51/32")  # the binlog stream
    assert ports[9100] == ports[9104] == ("10.99.0.22/32",)  # pg2 runs Prometheus
    assert set(ports) == {22, 3306, 9100, 9104}


def test_a_postgresql_host_takes_no_database_connection_from_the_backup_host(fleet):
    hosts = configs(fleet)
    ports = by_port(hosts["pg1"], hosts)
    assert ports[5432] == ("10.99.0.22/32",)  # pgBackRest reaches it over SSH
    assert "10.99.0.51/32" in ports[22]
    prometheus = by_port(hosts["pg2"], hosts)
    assert prometheus[9090] == ("192.0.2.0/24",) and prometheus[9100] == ()  # not scraped by itself


def test_the_backup_host_accepts_ssh_from_operators_and_the_postgresql_hosts(fleet):
    hosts = configs(fleet)
    assert by_port(hosts["backup1"], hosts) == {
        22: ("10.99.0.21/32", "10.99.0.22/32", "192.0.2.0/24"),
        9100: ("10.99.0.22/32",),
    }


def test_the_rules_replace_only_their_own_table_and_drop_the_rest(fleet):
    hosts = configs(fleet)
    text = firewall.ruleset_text(hosts["db1"], list(hosts.values()))
    assert "table inet dbzfs\ndelete table inet dbzfs\ntable inet dbzfs {" in text
    assert "policy drop;" in text and "flush ruleset" not in text
    assert "ip saddr { 10.1.0.0/16, 10.99.0.12/32, 10.99.0.51/32 } tcp dport 3306 accept" in text


def test_nft_accepts_the_rendered_rules(fleet, tmp_path):
    assert shutil.which("nft"), "nftables: scripts/bootstrap lab installs it"
    hosts = configs(fleet)
    for name, cfg in hosts.items():
        path = tmp_path / f"{name}.nft"
        path.write_text(firewall.ruleset_text(cfg, list(hosts.values())))
        # in a network namespace of its own: this machine's rules are never touched
        done = subprocess.run(["unshare", "-n", "nft", "-c", "-f", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, (name, done.stderr)


@pytest.mark.parametrize(
    ("session", "refused"),
    [("192.0.2.7", False), ("10.99.0.51", False), ("198.51.100.3", True), (None, True)],
)
def test_a_converge_is_refused_rules_that_would_shut_its_own_session_out(fleet, session, refused):
    hosts = configs(fleet)
    found = firewall.session_problems(hosts["db1"], list(hosts.values()), session)
    assert bool(found) == refused
    if refused:
        assert found[0].key == "firewall_admin_networks" and found[0].host == "db1"


def test_no_firewall_no_refusal(fleet):
    hosts = configs(fleet, firewall=False)
    assert firewall.session_problems(hosts["db1"], list(hosts.values()), "198.51.100.3") == []


def test_the_admin_networks_are_networks_and_required_with_the_firewall_on(fleet, secrets):
    fleet["db1"].update(firewall=True, firewall_admin_networks=["192.0.2.1/24", "office"])
    fleet["db2"].update(firewall=True)
    fleet["pg1"].update(firewall_admin_networks=[7])
    found = [(p.host, p.key, p.value) for p in validate(fleet, secrets)]
    assert found == [
        ("pg1", "firewall_admin_networks[0]", 7),  # the type pass reports first
        ("db1", "firewall_admin_networks", "192.0.2.1/24"),
        ("db1", "firewall_admin_networks", "office"),
        ("db2", "firewall_admin_networks", []),
    ]


RULES = "table inet dbzfs\ndelete table inet dbzfs\ntable inet dbzfs {\n}\n"


def test_rules_as_rendered_and_loaded_are_a_noop():
    live = {"sha1": hashlib.sha1(RULES.encode()).hexdigest(), "loaded": True}
    commands, host = run_operation(
        firewall_ops.rules, {FirewallState: live}, "/etc/nftables.conf", RULES, "dbzfs"
    )
    assert commands == [] and host.noops


@pytest.mark.parametrize("live", [{"sha1": None, "loaded": False}, {"sha1": "0" * 40, "loaded": True}])
def test_new_rules_are_checked_armed_loaded_confirmed_then_installed(live):
    commands, _ = run_operation(
        firewall_ops.rules, {FirewallState: live}, "/etc/nftables.conf", RULES, "dbzfs"
    )
    order = [
        "nft -c -f",
        "systemd-run",
        "nft -f /run/dbzfs-check/firewall.nft",
        "FunctionCommand",
        "install -m 644",
    ]
    at = [next(i for i, c in enumerate(commands) if word in c) for word in order]
    assert at == sorted(at), commands


def test_the_revert_restores_our_previous_rules_or_deletes_our_table():
    script = firewall_ops.arm_revert_script("/etc/nftables.conf", "dbzfs", 120)
    assert "grep -qx 'table inet dbzfs' /etc/nftables.conf" in script
    assert "printf 'table inet dbzfs\\ndelete table inet dbzfs\\n'" in script
    revert = "nft -f /run/dbzfs/firewall.before.nft && rm -f /run/dbzfs/firewall.before.nft"
    assert f"--on-active=120 sh -c '{revert}'" in script
    # disarmed and installed: nothing of it left in /run/dbzfs (the infra checks want it empty)
    installed = firewall_ops.installed_script("/run/dbzfs-check/firewall.nft", "/etc/nftables.conf")
    assert "rm -f /run/dbzfs-check/firewall.nft /run/dbzfs/firewall.before.nft" in installed


def test_the_session_address_is_the_ssh_client():
    assert SessionAddress().process(["session=10.0.2.2"]) == "10.0.2.2"
    assert SessionAddress().process(["session="]) is None
