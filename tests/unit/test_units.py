"""A systemd unit running and enabled, from that unit's state alone (one `systemctl show`)."""

import pytest

from facts.units import UnitsState, UnitState
from operations.units import current as current_op, service

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


def test_new_timer_enabled_with_the_managers_reload_and_started():
    """systemd 257 marks every unit NeedDaemonReload after an enable --no-reload."""
    commands, _ = run("inactive", "disabled", running=True, enabled=True)
    assert commands == [f"systemctl enable {TIMER}", f"systemctl start {TIMER}"]


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


# --- units running their current config --------------------------------------------------------

CNF = "/etc/mysql/mariadb.conf.d/90-dbzfs.cnf"
SVC = "mariadb.service"


def unit(active="active", enabled="enabled", started=1000, reload=False):
    return {"active": active, "enabled": enabled, "started": started, "need_daemon_reload": reload}


def current(units, mtimes, watched=None, loaded=()):
    facts = {UnitsState: {"units": units, "mtimes": mtimes}}
    return run_operation(current_op, facts, units=watched or {SVC: [CNF]}, loaded=list(loaded))


def test_config_older_than_the_running_unit_is_no_change():
    commands, host = current({SVC: unit()}, {CNF: 900})
    assert commands == [] and host.noops == [f"{SVC} is active, enabled, current"]
    assert host.fact_calls == [(UnitsState, (), {"units": [SVC], "paths": [CNF]})]


def test_config_written_after_the_start_restarts_once():
    commands, _ = current({SVC: unit()}, {CNF: 1000})
    assert commands == [f"systemctl restart {SVC}"]


def test_stopped_unit_is_started_not_restarted():
    commands, _ = current({SVC: unit(active="inactive", started=None)}, {CNF: 1000})
    assert commands == [f"systemctl start {SVC}"]


def test_changed_unit_files_reloaded_once_by_the_enable_then_restarted_started():
    units = {
        "a.service": unit(reload=True),
        "b.service": unit(active="inactive", enabled="disabled", started=None),
        "c.timer": unit(),
    }
    watched = {"a.service": ["/a.conf"], "b.service": ["/b.conf"], "c.timer": ["/c.timer"]}
    commands, _ = current(units, {"/a.conf": 1500, "/b.conf": 1500, "/c.timer": 10}, watched)
    assert commands == [
        "systemctl enable b.service",  # reloads the manager: no daemon-reload of its own
        "systemctl restart a.service",
        "systemctl start b.service",
    ]


def test_a_timers_service_is_reloaded_never_started():
    units = {"c.timer": unit(), "c.service": unit(active="inactive", enabled="static", reload=True)}
    commands, _ = current(units, {"/c.timer": 10}, {"c.timer": ["/c.timer"]}, loaded=["c.service"])
    assert commands == ["systemctl daemon-reload"]


def test_units_state_fact_reads_every_unit_and_file_in_one_command():
    fact = UnitsState()
    command = str(fact.command(units=["a.service", "b.timer"], paths=["/a.conf"]))
    assert command.startswith("for u in a.service b.timer ; do")
    assert "--timestamp=us+utc" in command and "stat -c 'mtime=%.6Y %n' /a.conf" in command
    out = [
        "unit=a.service",
        "ActiveState=active",
        "UnitFileState=enabled",
        "ActiveEnterTimestamp=Sun 2025-11-30 05:20:00.250000 UTC",
        "NeedDaemonReload=no",
        "unit=b.timer",
        "ActiveState=inactive",
        "UnitFileState=disabled",
        "ActiveEnterTimestamp=",
        "NeedDaemonReload=yes",
        "mtime=1764479990.500000 /a.conf",
        "end=1",
    ]
    assert fact.process(out) == {
        "units": {
            "a.service": unit(started=1764480000.25),
            "b.timer": unit(active="inactive", enabled="disabled", started=None, reload=True),
        },
        "mtimes": {"/a.conf": 1764479990.5},
    }


def test_a_unit_restarted_in_the_second_its_file_was_written_is_current():
    """Whole seconds made this restart again on every second run (trixie's backup host)."""
    commands, host = current({SVC: unit(started=1000.75)}, {CNF: 1000.25})
    assert commands == [] and host.noops


def test_changed_unit_files_alone_are_reloaded_once():
    commands, _ = current({SVC: unit(reload=True)}, {CNF: 1500})
    assert commands == ["systemctl daemon-reload", f"systemctl restart {SVC}"]
