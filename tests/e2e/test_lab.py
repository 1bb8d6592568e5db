"""The lab itself: every VM has its 24 NVMe drives by id, a loaded zfs module (except the VMs whose
deploy installs ZFS: test_bare_host_plan.py), the private network, apt through the host's cache,
and no way out to anything else: proved from how qemu runs them and from the guests' own routing
tables and resolvers, and with listeners on this machine's own addresses that a guest must fail to
reach. No test here aims a packet at an address beyond this machine (nor resolves a name)."""

import fnmatch
import ipaddress
import json
import time

import pytest

from lab import aptcache, vm as vmmod

from tests import labkit

pytestmark = pytest.mark.e2e


def test_every_vm_answers_with_its_own_name_and_address(lab):
    results = lab.run_all("hostname; ip -4 -o addr show dev eth1")
    for name, r in results.items():
        r.check()
        lines = r.stdout.splitlines()
        vm = lab.vms[name]
        assert lines[0] == name
        assert f"inet {vm.private_address}/{vm.private_prefix}" in r.stdout


def test_every_vm_has_its_nvme_drives_by_id(lab):
    results = lab.run_all("ls -1 /dev/disk/by-id/; echo ---; ls -1 /dev/ | grep -E '^nvme[0-9]+n1$'")
    for name, r in results.items():
        r.check()
        by_id, _, namespaces = r.stdout.partition("---\n")
        vm = lab.vms[name]
        matched = sorted(fnmatch.filter(by_id.split(), vm.drive_pattern))
        assert matched == sorted(vm.drive_ids), f"{name}: by-id drives {matched} != declared {vm.drive_ids}"
        assert len(matched) == vm.drive_count == 24
        assert len(namespaces.split()) == vm.drive_count


def test_zfs_module_is_loaded_and_tools_work(lab):
    from_image = [n for n, vm in lab.vms.items() if vm.image == "zfs"]
    results = lab.run_all(
        "test -d /sys/module/zfs && grep -qw '^zfs' /proc/modules && zfs version", names=from_image
    )
    for name, r in results.items():
        r.check()
        assert r.stdout.startswith("zfs-2."), f"{name}: {r.stdout}"
        assert "zfs-kmod-2." in r.stdout, f"{name}: {r.stdout}"


def test_private_network_links_the_vms(lab):
    db1 = lab.vms["db1"]
    others = [vm for vm in lab.vms.values() if vm.name != db1.name]
    cmd = " && ".join(f"ping -c 2 -W 5 {vm.private_address}" for vm in others)
    lab.check(db1.name, cmd, timeout=120)
    lab.check("pg2", f"ping -c 2 -W 5 {lab.vms['pg1'].private_address}", timeout=60)


def test_apt_works_through_the_host_cache(lab):
    # The stamp pyinfra's apt.update(cache_time=...) reads and writes (Debian's apt leaves it
    # alone): the converge that follows finds lists refreshed minutes ago and does not refresh
    # them a second time (engine.packages: only lists over an hour old).
    results = lab.run_all(
        "apt-get update -q 2>&1 && touch /var/lib/apt/periodic/update-success-stamp && "
        "apt-get install -y -q --no-install-recommends -s hello",
        timeout=600,
    )
    for name, r in results.items():
        r.check()
        # the bare image has no backports: a prebuilt ZFS install needs none (a release whose ZFS
        # comes from backports: bookworm's; trixie's ZFS is in its own contrib)
        release = labkit.lab_release()
        if release.zfs_suite != release.codename:
            zfs_image = lab.vms[name].image == "zfs"
            assert (release.zfs_suite in r.stdout) == zfs_image, f"{name}: {r.stdout}"
        else:
            assert "backports" not in r.stdout, f"{name}: {r.stdout}"
        assert "Inst hello" in r.stdout


