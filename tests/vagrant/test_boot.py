"""The Vagrantfile for real (libvirt), in `./dbzfs test-long` before the lab boots: one VM up through
`vagrant up` from the lab's own box, its 24 NVMe drives by id with the lab's serials, and apt
reaching only the host's cache. The converge on it is test_converge.py (`./dbzfs test-long`).

Isolation is proved without aiming a packet beyond this machine (nor resolving a name): from the
domain and network definitions libvirt runs (no <forward>: an isolated network, whose dnsmasq gives
no default route and forwards no DNS query), from the guest's own routing table and resolver, and
with listeners on this machine's own addresses that the guest must fail to reach."""

import ipaddress
import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests import labkit
from tests.vagrant.conftest import APT_PROXY, GATEWAY, NAME, REPO, on_vm, run

pytestmark = [pytest.mark.e2e, pytest.mark.vagrant]

VIRSH = ["virsh", "-c", "qemu:///system"]
QEMU_NS = "{http://libvirt.org/schemas/domain/qemu/1.0}"
DNSMASQ = Path("/var/lib/libvirt/dnsmasq")  # libvirt's dnsmasq configuration, one file per network
# A Debian package path: what apt-cacher-ng would fetch and cache from any host it is asked for,
# were it not limited to its Remap- backends (ForceManaged).
DEB = "/pool/main/h/hello/hello_2.10-3_amd64.deb"


def test_the_vm_has_its_24_nvme_drives_by_id_with_the_lab_serials(vagrant_vm):
    listed = on_vm(vagrant_vm, "ls /dev/disk/by-id")
    assert listed.returncode == 0, listed.stderr
    wanted = [d.rsplit("/", 1)[-1] for d in vagrant_vm.definition.vm(NAME).drive_ids]
    assert len(wanted) == 24 and set(wanted) <= set(listed.stdout.split()), listed.stdout


def _domain():
    """The libvirt domain `vagrant up` made for the VM (its UUID is in .vagrant/machines)."""
    uuid = (REPO / ".vagrant" / "machines" / NAME / "libvirt" / "id").read_text().strip()
    return ET.fromstring(run([*VIRSH, "dumpxml", uuid]).stdout)


def _networks():
    """name -> the libvirt network definition of every network the VM's NICs are on."""
    names = [i.find("source").get("network") for i in _domain().findall("./devices/interface")]
    return {n: ET.fromstring(run([*VIRSH, "net-dumpxml", n]).stdout) for n in names if n}


def _subnet(network):
    """The network's IPv4 subnet as libvirt gives it to the host's bridge (None without one)."""
    ip = network.find("ip")
    if ip is None or ip.get("family", "ipv4") != "ipv4":
        return None
    mask = ip.get("netmask") or ip.get("prefix")
    return ipaddress.ip_interface(f"{ip.get('address')}/{mask}").network


def _dnsmasq(name):
    """The lines of libvirt's dnsmasq configuration for network `name`."""
    path = DNSMASQ / f"{name}.conf"
    assert path.exists(), f"{path} missing: libvirt runs no dnsmasq for network {name}, or keeps it elsewhere"
    return path.read_text().splitlines()


def _local_only(lines):
    """A libvirt dnsmasq that gives no default route (an empty router option) and forwards no query
    (no-resolv, no upstream server): what libvirt writes for a network without <forward>."""
    return (
        "dhcp-option=3" in lines and "no-resolv" in lines and not any(x.startswith("server=") for x in lines)
    )


def test_the_vms_networks_do_not_forward(vagrant_vm):
    """Read from libvirt (what runs, not what the Vagrantfile asks for: vagrant-libvirt reuses a
    network that already exists with the same address, whatever its mode): every NIC of the domain
    is on a libvirt network, none of which has a <forward> element (DBZFS_VAGRANT_ISOLATED=1 for the
    management network, libvirt__forward_mode "none" for the private one), so libvirt routes nothing
    from them beyond this machine; the dnsmasq of each gives no default route and forwards no DNS
    query; no raw qemu argument adds a network of its own (the Vagrantfile passes only drives)."""
    domain = _domain()
    interfaces = domain.findall("./devices/interface")
    assert interfaces, ET.tostring(domain, encoding="unicode")
    for i in interfaces:
        assert i.get("type") == "network", (
            f"a NIC not on a libvirt network: {ET.tostring(i, encoding='unicode')}"
        )
    raw = [a.get("value") for a in domain.iter(f"{QEMU_NS}arg")]
    assert not {"-netdev", "-nic", "-net"} & set(raw), f"raw qemu arguments add a network: {raw}"
    networks = _networks()
    assert len(networks) == len(interfaces) == 2, sorted(networks)
    for name, network in networks.items():
        shown = ET.tostring(network, encoding="unicode")
        assert network.find("forward") is None, f"network {name} forwards:\n{shown}"
        if _subnet(network) is not None:
            assert _local_only(_dnsmasq(name)), f"network {name}: {DNSMASQ}/{name}.conf:\n" + "\n".join(
                _dnsmasq(name)
            )
    addresses = [n.find("ip").get("address") for n in networks.values() if n.find("ip") is not None]
    assert GATEWAY in addresses, f"no network of the VM has the host address {GATEWAY}: {addresses}"


