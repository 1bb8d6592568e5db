"""One systemd unit's state, read with one command (pyinfra's SystemdStatus and SystemdEnabled facts
list every unit on the host, twice per service operation)."""

from __future__ import annotations

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