# qemu's user-mode network as the lab leaves it (no net=, host=, dns= or ipv6-prefix= option, as
# test_each_qemu_has_only_the_intended_ways_out asserts): the guests' network on eth0, the host's
# alias in it (this machine's loopback, were the netdev not restricted), and the IPv6 router and
# prefix libslirp announces (it sends router advertisements even with restrict=on).
SLIRP_NET = "10.0.2.0/24"
SLIRP_HOST = "10.0.2.2"
SLIRP_ROUTER6 = "fe80::2"
SLIRP_PREFIX6 = "fec0::/64"
# A Debian package path: what apt-cacher-ng would fetch and cache from any host it is asked for,
# were it not limited to its Remap- backends (ForceManaged).
DEB = "/pool/main/h/hello/hello_2.10-3_amd64.deb"


def _apt_cache(lab):
    network = lab.definition.network
    return network.get("apt_cache_guest_address", "10.0.2.100"), int(network.get("apt_cache_port", 3142))


def _guest_networks(lab):
    """The networks the guests have addresses in: this machine's address for a probe is outside them."""
    private = {
        str(ipaddress.ip_interface(f"{vm.private_address}/{vm.private_prefix}").network)
        for vm in lab.definition.all_vms.values()
    }
    return [SLIRP_NET, *sorted(private)]


def test_each_qemu_has_only_the_intended_ways_out(lab):
    """Read from the running qemus (/proc/PID/cmdline: what each was started with, not what the code
    would start now): every VM has exactly two networks and no default one (-nodefaults, no -net or
    -nic). eth0 is qemu's user netdev with restrict=on, under which libslirp drops whatever the guest
    sends except to a guestfwd (and its DHCP offers no router and no DNS server), with one ssh
    forward from this machine's loopback and one guestfwd, to the apt cache on 127.0.0.1, and no
    other option. eth1 is the vde switch of the private network: started without a tap (no host
    interface on it) and with nothing plugged in but the lab's own qemus, so it has no way out."""
    guest_address, port = _apt_cache(lab)
    for name, vm in lab.vms.items():
        pid = vmmod.pid(vm)
        assert pid, f"{name}: no qemu runs for it"
        argv = labkit.process_argv(pid)
        network = labkit.qemu_network(argv)
        shown = f"{name}: qemu {' '.join(argv)}"
        assert "-nodefaults" in argv, f"{shown}\nwithout -nodefaults qemu may add a NIC of its own"
        assert network["other"] == [], f"{shown}\n-net / -nic add networks: {network['other']}"
        assert sorted(network["nics"]) == ["n0", "n1"], f"{shown}\nNICs on netdevs {network['nics']}"
        assert sorted(network["netdevs"]) == ["n0", "n1"], f"{shown}\nnetdevs {network['netdevs']}"
        kind, options = network["netdevs"]["n0"]
        wanted = [
            ("restrict", "on"),
            ("hostfwd", f"tcp:127.0.0.1:{vm.ssh_port}-:22"),
            ("guestfwd", f"tcp:{guest_address}:{port}-cmd:socat - TCP:127.0.0.1:{port}"),
        ]
        assert (kind, sorted(options)) == ("user", sorted(wanted)), (
            f"{shown}\neth0's netdev is {kind} {options}, not user {wanted}: restrict=on with only "
            "the ssh forward and the apt cache's guestfwd"
        )
        assert network["netdevs"]["n1"] == ("vde", [("sock", str(vmmod.SWITCH))]), shown
    switch = vmmod.switch_pid()
    assert switch, "the private network's vde_switch is not running"
    argv = labkit.process_argv(switch)
    # lab/vm.py: vde_switch -s SWITCH -m 700 -p PIDFILE -d. A tap (-t/--tap) would put this
    # machine on the private network, a management socket (-M) would let one be added later.
    assert [a for a in argv[1:] if a.startswith("-")] == ["-s", "-m", "-p", "-d"], argv
    qemus = {vmmod.pid(vm) for vm in lab.definition.all_vms.values()} - {None}
    plugged = set(labkit.pids_naming(str(vmmod.SWITCH))) - {switch}
    assert plugged <= qemus, "plugged into the private network besides the lab's qemus: " + "; ".join(
        f"{p}: {' '.join(labkit.process_argv(p))}" for p in sorted(plugged - qemus)
    )


