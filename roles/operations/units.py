"""A systemd unit running and/or enabled, decided from that unit's state alone (roles.facts.units)."""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from roles.facts.units import UnitState

# What `systemctl enable` cannot change: the unit is pulled in by others or generated.
NOT_ENABLEABLE = {"static", "indirect", "generated", "transient", "alias"}


@operation()
def service(unit: str, running: bool = False, enabled: bool = False) -> Generator[StringCommand, None, None]:
    """
    Start a unit that is not active (``running``) and enable one that is not enabled
    (``enabled``); never stops or disables anything.

    + unit: e.g. ``mariadb.service``, ``zfs-scrub-monthly@dbpool.timer``
    + running, enabled: what must hold

    ``systemctl enable --no-reload``: enabling only adds symlinks, which the running manager does
    not need to re-read to start the unit now (a reload of every unit costs seconds on a busy
    host); the next boot, or the next daemon-reload, sees them.
    """
    state = host.get_fact(UnitState, unit=unit)
    changed = False
    if enabled and state["enabled"] not in ("enabled", *NOT_ENABLEABLE):
        yield StringCommand("systemctl", "enable", "--no-reload", QuoteString(unit))
        changed = True
    if running and state["active"] != "active":
        yield StringCommand("systemctl", "start", QuoteString(unit))
        changed = True
    if not changed:
        host.noop(f"{unit} is {state['active']}, {state['enabled']}")
