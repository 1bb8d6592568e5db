"""The host firewall on the converged lab (roles/firewall.py; `firewall` on in inventories/lab.py):
every VM loads its rules and drops what they do not allow; a VM outside a group reaches none of
its database, SSH or exporter ports while the group's members and the Prometheus host do; a
converge whose rules would shut its own SSH session out is refused before any change; rules that
refuse a new SSH session anyway are reverted and the operation fails.

Probes go between the lab's own VMs only (their private network, 10.99.0.0/24): a dropped
connection times out, an allowed one is answered."""

import pytest

from tests.e2e.conftest import REPO

pytestmark = pytest.mark.e2e

ELSEWHERE = REPO / "tests" / "e2e" / "inventories" / "firewall_elsewhere.py"
REFUSING = "tests/e2e/deploys/firewall_refusing.py"
ADDRESS = {"db1": "10.99.0.11", "db2": "10.99.0.12", "pg1": "10.99.0.21", "pg2": "10.99.0.22"}


def reaches(lab, source, target, port):
    """answered, refused (RST: nothing listens) or dropped (no answer within 4 s)."""
    probe = (
        f"timeout 4 bash -c 'exec 3<>/dev/tcp/{ADDRESS[target]}/{port}' 2>/dev/null; rc=$?; "
        "if [ $rc = 0 ]; then echo answered; elif [ $rc = 124 ]; then echo dropped; else echo refused; fi"
    )
    return lab.check(source, probe).strip()


def rules(lab, name):
    return lab.check(name, "nft list table inet dbzfs")


def test_every_vm_loads_its_rules_and_drops_the_rest(converged):
    for name in converged.names:
        listed = rules(converged, name)
        assert "policy drop;" in listed, (name, listed)
        assert converged.check(name, "systemctl is-enabled nftables").strip() == "enabled"


@pytest.mark.parametrize(
    ("source", "target", "port", "expected"),
    [
        ("db2", "db1", 3306, "answered"),  # replication
        ("pg1", "db1", 3306, "dropped"),  # another group
        ("db2", "db1", 9100, "answered"),  # db2 runs Prometheus
        ("pg1", "db1", 9100, "dropped"),
        ("pg1", "db1", 9104, "dropped"),
        ("pg2", "pg1", 22, "answered"),  # seeding sends over SSH between members
        ("db1", "pg1", 22, "dropped"),
        ("db1", "pg1", 5432, "answered"),  # the lab's PostgreSQL clients: its private network
    ],
)
def test_a_vm_reaches_only_what_its_place_in_the_fleet_allows(converged, source, target, port, expected):
    assert reaches(converged, source, target, port) == expected


def test_rules_that_would_shut_out_the_converges_own_session_are_refused(converged):
    before = rules(converged, "db1")
    result = converged.pyinfra("--limit", "db1", inventory=ELSEWHERE)
    output = result.stdout + result.stderr
    assert result.rc == 2, output[-4000:]
    assert "db1: firewall_admin_networks = ['192.0.2.0/24']" in output, output[-4000:]
    assert "comes from 10.0.2.2, which the new rules would refuse" in output
    assert rules(converged, "db1") == before


def test_rules_that_refuse_a_new_session_are_reverted(converged):
    before = rules(converged, "db1"), converged.check("db1", "sha1sum /etc/nftables.conf")
    result = converged.pyinfra("--limit", "db1", deploy=REFUSING, timeout=600)
    output = result.stdout + result.stderr
    assert result.rc != 0, output[-4000:]
    assert "refused a new SSH session; the previous rules are back" in output, output[-4000:]
    assert (rules(converged, "db1"), converged.check("db1", "sha1sum /etc/nftables.conf")) == before