def test_guests_have_no_route_and_no_name_server_out(lab):
    """In each guest (its routing tables, all of them, both families; read, nothing is sent): the
    only routes are on-link ones to qemu's user network on eth0 and to the private network on eth1
    (and their IPv6 link-local and slirp prefixes), and the only route through a gateway is the IPv6
    default route to libslirp's router on eth0, which restrict=on makes a dead end (libslirp sends
    router advertisements even then). No IPv4 default route: under restrict=on libslirp's DHCP offers
    none. No name server it could get an answer from: the image's /etc/resolv.conf is what
    debootstrap copied from the machine that built it (lab/image.py writes none, and DHCP under
    restrict=on offers no DNS server), so its text is not pinned; every server it lists has no route
    from the guest, or only through eth0, where restrict=on answers nothing on port 53, and nothing
    listens on port 53 in the guest itself (glibc's fallback when none is listed)."""
    results = lab.run_all(labkit.GUEST_NETWORK_FACTS, timeout=120)
    for name, r in results.items():
        r.check()
        facts = json.loads(r.stdout)
        vm = lab.vms[name]
        private = str(ipaddress.ip_interface(f"{vm.private_address}/{vm.private_prefix}").network)
        routes = facts["routes"]
        # what DHCP and dbzfs-lab-boot set: without these the checks below would prove nothing
        assert any(x.get("dst") == SLIRP_NET and x.get("dev") == "eth0" for x in routes), (name, routes)
        assert any(x.get("dst") == private and x.get("dev") == "eth1" for x in routes), (name, routes)
        out = labkit.ways_out(
            routes,
            on_link=[
                ("eth0", SLIRP_NET),
                ("eth0", SLIRP_PREFIX6),
                ("eth0", "fe80::/64"),
                ("eth1", private),
                ("eth1", "fe80::/64"),
            ],
            gateways=[("eth0", SLIRP_ROUTER6)],
        )
        assert out == [], f"{name}: routes out of the guest: {out}"
        answering = labkit.resolvers_out(facts["nameservers"], facts["port53"], devices=("eth0",))
        assert answering == [], (
            f"{name}: name servers the guest could reach: {answering}\n"
            f"/etc/resolv.conf:\n{facts['resolv_conf']}"
        )


def test_guests_reach_nothing_of_this_machine_but_the_apt_cache(lab):
    """Listeners on this machine (on an address of its own outside the guests' networks, and on its
    loopback, which libslirp would map 10.0.2.2 to without restrict=on) must see no connection from
    any guest: not to that address as the guest routes it (it has no route there), not through
    libslirp with a route the guest adds itself (restrict=on answers with a reset), not to 10.0.2.2.
    The positive control: the same probe reaches the apt cache through its guestfwd; and each
    listener records a connection made from this machine before the guests try. Every probe aims at
    this machine, so even a lab that lost its isolation would send nothing beyond it."""
    guest_address, port = _apt_cache(lab)
    with (
        labkit.address_of_this_machine(avoid=_guest_networks(lab)) as address,
        labkit.Listener(address) as host,
        labkit.Listener("127.0.0.1") as loopback,
    ):
        host.proves_it_records()
        loopback.proves_it_records()
        script = labkit.tcp_probes(
            cache=(guest_address, port), host=(address, host.port), loopback=(SLIRP_HOST, loopback.port)
        )
        # a route of the guest's own to this machine's address through libslirp, removed at once
        script += (
            f"if ip route add {address}/32 via {SLIRP_HOST} dev eth0; then\n"
            f"  probe routed {address} {host.port}\n"
            f"  ip route del {address}/32 via {SLIRP_HOST} dev eth0\nfi\n"
        )
        results = lab.run_all(script, timeout=120)
        time.sleep(1)  # a connection that got through is recorded by the listener's thread
        for name, r in results.items():
            r.check()
            got = labkit.probe_results(r.stdout)
            assert got.get("cache") == "open", (
                f"{name}: the apt cache's guestfwd is not reachable: {r.stdout}"
            )
            for probe in ("host", "routed", "loopback"):
                assert got.get(probe, "").startswith("closed"), (
                    f"{name}: probe {probe} ({host.endpoint}, loopback {loopback.port}): "
                    f"{got.get(probe, 'not run')}\n{r.stdout}{r.stderr}"
                )
        assert host.seen == [], f"{host.endpoint} was reached from {host.seen}"
        assert loopback.seen == [], f"{loopback.endpoint} was reached from {loopback.seen}"


