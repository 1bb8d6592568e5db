"""A converge killed during a package install: the DpkgInterrupted fact and the operation that
finishes the leftovers before the next install (operations/packages.py)."""

import subprocess

from facts.dpkg import DpkgInterrupted
from operations import packages

from tests.unit.fact_stubs import run_operation

HALF_CONFIGURED = [
    "The following packages are only half configured, probably due to problems",
    "configuring them the first time.  The configuration should be retried using",
    "dpkg --configure <package> or the configure menu option in dselect:",
    " mariadb-server       MariaDB database server (metapackage depending on the latest version)",
]


def test_fact_splits_the_audit_from_the_running_package_managers():
    out = DpkgInterrupted().process([*HALF_CONFIGURED, "dbzfs-audit-end", "812 apt-get", "1043 dpkg"])
    assert out == {"audit": HALF_CONFIGURED, "running": ["812 apt-get", "1043 dpkg"]}


def test_fact_of_a_whole_host_is_empty():
    assert DpkgInterrupted().process(["dbzfs-audit-end"]) == {"audit": [], "running": []}


def test_fact_command_lists_the_package_managers_by_exact_name():
    command = DpkgInterrupted().command()
    assert command.startswith("dpkg --audit;")
    # pgrep matches at most 15 characters of a process name: the pattern itself must fit
    assert "pgrep -a -x 'apt-get|dpkg'" in command and len("apt-get|dpkg") <= 15


def test_noop_when_nothing_was_interrupted():
    commands, host = run_operation(
        packages.interrupted_installs_finished, {DpkgInterrupted: {"audit": [], "running": []}}
    )
    assert commands == [] and host.noops == ["no interrupted package install"]


def test_half_installed_packages_are_configured():
    commands, _ = run_operation(
        packages.interrupted_installs_finished, {DpkgInterrupted: {"audit": HALF_CONFIGURED, "running": []}}
    )
    assert commands == [packages.finish_command()]
    assert commands[0].endswith("dpkg --force-confdef --force-confold --configure -a")


def test_a_package_manager_still_running_is_waited_for():
    commands, _ = run_operation(
        packages.interrupted_installs_finished, {DpkgInterrupted: {"audit": [], "running": ["812 apt-get"]}}
    )
    assert commands == [packages.finish_command()]
    assert "while pgrep -x 'apt-get|dpkg'" in commands[0]


def test_finish_command_is_valid_shell_and_gives_up_after_the_wait():
    assert subprocess.run(["sh", "-n", "-c", packages.finish_command()]).returncode == 0
    assert "gt 300 ]" in packages.finish_command(600)
