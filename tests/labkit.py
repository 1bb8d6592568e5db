"""A lab for one test session: booted fresh, driven through ssh/pyinfra/testinfra, and ALWAYS
powered off at the end. Used by tests/e2e (the lab's four VMs) and tests/install (bare VMs).

`fresh(definition, names, inventory)` is a context manager yielding a `Lab`: it refuses to start
while any lab VM runs (its VMs would compete for the CPU; stop them with ./dbzfs lab down), wipes
the named VMs' root disks and drives, boots them, and powers them down on success, failure,
Ctrl-C, SIGTERM/SIGHUP and, as a last resort, at interpreter exit (atexit). If a VM cannot come
up it raises: tests error out, never skip.
"""

import atexit
import os
import re
import signal
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
