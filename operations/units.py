"""systemd units running and/or enabled, and running the config they read when they start, decided
from the units' state alone (facts.units)."""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from facts.units import UnitsState, UnitState

# What `systemctl enable` cannot change: the unit is pulled in by others or generated.
NOT_ENABLEABLE = {"static", "indirect", "generated", "transient", "alias"}


@operation()
def service(unit: str, running: bool = False, enabled: bool = False) -> Generator[StringCommand, None, None]:
    """
    Start a unit that is not active (``running``) and enable one that is not enabled
    (``enabled``); never stops or disables anything.

    + unit: e.g. ``mariadb.service``, ``zfs-scrub-monthly@dbpool.timer``
    + running, enabled: what must hold

    ``systemctl enable`` reloads the manager: systemd 257 (Debian 13) reports every unit
    NeedDaemonReload=yes after an enable that skipped it (``--no-reload``), and the next
    converge's `current` then reloaded (CI on Debian 13 at de59272 and 79736e1: the backup host's
    second converge changed one operation).
    """
    state = host.get_fact(UnitState, unit=unit)
    changed = False
    if enabled and state["enabled"] not in ("enabled", *NOT_ENABLEABLE):
        yield StringCommand("systemctl", "enable", QuoteString(unit))
        changed = True
    if running and state["active"] != "active":
        yield StringCommand("systemctl", "start", QuoteString(unit))
        changed = True
    if not changed:
        host.noop(f"{unit} is {state['active']}, {state['enabled']}")


@operation()
def current(units: dict[str, list[str]], loaded: list[str] = ()) -> Generator[StringCommand, None, None]:
    """
    Units whose files systemd has loaded, running the config they read when they start, running
    and enabled: one read of every unit's state, then an enable of those not enabled (which
    reloads the manager, see `service`) or else at most one ``daemon-reload``, a restart of each
    running unit started before one of its files was last written, and a start of the others.
    Never stops or disables anything.

    + units: unit -> the files it reads only when it starts (its drop-ins, its config)
    + loaded: units whose files must be loaded, neither started nor enabled here (e.g. the
      service a timer starts)

    Decided from the live host, not from this run's results: a file rewritten by an earlier run
    that stopped before the restart still restarts the unit once, a unit a package just started
    with its files already in place is not restarted, and ``--dry`` proposes nothing on a
    converged host.
    """
    paths = sorted({p for watched in units.values() for p in watched})
    state = host.get_fact(UnitsState, units=[*units, *loaded], paths=paths)
    live = state["units"]
    reload = any(live[u]["need_daemon_reload"] for u in [*units, *loaded])
    restart = [
        u
        for u, watched in units.items()
        if live[u]["active"] == "active"
        and live[u]["started"] is not None
        and any(state["mtimes"].get(p, -1) >= live[u]["started"] for p in watched)
    ]
    enable = [u for u in units if live[u]["enabled"] not in ("enabled", *NOT_ENABLEABLE)]
    start = [u for u in units if live[u]["active"] != "active"]
    if enable:  # reloads the manager too: the reload below would be a second one
        yield StringCommand("systemctl", "enable", *[QuoteString(u) for u in enable])
    elif reload:
        yield StringCommand("systemctl", "daemon-reload")
    for u in restart:
        yield StringCommand("systemctl", "restart", QuoteString(u))
    if start:
        yield StringCommand("systemctl", "start", *[QuoteString(u) for u in start])
    if not (reload or restart or enable or start):
        host.noop(", ".join(f"{u} is {live[u]['active']}, {live[u]['enabled']}, current" for u in units))
