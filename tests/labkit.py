"""A lab for one test session: booted fresh, driven through ssh/pyinfra/testinfra, and ALWAYS
powered off at the end. Used by tests/e2e (the lab's four VMs) and tests/install (bare VMs).

`fresh(definition, names, inventory)` is a context manager yielding a `Lab`: it refuses to start
while any lab VM runs (its VMs would compete for the CPU; stop them with ./dbzfs lab down), wipes
the named VMs' root disks and drives, boots them, and powers them down on success, failure,
Ctrl-C, SIGTERM/SIGHUP and, as a last resort, at interpreter exit (atexit). If a VM cannot come
up it raises: tests error out, never skip.
"""

import atexit
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from lab import control, vm as vmmod  # noqa: E402
from lab.definition import SSH_CONFIG, STATE  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Interrupted:
    operation: str | None  # the last operation pyinfra had started when it was killed
    after: float
    rc: int
    output: str
    leftovers: dict = field(default_factory=dict)  # VM -> commands it left running there


@dataclass
class Result:
    name: str
    command: str
    rc: int
    stdout: str
    stderr: str

    @property
    def ok(self):
        return self.rc == 0

    def check(self):
        assert self.rc == 0, (
            f"{self.name}: `{self.command}` failed (rc {self.rc})\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )
        return self


class Lab:
    def __init__(self, definition, names=None, inventory=None):
        self.definition = definition
        self.names = list(names or definition.vms)
        self.vms = {n: definition.vm(n) for n in self.names}
        self.ssh_config = SSH_CONFIG
        self.inventory = Path(inventory or control.INVENTORY)
        self.testinfra_hosts = ",".join(f"paramiko://{n}" for n in self.names)

    def run(self, name, command, timeout=600):
        vm = self.definition.vm(name)
        try:
            r = vmmod.run(vm, command, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            return Result(
                name, command, 124, _text(e.stdout), _text(e.stderr) + f"\n(timed out after {timeout} s)"
            )
        return Result(name, command, r.returncode, r.stdout, r.stderr)

    def check(self, name, command, timeout=600):
        return self.run(name, command, timeout).check().stdout

    def run_all(self, command, names=None, timeout=600):
        results = {}

        def one(n):
            results[n] = self.run(n, command, timeout)

        threads = [threading.Thread(target=one, args=(n,)) for n in (names or self.names)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {n: results[n] for n in (names or self.names)}

    def _local(self, argv, timeout):
        try:
            r = subprocess.run(
                argv,
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                env=control.lab_env(),
            )
        except subprocess.TimeoutExpired as e:
            stderr = _text(e.stderr) + f"\n(timed out after {timeout} s)\n" + self.diagnostics()
            return Result("local", " ".join(argv), 124, _text(e.stdout), stderr)
        return Result("local", " ".join(argv), r.returncode, r.stdout, r.stderr)

    def diagnostics(self):
        """What each VM is doing, for a command that hung: the kernel's last words, the kernel
        stacks of blocked tasks, the processes not sleeping, the serial console."""
        probe = (  # dmesg and the kernel stacks first: ps itself can block on a stuck process
            "dmesg | tail -n 30; for p in $(ps -eo pid=,stat= | awk '$2 ~ /^D/ {print $1}'); do "
            'echo "== $p $(cat /proc/$p/comm)"; head -n 12 /proc/$p/stack; done; '
            "ps -eo pid,stat,etimes,wchan:30,args --sort=start_time | awk 'NR==1 || $2 !~ /^[SI]/' "
            "| cut -c1-200"
        )
        parts = []
        for name in self.names:
            r = self.run(name, probe, timeout=90)
            shown = r.stdout if r.ok else f"(ssh failed, rc {r.rc}: {r.stderr.strip()[-300:]})"
            parts.append(
                f"--- {name}: dmesg, blocked tasks' kernel stacks, processes not sleeping\n{shown}\n"
                f"--- {name}: serial console\n{vmmod.console_tail(self.vms[name], 40)}"
            )
        return "\n".join(parts)

    def pyinfra(self, *args, deploy="deploy.py", timeout=3600, profile=None, inventory=None):
        """pyinfra -y INVENTORY ARGS DEPLOY; with `profile` (a name), under lab.converge_profile:
        the timings go to .lab/profile-NAME.json and its summary is printed. `inventory`: another
        inventory file for the lab's VMs (default inventories/lab.py)."""
        argv = [str(control.PYINFRA), "-y", str(inventory or self.inventory), *args, deploy]
        if profile:
            out = control.STATE / f"profile-{profile}.json"
            argv = [str(control.PYTHON), "-m", "lab.converge_profile", str(out), *argv[1:]]
        result = self._local(argv, timeout)
        if profile:
            summary = result.stderr[result.stderr.rfind("==> converge profile") :]
            log(summary if summary.startswith("==>") else f"==> no converge profile (rc {result.rc})")
        return result

    def pyinfra_killed(self, after, deploy="deploy.py", timeout=1800, args=()):
        """pyinfra -y INVENTORY DEPLOY, its process SIGKILLed `after` seconds into the operations
        (counted from pyinfra's "Beginning operation run"): no cleanup, its ssh connections
        dropped, as a lost laptop or a killed CI job leaves a converge. Returns an Interrupted:
        the operation that was running (None if pyinfra ended first) and the output so far.
        `args`: more pyinfra arguments (e.g. --limit HOST)."""
        argv = [str(control.PYINFRA), "-y", str(self.inventory), *args, deploy]
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=control.lab_env(),
        )
        lines, began = [], threading.Event()

        def read():
            for line in proc.stdout:
                lines.append(line)
                if "Beginning operation run" in line:
                    began.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        while not began.wait(1) and proc.poll() is None and time.monotonic() < deadline:
            pass
        operation = None
        if began.is_set():
            try:
                proc.wait(after)
            except subprocess.TimeoutExpired:
                starts = [ANSI.sub("", x) for x in lines if "Starting operation:" in ANSI.sub("", x)]
                operation = starts[-1].split("Starting operation:", 1)[1].strip() if starts else "(none yet)"
                proc.kill()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(10)
        return Interrupted(operation, after, proc.returncode, "".join(lines))

    def wait_for_leftovers(self, timeout=900):
        """After a killed converge: the commands it left running on each VM (its `sh -c` shells
        and what they started; nobody waits for their output any more) are waited for, so the
        next run starts from a settled host. Returns {name: [the processes found]}."""
        found = {
            name: r.stdout.splitlines() for name, r in self.run_all("pgrep -a -f '^sh -c ' || true").items()
        }
        deadline = time.monotonic() + timeout
        for name, procs in found.items():
            pids = " ".join(p.split()[0] for p in procs)
            while pids and time.monotonic() < deadline:
                if not self.run(name, f"ps -o pid= -p {pids}").stdout.strip():
                    break
                time.sleep(5)
            else:
                if pids:
                    raise AssertionError(f"{name}: still running after {timeout} s: {procs}")
        return found

    def pyinfra_dry(self, deploy="deploy.py", timeout=3600, limit=None):
        """pyinfra INVENTORY DEPLOY --dry --diff, without -y (with -y pyinfra skips change
        detection, and a dry run would propose nothing); `limit`: pyinfra's --limit."""
        extra = ["--limit", limit] if limit else []
        return self._local(
            [str(control.PYINFRA), str(self.inventory), deploy, "--dry", "--diff", *extra], timeout
        )

    def testinfra(self, *paths, hosts=None, timeout=1800, inventory=None):
        """pytest PATHS (default tests/infra) against `hosts` (names; default every lab host);
        `inventory`: the one they were converged from (default the lab's)."""
        targets = ",".join(f"paramiko://{n}" for n in hosts) if hosts else self.testinfra_hosts
        return self._local(
            [
                str(control.PYTEST),
                "-p",
                "no:cacheprovider",
                *(paths or ["tests/infra"]),
                f"--hosts={targets}",
                f"--ssh-config={self.ssh_config}",
                f"--inventory={Path(inventory or self.inventory).resolve().relative_to(REPO)}",
            ],
            timeout,
        )

    def join(self, name):
        """Boot a VM of lab.yaml's joining_vms (or backup_vms) fresh (new root disk, empty
        drives); it runs until leave() or the session's teardown, which powers off every lab VM."""
        control.wipe(self.definition, [name], log=log)
        control.up(self.definition, [name], log=log)
        self.names.append(name)
        self.vms[name] = self.definition.vm(name)

    def leave(self, name):
        control.down(self.definition, [name], log=log)
        self.names.remove(name)
        del self.vms[name]

    def reset_drives(self, name):
        vm = self.definition.vm(name)
        vmmod.reset_drives(vm, log=log)
        control.up(self.definition, [name], log=log)


def _text(b):
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b


_capture = None  # pytest's capture manager, set by the fixture


def env_number(name, default, kind=int, minimum=0):
    """A number from the environment variable `name` (`default` when unset); a bad value stops the
    run with one line naming the variable and the value, before any VM boots."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or value < minimum:
        what = "a whole number" if kind is int else "a number"
        unset = "unset it" + (f" for the default ({default})" if default is not None else "")
        pytest.fail(f"{name}={raw!r}: not {what} >= {minimum}; {unset}", pytrace=False)
    return value


def wait_for(check, what, timeout=180):
    """Call `check` every 3 s until it returns something true (returned) or `timeout` s passed
    (an assertion naming `what`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"{what} within {timeout} s"
            return value
        time.sleep(3)


def in_parallel(**calls):
    """Run the named calls in threads; their results by name (an exception is re-raised)."""
    results = {}

    def one(name, call):
        try:
            results[name] = call()
        except BaseException as e:  # noqa: BLE001 (re-raised below, in the test's thread)
            results[name] = e

    threads = [threading.Thread(target=one, args=item) for item in calls.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for value in results.values():
        if isinstance(value, BaseException):
            raise value
    return results


def runbook(lab, deploy, *data, inventory=None, limit=None):
    """A runbook (deploy file) run with pyinfra against the lab, `--data` items and an optional
    `--limit`: the result and its whole output."""
    args = [a for item in data for a in ("--data", item)] + (["--limit", limit] if limit else [])
    result = lab.pyinfra(*args, deploy=deploy, inventory=inventory)
    return result, result.stdout + result.stderr


def log(msg):
    # Progress goes to the terminal even under pytest's output capture.
    if _capture is not None:
        with _capture.global_and_fixture_disabled():
            print(msg, file=sys.stderr, flush=True)
    else:
        print(msg, file=sys.stderr, flush=True)


class _Teardown:
    """Power the VMs down exactly once: from the fixture's finally, a signal, or atexit. With
    names=None: every lab VM, stray qemus and the private network's switch."""

    def __init__(self, definition, names=None):
        self.definition = definition
        self.names = names
        self.done = False
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            if self.done:
                return
            self.done = True
            t0 = time.monotonic()
            what = ", ".join(self.names) if self.names else "the lab"
            log(f"==> tearing {what} down")
            control.down(self.definition, self.names, log=log)
            left = vmmod.stray_qemus() if not self.names else []
            log(f"==> {what} down in {time.monotonic() - t0:.0f} s" + (f"; LEFT: {left}" if left else ""))


def timings(label):
    """The body of a session fixture: phase name -> seconds, printed at the end of the session as
    "==> LABEL timings: ..." (reported, not asserted)."""
    measured = {}
    yield measured
    if measured:
        log(f"==> {label} timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in measured.items()))


def set_capture(request):
    """Let progress lines through pytest's output capture (call from the fixture)."""
    global _capture
    _capture = request.config.pluginmanager.getplugin("capturemanager")


def running(definition):
    """The lab's VMs as they run now (DBZFS_E2E_REUSE_LAB=1); fails unless every one is up."""
    down = [n for n, vm in definition.vms.items() if not vmmod.pid(vm)]
    if down:
        why = f"DBZFS_E2E_REUSE_LAB=1 but {', '.join(down)} not running: ./dbzfs converge first"
        pytest.fail(why, pytrace=False)
    return Lab(definition)


def _on_signal(signum, frame):
    # Turn SIGTERM/SIGHUP into an exception so that fresh()'s finally (and pytest's own teardown)
    # runs; the VMs are powered off there.
    raise KeyboardInterrupt(f"signal {signum}")


class _EarlyBoot:
    """The whole lab wiped and booting (`python -m lab up`, a process of its own: unit tests patch
    the lab's modules in this one) while the unit tests run (boot_early); fresh() waits for it
    instead of booting. The unit tests take one core for about two minutes, the boot both."""

    def __init__(self, definition):
        self.definition = definition
        self.started = time.monotonic()
        self.log_path = STATE / "early-boot.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "lab", "up"],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.teardown = _Teardown(definition)

    def wait(self):
        """Blocks until the boot ends; its output in this session's log; raises when it failed."""
        rc = self.proc.wait()
        seconds = time.monotonic() - self.started
        output = self.log_path.read_text(errors="replace")
        for line in output.splitlines():
            log(line)
        if rc != 0:
            raise AssertionError(f"the lab's boot (python -m lab up) failed with rc {rc}; its output above")
        return seconds

    def power_off(self):
        # A session that ends before the fixture (a unit test failed under -x, Ctrl-C): stop the
        # boot first, or a VM it starts after the power-off would be left running.
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.teardown()


_early: _EarlyBoot | None = None


def boot_early(definition):
    """Start booting the lab now (another process); the `lab` fixture's fresh() takes it over.
    Nothing happens when lab VMs are running already: fresh() then fails with its message."""
    global _early
    if _early or any(vmmod.pid(vm) for vm in definition.all_vms.values()):
        return
    control.wipe(definition, list(definition.vms), log=log)
    log("==> e2e: the lab boots while the unit tests run (python -m lab up)")
    _early = _EarlyBoot(definition)
    atexit.register(_early.power_off)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


@contextmanager
def fresh(definition, names=None, inventory=None, what="e2e"):
    """names=None: the lab's VMs, and everything is powered off at the end; with names, those."""
    lab = Lab(definition, names, inventory)
    early = _early if names is None else None
    if early is None:
        running = [n for n, vm in definition.all_vms.items() if vmmod.pid(vm)]
        if running:
            pytest.fail(
                f"lab VMs already running ({', '.join(running)}): the {what} tests boot fresh VMs of "
                "their own and power them off at the end. Stop yours first: ./dbzfs lab down",
                pytrace=False,
            )
        control.wipe(definition, lab.names, log=log)
    teardown = early.teardown if early else _Teardown(definition, names)
    atexit.register(teardown)
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, _on_signal)
    try:
        t0 = time.monotonic()
        if early:
            seconds = early.wait()
            log(
                f"==> {what}: {', '.join(lab.names)} ready, booted in {seconds:.0f} s while the "
                f"unit tests ran ({time.monotonic() - t0:.0f} s waited for here)"
            )
        else:
            control.up(definition, lab.names, log=log)
            log(f"==> {what}: {', '.join(lab.names)} ready in {time.monotonic() - t0:.0f} s")
        yield lab
    finally:
        try:
            teardown()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


# --- isolation: what a guest can reach ------------------------------------------------------------
# tests/e2e/test_lab.py (the qemu lab) and tests/vagrant/test_boot.py (libvirt) prove that the guests
# reach nothing but what the lab means them to without aiming a packet beyond this machine: from the
# configuration (qemu's command lines, libvirt's network definitions, the guests' routing tables
# and resolvers) and with listeners on this machine's own addresses that a guest must fail to reach.
# The pure parts below (parsers and verdicts) take what the commands print, so they run offline.

# RFC 2544's benchmarking range (198.18.0.0/15), never routed on the internet: an address the test
# gives this machine (on its loopback interface, which every machine has) when it has none of its own
# to offer (address_of_this_machine).
PROBE_ADDRESS = "198.18.45.1"


def process_argv(pid):
    """A process's command line as a list (/proc/PID/cmdline); [] when there is no such process."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.rstrip(b"\0").split(b"\0")] if raw else []


def pids_naming(text):
    """The pids of the processes whose command line contains `text` (this process left out)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and text in " ".join(process_argv(entry)):
            found.append(int(entry))
    return found


def qemu_option(value):
    """One qemu option value as qemu parses it ("user,id=n0,restrict=on,hostfwd=..."): its type (the
    leading bare element, or type=...; None without one) and its other key=value pairs in order, a
    bare flag as (flag, ""). ",," is a literal comma."""
    parts, current, i = [], [], 0
    while i < len(value):
        if value[i] == "," and value[i + 1 : i + 2] == ",":
            current.append(",")
            i += 2
            continue
        if value[i] == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(value[i])
        i += 1
    parts.append("".join(current))
    kind = None
    if parts and "=" not in parts[0]:
        kind, parts = parts[0], parts[1:]
    pairs = [tuple(p.split("=", 1)) if "=" in p else (p, "") for p in parts]
    if kind is None:
        kind = next((v for k, v in pairs if k == "type"), None)
        pairs = [(k, v) for k, v in pairs if k != "type"]
    return kind, pairs


def qemu_network(argv):
    """What a qemu command line gives its guest for networks: {"netdevs": {id: (type, [(key, value),
    ...] without the id)}, "nics": [the netdev id of every -device that names one], "other": [the
    values of any -net or -nic option, which make networks of their own]}."""
    netdevs, nics, other = {}, [], []
    for flag, value in zip(argv, argv[1:], strict=False):
        flag = "-" + flag.lstrip("-") if flag.startswith("--") else flag
        if flag == "-netdev":
            kind, pairs = qemu_option(value)
            ident = next((v for k, v in pairs if k == "id"), None)
            netdevs[ident] = (kind, [(k, v) for k, v in pairs if k != "id"])
        elif flag == "-device":
            nics += [v for k, v in qemu_option(value)[1] if k == "netdev"]
        elif flag in ("-net", "-nic"):
            other.append(value)
    return {"netdevs": netdevs, "nics": nics, "other": other}


def _route_text(route):
    gateway = route.get("gateway") or (route.get("via") or {}).get("host")
    parts = [route.get("type", ""), route.get("dst", "?")]
    parts += [f"via {gateway}"] if gateway else []
    parts += [f"dev {route['dev']}"] if route.get("dev") else []
    parts += [f"table {route['table']}"] if route.get("table") else []
    parts += ["(multipath)"] if route.get("nexthops") else []
    return " ".join(p for p in parts if p)


def ways_out(routes, on_link, gateways=()):
    """The routes (parsed `ip -j route show table all` of both families) by which a guest could send
    a packet anywhere but where the lab means it to go, as text for a message: a route through a
    gateway that is not one of `gateways` ((device, gateway) pairs), a multipath route, a default
    route without a gateway, or an on-link route to a network outside `on_link` ((device, network)
    pairs; device None: on any device). Local, broadcast, multicast, unreachable and the other
    non-unicast routes deliver nothing beyond the guest."""
    allowed = [(dev, ipaddress.ip_network(net)) for dev, net in on_link]
    found = []
    for route in routes:
        if route.get("type", "unicast") != "unicast":
            continue
        dev, dst = route.get("dev"), route.get("dst", "")
        gateway = route.get("gateway") or (route.get("via") or {}).get("host")
        if route.get("nexthops"):
            found.append(_route_text(route))
        elif gateway:
            if (dev, gateway) not in gateways:
                found.append(_route_text(route))
        elif dst == "default":
            found.append(_route_text(route))
        else:
            net = ipaddress.ip_network(dst, strict=False)
            if not any(
                d in (None, dev) and n.version == net.version and net.subnet_of(n) for d, n in allowed
            ):
                found.append(_route_text(route))
    return found


def resolvers_out(route_gets, port53, devices=(), servers=()):
    """The name servers a guest could get an answer from, as text for a message. `route_gets`:
    server -> what `ip -j route get SERVER` printed in the guest, parsed, or {"error": ...} when the
    kernel has no route there (nothing is sent); `port53`: what listens on port 53 in the guest
    (`ss -Hlntu sport = :53`). A server is fine when the guest has no route to it, when it is the
    guest itself with nothing listening on port 53, when the route leaves through one of `devices`
    (a network that answers nothing on port 53, e.g. qemu's restrict=on user netdev) or when it is
    one of `servers` (a resolver known to answer only local names)."""
    found = []
    for server, got in route_gets.items():
        if isinstance(got, dict) and "error" in got:
            continue
        route = got[0] if got else {}
        local = route.get("type") == "local" or ipaddress.ip_address(server.split("%")[0]).is_loopback
        if local:
            if port53.strip():
                found.append(f"{server}: the guest itself, and port 53 is open there: {port53.strip()}")
        elif route.get("dev") not in devices and server not in servers:
            found.append(f"{server}: reachable ({_route_text(route)})")
    return found


# Run in a guest (python3 is in the lab's images): its routes, its resolver and the route to each
# name server it would ask, as one JSON document. Only reads the kernel's tables: sends nothing.
GUEST_NETWORK_FACTS = r"""python3 - <<'PY'
import json, subprocess

def ip(*args):
    r = subprocess.run(["ip", "-j", *args], capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip(), "rc": r.returncode}
    return json.loads(r.stdout or "[]")

try:
    text = open("/etc/resolv.conf").read()
except OSError:
    text = ""
listed = [f[1] for f in (line.split() for line in text.splitlines()) if f[:1] == ["nameserver"]]
servers = listed or ["127.0.0.1"]  # glibc's resolver asks 127.0.0.1 when none is listed
routes = []
for family in ("-4", "-6"):
    got = ip(family, "route", "show", "table", "all")
    if isinstance(got, dict):
        raise SystemExit(f"ip {family} route show table all: {got}")
    routes += got
port53 = subprocess.run(["ss", "-Hlntu", "sport", "=", ":53"], capture_output=True, text=True, check=True)
print(json.dumps({
    "routes": routes,
    "resolv_conf": text,
    "nameservers": {s: ip("route", "get", s) for s in servers},
    "port53": port53.stdout,
}))
PY"""


# A TCP connect from a guest (bash's /dev/tcp: no tool to install), one line per probe:
# "PROBE NAME open" or "PROBE NAME closed WHY".
TCP_PROBE = r"""probe() {
  if why=$(timeout 10 bash -c "exec 3<>/dev/tcp/$2/$3" 2>&1); then echo "PROBE $1 open"
  else echo "PROBE $1 closed $(printf '%s' "${why:-timed out}" | tr '\n' ' ')"; fi
}"""


def tcp_probes(**targets):
    """Shell text for a guest: TCP_PROBE and one probe per target (name=(host, port))."""
    lines = [TCP_PROBE] + [f"probe {name} {host} {int(port)}" for name, (host, port) in targets.items()]
    return "\n".join(lines) + "\n"


def probe_results(stdout):
    """name -> "open" / "closed ..." from the output of tcp_probes."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith("PROBE "):
            _, name, verdict = (line.split(" ", 2) + [""])[:3]
            found[name] = verdict.strip()
    return found


# An HTTP request through a proxy from a guest, one line per URL:
# "PROXY URL served STATUS", "PROXY URL refused CODE" or "PROXY URL failed WHY".
PROXY_PROBE = r"""python3 - {proxy} {urls} <<'PY'
import sys, urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({{"http": sys.argv[1]}}))
for url in sys.argv[2:]:
    try:
        with opener.open(url, timeout=30) as r:
            print("PROXY", url, "served", r.status)
    except urllib.error.HTTPError as e:
        print("PROXY", url, "refused", e.code)
    except Exception as e:
        print("PROXY", url, "failed", repr(e).replace("\n", " "))
PY"""


def proxy_probe(proxy, urls):
    return PROXY_PROBE.format(proxy=proxy, urls=" ".join(urls))


def proxy_results(stdout):
    """url -> "served 200" / "refused 403" / "failed ..." from the output of proxy_probe."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith("PROXY "):
            _, url, verdict = (line.split(" ", 2) + [""])[:3]
            found[url] = verdict.strip()
    return found


def pick_address(default_routes, links, avoid=()):
    """This machine's IPv4 address for a guest to fail to reach, from `ip -j -4 route show default`
    and `ip -j -4 addr show` (parsed): a global, non-loopback one outside the `avoid` networks (the
    guests' own), the default route's source or an address on its interface first; None if none."""
    avoid = [ipaddress.ip_network(n) for n in avoid]
    sources = [r["prefsrc"] for r in default_routes if r.get("prefsrc")]
    devices = [r.get("dev") for r in default_routes]
    found = []
    for link in links:
        for a in link.get("addr_info", []):
            if a.get("family") != "inet" or a.get("scope") != "global":
                continue
            address = ipaddress.ip_address(a["local"])
            if address.is_loopback or address.is_link_local or any(address in n for n in avoid):
                continue
            found.append((str(address) not in sources, link.get("ifname") not in devices, str(address)))
    return min(found)[2] if found else None


def _ip_json(*args):
    r = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=True)
    return json.loads(r.stdout or "[]")


def this_machines_address(avoid=()):
    """pick_address on this machine's tables (reads them: sends nothing)."""
    return pick_address(_ip_json("-4", "route", "show", "default"), _ip_json("-4", "addr", "show"), avoid)


@contextmanager
def address_of_this_machine(avoid=()):
    """An IPv4 address of this machine outside `avoid` (this_machines_address); when it has none,
    PROBE_ADDRESS added to its loopback interface (a global address like any other to its sockets;
    no kernel module needed, unlike a dummy interface) and removed at the end."""
    found = this_machines_address(avoid)
    if found:
        yield found
        return
    assert not any(ipaddress.ip_address(PROBE_ADDRESS) in ipaddress.ip_network(n) for n in avoid)
    argv = ["ip", "addr", "add", f"{PROBE_ADDRESS}/32", "dev", "lo"]
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 0, (
        f"this machine has no address outside {list(avoid)}, and `{' '.join(argv)}` failed: {r.stderr}"
    )
    try:
        yield PROBE_ADDRESS
    finally:
        subprocess.run(["ip", "addr", "del", f"{PROBE_ADDRESS}/32", "dev", "lo"], capture_output=True)


class Listener:
    """A TCP listener on this machine (address; a free port unless `port`) that records every
    connection made to it (the peer's address) and closes it: what a guest must fail to reach.
    `proves_it_records()` connects from this machine first, so that "nobody came" means something."""

    def __init__(self, address, port=0):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        # Our own proves_it_records leaves the port in TIME_WAIT (this side closes first): without
        # SO_REUSEADDR the next listener on the same fixed port (80) could not bind for a minute.
        # Linux still refuses it while another socket listens on that address and port.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((address, port))
        except OSError as e:
            self.sock.close()
            raise AssertionError(f"cannot listen on {address} port {port or '(any)'}: {e}") from e
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.address, self.port = address, self.sock.getsockname()[1]
        self.seen = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def endpoint(self):
        return f"[{self.address}]:{self.port}" if ":" in self.address else f"{self.address}:{self.port}"

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.seen.append(peer[0])
            conn.close()

    def proves_it_records(self, timeout=5):
        with socket.create_connection((self.address, self.port), timeout=timeout):
            pass
        deadline = time.monotonic() + timeout
        while not self.seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.seen, f"the listener on {self.endpoint} did not record this machine's own connection"
        self.seen.clear()

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- the lab's release -----------------------------------------------------------------------------


def lab_release():
    """The Debian release the lab's VMs run (lab/lab.yaml image.suite): model.releases.Release."""
    from lab import definition
    from model import releases

    return releases.get(definition.load().release)


def lab_postgresql():
    """Debian's names for the lab's PostgreSQL cluster (unit, config_dir, dropin, log, ...)."""
    from roles import postgresql

    return postgresql.Cluster(lab_release().postgresql)
