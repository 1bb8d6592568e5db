"""The `lab` fixture: the whole local VM lab (lab/lab.yaml) for one test session (tests/labkit.py).

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
    lab.testinfra(*paths, hosts=None, timeout=1800) -> Result   pytest PATHS (default
                           tests/infra) against `hosts` (default all lab hosts) through paramiko
                           and the ssh config
    lab.reset_drives(name) stops the VM, recreates its empty drives, boots it again
Result has .rc, .stdout, .stderr, .ok and .check() (raises AssertionError with the output).
"""

import os
import random
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from lab.definition import load  # noqa: E402

from tests import labkit  # noqa: E402


@pytest.fixture(scope="session")
def lab(request):
    labkit.set_capture(request)
    if os.environ.get("DBZFS_E2E_REUSE_LAB") == "1":
        # Development only: a module against the lab `./dbzfs converge` left running, as it is
        # (not wiped, not powered off). CI and `./dbzfs test` always boot a fresh lab.
        yield labkit.running(load())
        return
    with labkit.fresh(load()) as booted:
        yield booted


# --- the converged lab, shared by every e2e module ------------------------------------------------

# Modules run in this order whatever their names: each later one builds on the state the earlier
# ones leave (test_safety wipes pg2's drives, so it comes last). The bare VM's module comes first
# and powers its VM off before the lab boots.
MODULE_ORDER = [
    "test_lab.py",
    "test_bare_host_plan.py",
    "test_zfs_role.py",
    "test_zfs_install.py",
    "test_mariadb_role.py",
    "test_postgresql_role.py",
    "test_monitoring.py",
    "test_deployed_files.py",
    "test_config_check.py",
    "test_topology.py",
    "test_status.py",
    "test_snapshots.py",
    "test_backup.py",
    "test_crash.py",
    "test_switchover.py",
    "test_failover.py",
    "test_idempotence.py",
    "test_rolling.py",  # long; leaves pg1 and pg2 on zstd: no module after it converges them
    "test_degraded.py",
    "test_safety.py",
]


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        if "e2e" not in item.path.parts:
            return -1  # unit tests first: they fail in seconds
        name = item.path.name
        return MODULE_ORDER.index(name) if name in MODULE_ORDER else len(MODULE_ORDER)

    items.sort(key=rank)  # stable: tests keep their order inside a module


def pytest_collection_finish(session):
    """When unit tests run before lab tests, the lab boots meanwhile (labkit.boot_early)."""
    items = session.items
    if (
        session.config.option.collectonly
        or os.environ.get("DBZFS_E2E_REUSE_LAB") == "1"
        or not any("e2e" not in i.path.parts for i in items)
        or not any("e2e" in i.path.parts and "lab" in getattr(i, "fixturenames", ()) for i in items)
    ):
        return
    labkit.boot_early(load())


@pytest.fixture(scope="session")
def timings():
    yield from labkit.timings("e2e")


# The first converge is killed this many seconds into its operations (uniformly drawn: a random
# operation, long ones likelier), then run again to the end; DBZFS_INTERRUPT_AT=S repeats one.
INTERRUPT_WINDOW = (5.0, 420.0)


def interrupt_at() -> float:
    chosen = labkit.env_number("DBZFS_INTERRUPT_AT", None, kind=float)
    if chosen is not None:
        return chosen
    if os.environ.get("DBZFS_E2E_REUSE_LAB") == "1":
        return 5.0  # a converged lab's converge is a no-op of about 30 s
    return round(random.uniform(*INTERRUPT_WINDOW), 1)


@pytest.fixture(scope="session")
def interrupted(lab, timings):
    """The lab's first converge killed at a random moment (the pyinfra process, SIGKILL), and the
    commands it left on the VMs waited for: what a second run must finish."""
    at = interrupt_at()
    labkit.log(f"==> first converge: pyinfra killed {at} s into its operations (DBZFS_INTERRUPT_AT={at})")
    t0 = time.monotonic()
    killed = lab.pyinfra_killed(after=at)
    timings["killed converge"] = time.monotonic() - t0
    t0 = time.monotonic()
    killed.leftovers = lab.wait_for_leftovers()
    waited = timings["leftovers of the killed converge"] = time.monotonic() - t0
    labkit.log(
        f"==> killed during: {killed.operation}; commands it left running: "
        + "; ".join(f"{n}: {len(p)}" for n, p in killed.leftovers.items())
        + f" (finished {waited:.0f} s later)"
    )
    return killed


@pytest.fixture(scope="session")
def converged(lab, interrupted, timings):
    """The lab after the first converge of deploy.py on every VM (storage and engine roles),
    run again to the end after the interrupted one."""
    assert interrupted.operation, f"pyinfra ended before it was killed:\n{interrupted.output[-3000:]}"
    t0 = time.monotonic()
    # 10 min on this machine; a host that hangs fails the session after 40, with what each VM
    # was doing (labkit's diagnostics), instead of taking the whole CI hour with it.
    result = lab.pyinfra(profile="first", timeout=2400)
    timings["first converge"] = time.monotonic() - t0
    result.check()
    return lab


# --- where the time goes: seconds per test module (setup + call + teardown), printed at the end --

_module_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    module = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    _module_seconds[module] = _module_seconds.get(module, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _module_seconds:
        return
    terminalreporter.write_sep(
        "=", "e2e: seconds per module, fixtures included (the table: tests/e2e/README.md)"
    )
    for name, seconds in _module_seconds.items():
        terminalreporter.write_line(f"{seconds:8.0f} s  {name}")
    terminalreporter.write_line(f"{sum(_module_seconds.values()):8.0f} s  e2e total")