def test_the_apt_cache_fetches_from_nothing_but_debians_archive(lab):
    """The apt cache is the lab's own apt-cacher-ng with the configuration lab/aptcache.py writes:
    bound to 127.0.0.1, its only backends Debian's archive (deb.debian.org, the security archive by
    its names) and the lab's own ZFS module repository on itself, ForceManaged (anything else is
    refused) and no pass-through (no CONNECT). Asked by the guests to fetch a package from this
    machine (its address and its loopback, on port 80: apt-cacher-ng refuses any other port before
    ForceManaged comes into play, so port 80 is the one that proves ForceManaged), it answers 403
    and the listeners there see no connection."""
    guest_address, port = _apt_cache(lab)
    daemon = aptcache.pid()
    assert daemon, (
        f"the apt cache on 127.0.0.1:{port} is not the lab's own apt-cacher-ng (no {aptcache.PIDFILE})"
    )
    argv = labkit.process_argv(daemon)
    assert argv[1:] == ["-c", str(aptcache.CONF)], f"apt-cacher-ng (pid {daemon}): {argv}"
    conf = (aptcache.CONF / "acng.conf").read_text()
    assert conf == aptcache._config(port), f"{aptcache.CONF}/acng.conf is not lab/aptcache.py's:\n{conf}"
    settings = {}
    for line in conf.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition(":")
            settings[key.strip()] = value.split("#", 1)[0].strip()
    assert settings["BindAddress"] == "127.0.0.1"
    assert settings["ForceManaged"] == "1"
    assert settings["PassThroughPattern"] == "^$"
    backends = sorted(v.split(";", 1)[1].strip() for k, v in settings.items() if k.startswith("Remap-"))
    assert backends == [
        "deb.debian.org/debian-security",
        "file:backends_debian",
        f"http://127.0.0.1:{port}/{aptcache.ZFS_REPO_NAME}/",
    ], backends
    assert (aptcache.CONF / "backends_debian").read_text().split() == ["http://deb.debian.org/debian/"]
    with (
        labkit.address_of_this_machine(avoid=_guest_networks(lab)) as address,
        labkit.Listener(address, 80) as host,
        labkit.Listener("127.0.0.1", 80) as loopback,
    ):
        host.proves_it_records()
        loopback.proves_it_records()
        urls = [f"http://{address}{DEB}", f"http://127.0.0.1{DEB}", f"http://{address}/"]
        results = lab.run_all(labkit.proxy_probe(f"http://{guest_address}:{port}", urls), timeout=180)
        time.sleep(1)
        for name, r in results.items():
            r.check()
            got = labkit.proxy_results(r.stdout)
            assert got == dict.fromkeys(urls, "refused 403"), f"{name}: {got}\n{r.stdout}{r.stderr}"
        assert host.seen == [], f"the apt cache connected to {host.endpoint} (from {host.seen})"
        assert loopback.seen == [], f"the apt cache connected to {loopback.endpoint} (from {loopback.seen})"