def test_the_vm_has_no_route_and_no_name_server_beyond_the_host(vagrant_vm):
    """In the guest (its routing tables, all of them, both families; read, nothing is sent): only
    on-link routes to its two networks (and IPv6 link-local), no route through any gateway, no
    default route. Its name servers: only libvirt's dnsmasq on the host side of an isolated network
    (which answers local names only: no-resolv, no upstream server), or none it has a route to."""
    networks = _networks()
    subnets = [str(s) for s in map(_subnet, networks.values()) if s is not None]
    assert len(subnets) == 2, subnets
    got = on_vm(vagrant_vm, labkit.GUEST_NETWORK_FACTS, timeout=120)
    assert got.returncode == 0, got.stdout + got.stderr
    facts = json.loads(got.stdout)
    routes = facts["routes"]
    for subnet in subnets:  # what DHCP and Vagrant set: without these the checks below prove nothing
        assert any(r.get("dst") == subnet for r in routes), (subnet, routes)
    out = labkit.ways_out(routes, on_link=[*((None, s) for s in subnets), (None, "fe80::/64")])
    assert out == [], f"routes out of the guest: {out}"
    local_only = [
        n.find("ip").get("address")
        for name, n in networks.items()
        if _subnet(n) is not None and _local_only(_dnsmasq(name))
    ]
    answering = labkit.resolvers_out(facts["nameservers"], facts["port53"], servers=local_only)
    assert answering == [], (
        f"name servers the guest could reach: {answering}\n/etc/resolv.conf:\n{facts['resolv_conf']}"
    )


def test_apt_reaches_only_the_hosts_cache(vagrant_vm):
    """A listener on an address of this machine outside the VM's networks sees no connection from the
    guest (which has no route there), while the same probe reaches the host's apt cache (the
    forwarder on the management network's host address): the positive control, with the listener
    recording a connection from this machine first. The cache, asked by the guest to fetch a
    package from this machine (that address and its loopback, on port 80: apt-cacher-ng refuses any
    other port before its ForceManaged rule comes into play), answers 403 and the listeners see
    nothing. Then apt updates through the cache."""
    subnets = [str(s) for s in map(_subnet, _networks().values()) if s is not None]
    with (
        labkit.address_of_this_machine(avoid=subnets) as address,
        labkit.Listener(address) as host,
        labkit.Listener(address, 80) as host80,
        labkit.Listener("127.0.0.1", 80) as loopback80,
    ):
        for listener in (host, host80, loopback80):
            listener.proves_it_records()
        gateway, port = APT_PROXY.removeprefix("http://").split(":")
        probes = on_vm(vagrant_vm, labkit.tcp_probes(cache=(gateway, port), host=(address, host.port)))
        got = labkit.probe_results(probes.stdout)
        assert got.get("cache") == "open", (
            f"the host's apt cache is not reachable: {probes.stdout}{probes.stderr}"
        )
        assert got.get("host", "").startswith("closed"), f"{host.endpoint}: {got.get('host', 'not run')}"
        urls = [f"http://{address}{DEB}", f"http://127.0.0.1{DEB}", f"http://{address}/"]
        proxied = on_vm(vagrant_vm, labkit.proxy_probe(APT_PROXY, urls), timeout=180)
        assert labkit.proxy_results(proxied.stdout) == dict.fromkeys(urls, "refused 403"), (
            proxied.stdout + proxied.stderr
        )
        time.sleep(1)  # a connection that got through is recorded by the listener's thread
        for listener in (host, host80, loopback80):
            assert listener.seen == [], f"{listener.endpoint} was reached from {listener.seen}"
    proxied = on_vm(vagrant_vm, "apt-get -o Debug::NoLocking=1 update -qq && echo ok", timeout=900)
    assert proxied.returncode == 0 and "ok" in proxied.stdout, proxied.stdout + proxied.stderr
