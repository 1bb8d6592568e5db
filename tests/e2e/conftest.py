"""The `lab` fixture: the whole local VM lab (lab/lab.yaml) for one test session.

Usage in a test module under tests/e2e:

    import pytest
    pytestmark = pytest.mark.e2e

    def test_pool(lab):
        lab.pyinfra().check()                         # converge deploy.py on every lab VM
        r = lab.run("db1", "zpool list -H -o name")  # Result(name, command, rc, stdout, stderr)
        assert r.rc == 0 and r.stdout.split() == ["dbpool"]
        out = lab.check("pg1", "zfs version")         # stdout; AssertionError (with output) if rc != 0

`lab` (a `Lab`, session-scoped) is a fresh lab of the session's own: it refuses to start while
lab VMs are running (yours, e.g. from `./dbzfs converge`: stop them with `./dbzfs lab down`),
wipes the VMs' root disks and drives (`lab.control.wipe`), boots every VM with `lab.control.up`
(image built if needed) and ALWAYS powers the whole lab down at the end of the session:
on success, on failure, on Ctrl-C (KeyboardInterrupt), on SIGTERM/SIGHUP and, as a last resort,
at interpreter exit (atexit). If the lab cannot come up the fixture raises: tests error out,
never skip.

Attributes and helpers:
    lab.names              ["db1", "db2", "pg1", "pg2"] (definition order)
    lab.vms                {name: lab.definition.VM} (engine, role, private_address, serials,
                           drive_ids, drive_pattern, ssh_port, memory, vcpus, console_log, ...)
    lab.ssh_config         Path of the generated ssh config (.lab/ssh_config)
    lab.inventory          Path of inventories/lab.py
    lab.testinfra_hosts    "paramiko://db1,paramiko://db2,..." for --hosts
    lab.run(name, cmd, timeout=600) -> Result       (cmd: a shell command string, run as root)
    lab.check(name, cmd, timeout=600) -> str        (stdout; asserts rc == 0)
    lab.run_all(cmd, names=None) -> {name: Result}  (in parallel)
    lab.pyinfra(*args, deploy="deploy.py", timeout=3600) -> Result
                           runs `.venv/bin/pyinfra -y inventories/lab.py DEPLOY ARGS` from the repo
                           root; `args` go before the deploy file (e.g. "--limit", "db1");
                           with the lab's throwaway secrets (lab.control.lab_env)
    lab.testinfra(*paths, timeout=1800) -> Result   pytest PATHS (default tests/infra) against all
                           lab hosts through paramiko and the ssh config
    lab.reset_drives(name) stops the VM, recreates its empty drives, boots it again
Result has .rc, .stdout, .stderr, .ok and .check() (raises AssertionError with the output).
"""

import atexit
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from lab import control  # noqa: E402
from lab import vm as vmmod  # noqa: E402
from lab.definition import SSH_CONFIG, load  # noqa: E402


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
        assert self.rc == 0, (f"{self.name}: `{self.command}` failed (rc {self.rc})\n"
                              f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}")
        return self


class Lab:
    def __init__(self, definition):
        self.definition = definition
        self.vms = dict(definition.vms)
        self.names = list(definition.vms)
        self.ssh_config = SSH_CONFIG
        self.inventory = control.INVENTORY
        self.testinfra_hosts = ",".join(f"paramiko://{n}" for n in self.names)

    def run(self, name, command, timeout=600):
        vm = self.definition.vm(name)
        try:
            r = vmmod.run(vm, command, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            return Result(name, command, 124, _text(e.stdout), _text(e.stderr) + f"\n(timed out after {timeout} s)")
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
            r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                               stdin=subprocess.DEVNULL, env=control.lab_env())
        except subprocess.TimeoutExpired as e:
            return Result("local", " ".join(argv), 124, _text(e.stdout), _text(e.stderr))
        return Result("local", " ".join(argv), r.returncode, r.stdout, r.stderr)

    def pyinfra(self, *args, deploy="deploy.py", timeout=3600):
        return self._local([str(control.PYINFRA), "-y", str(self.inventory), *args, deploy], timeout)

    def testinfra(self, *paths, timeout=1800):
        return self._local([str(control.PYTEST), "-p", "no:cacheprovider", *(paths or ["tests/infra"]),
                            f"--hosts={self.testinfra_hosts}", f"--ssh-config={self.ssh_config}"], timeout)

    def reset_drives(self, name):
        vm = self.definition.vm(name)
        vmmod.reset_drives(vm, log=_log)
        control.up(self.definition, [name], log=_log)


def _text(b):
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b


_capture = None  # pytest's capture manager, set by the fixture


def _log(msg):
    # Progress goes to the terminal even under pytest's output capture.
    if _capture is not None:
        with _capture.global_and_fixture_disabled():
            print(msg, file=sys.stderr, flush=True)
    else:
        print(msg, file=sys.stderr, flush=True)


class _Teardown:
    """Power the lab down exactly once: from the fixture's finally, a signal, or atexit."""

    def __init__(self, definition):
        self.definition = definition
        self.done = False
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            if self.done:
                return
            self.done = True
            t0 = time.monotonic()
            _log("==> e2e: tearing the lab down")
            control.down(self.definition, log=_log)
            left = vmmod.stray_qemus()
            _log(f"==> e2e: lab down in {time.monotonic() - t0:.0f} s" + (f"; LEFT: {left}" if left else ""))


@pytest.fixture(scope="session")
def lab(request):
    global _capture
    _capture = request.config.pluginmanager.getplugin("capturemanager")
    definition = load()
    running = [n for n, vm in definition.vms.items() if vmmod.pid(vm)]
    if running:
        pytest.fail(f"lab VMs already running ({', '.join(running)}): the e2e tests boot a fresh lab of "
                    "their own and power it off at the end. Stop yours first: ./dbzfs lab down", pytrace=False)
    control.wipe(definition, log=_log)
    teardown = _Teardown(definition)
    atexit.register(teardown)
    previous = {}

    def on_signal(signum, frame):
        # Turn SIGTERM/SIGHUP into an exception so the finally below (and pytest's own
        # teardown) runs; the lab is powered off there.
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, on_signal)
    try:
        t0 = time.monotonic()
        control.up(definition, log=_log)
        _log(f"==> e2e: lab ready in {time.monotonic() - t0:.0f} s")
        yield Lab(definition)
    finally:
        try:
            teardown()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


# --- the converged lab, shared by every e2e module ------------------------------------------------

# Modules run in this order whatever their names: each later one builds on the state the earlier
# ones leave (test_safety wipes pg2's drives, so it comes last).
MODULE_ORDER = ["test_lab.py", "test_zfs_role.py", "test_mariadb_role.py",
                "test_postgresql_role.py", "test_idempotence.py", "test_safety.py"]


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        if "e2e" not in item.path.parts:
            return -1  # unit tests first: they fail in seconds
        name = item.path.name
        return MODULE_ORDER.index(name) if name in MODULE_ORDER else len(MODULE_ORDER)
    items.sort(key=rank)  # stable: tests keep their order inside a module


@pytest.fixture(scope="session")
def timings():
    """Phase name -> seconds; printed at the end of the session (reported, not asserted)."""
    measured = {}
    yield measured
    if measured:
        _log("==> e2e timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in measured.items()))


@pytest.fixture(scope="session")
def converged(lab, timings):
    """The lab after one full converge of deploy.py on every VM (storage and engine roles)."""
    t0 = time.monotonic()
    result = lab.pyinfra()
    timings["first converge"] = time.monotonic() - t0
    result.check()
    return lab
