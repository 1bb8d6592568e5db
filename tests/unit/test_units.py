"""A systemd unit running and enabled, from that unit's state alone (one `systemctl show`)."""

import pytest

from roles.facts.units import UnitState
from roles.operations.units import service

from tests.unit.fact_stubs import run_operation

TIMER = "zfs-scrub-monthly@dbpool.timer"


def test_fact_reads_one_unit():
    fact = UnitState()
    assert str(fact.command(unit=TIMER)) == f"systemctl show -p ActiveState -p UnitFileState {TIMER}"
    assert fact.process(["ActiveState=active", "UnitFileState=enabled"]) == {
        "active": "active",
        "enabled": "enabled",
    }


def run(active, unit_file_state, **wanted):
    facts = {UnitState: {"active": active, "enabled": unit_file_state}}
    return run_operation(service, facts, unit=TIMER, **wanted)


def test_new_timer_enabled_without_a_manager_reload_and_started():
    commands, _ = run("inactive", "disabled", running=True, enabled=True)
    assert commands == [f"systemctl enable --no-reload {TIMER}", f"systemctl start {TIMER}"]


@pytest.mark.parametrize("state", ["enabled", "static", "indirect", "generated"])
def test_running_enabled_or_static_unit_is_no_change(state):
    commands, host = run("active", state, running=True, enabled=True)
    assert commands == [] and host.noops == [f"{TIMER} is active, {state}"]


def test_never_stops_or_disables():
    commands, host = run("active", "enabled")
    assert commands == [] and host.noops


def test_failed_unit_is_started_again():
    commands, _ = run("failed", "enabled", running=True)
    assert commands == [f"systemctl start {TIMER}"]
