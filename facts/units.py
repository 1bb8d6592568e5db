"""One systemd unit's state, read with one command (pyinfra's SystemdStatus and SystemdEnabled facts
list every unit on the host, twice per service operation)."""

from __future__ import annotations

from datetime import datetime

from pyinfra.api import FactBase, QuoteString, StringCommand


class UnitState(FactBase):
    """
    ``ActiveState`` and ``UnitFileState`` of one unit, as ``systemctl show`` reports them.

    .. code:: python

        {"active": "active", "enabled": "enabled"}  # or "inactive", "disabled", "static", ...
    """

    def command(self, unit: str) -> StringCommand:
        return StringCommand(
            "systemctl", "show", "-p", "ActiveState", "-p", "UnitFileState", QuoteString(unit)
        )

    def process(self, output: list[str]) -> dict[str, str]:
        fields = dict(line.split("=", 1) for line in output if "=" in line)
        return {"active": fields.get("ActiveState", ""), "enabled": fields.get("UnitFileState", "")}


def _utc_us(value: str) -> float | None:
    """``Mon 2026-12-07 12:00:00.123456 UTC`` (``--timestamp=us+utc``) as epoch seconds; the
    weekday's name, which follows the locale, is not read. ``None`` for an empty value."""
    parts = value.split()
    if len(parts) != 4 or parts[3] != "UTC":
        return None
    return datetime.fromisoformat(f"{parts[1]}T{parts[2]}+00:00").timestamp()


class UnitsState(FactBase):
    """
    Several units' states and the modification times of the files they read when they start, with
    one command (a `systemctl show` per unit, each after a ``unit=`` marker line, then one `stat`).
    Both times to the microsecond: with whole seconds, a unit restarted in the second its file was
    written looks older than the file, and the next run restarts it again.

    .. code:: python

        {"units": {"mariadb.service": {"active": "active", "enabled": "enabled",
                                       "started": 1764480000.123456, "need_daemon_reload": False}},
         "mtimes": {"/etc/mysql/mariadb.conf.d/90-dbzfs.cnf": 1764479990.5}}
        # "started": None for a unit that never became active; a missing file has no mtime
    """

    def command(self, units: list[str], paths: list[str] = ()) -> StringCommand:
        show = (
            "systemctl show --timestamp=us+utc -p ActiveState -p UnitFileState "
            '-p ActiveEnterTimestamp -p NeedDaemonReload "$u"'
        )
        names = [QuoteString(u) for u in units]
        loop = ["for", "u", "in", *names, ";", "do", 'echo "unit=$u";', show, ";", "done;"]
        stat = ["stat", "-c", "'mtime=%.6Y %n'", *[QuoteString(p) for p in paths], "2>/dev/null;"]
        return StringCommand(*loop, *(stat if paths else []), "echo", "end=1")

    def process(self, output: list[str]) -> dict:
        state: dict = {"units": {}, "mtimes": {}}
        current: dict | None = None
        for line in output:
            key, _, value = line.partition("=")
            if key == "unit":
                current = state["units"][value] = {
                    "active": "",
                    "enabled": "",
                    "started": None,
                    "need_daemon_reload": False,
                }
            elif key == "mtime":
                mtime, _, path = value.partition(" ")
                state["mtimes"][path] = float(mtime)
            elif current is not None and key == "ActiveState":
                current["active"] = value
            elif current is not None and key == "UnitFileState":
                current["enabled"] = value
            elif current is not None and key == "ActiveEnterTimestamp":
                current["started"] = _utc_us(value)
            elif current is not None and key == "NeedDaemonReload":
                current["need_daemon_reload"] = value == "yes"
        return state
