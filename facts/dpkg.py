"""What an interrupted package install leaves behind: dpkg's own audit and the package managers
still running (a converge killed mid-install leaves apt-get or dpkg working on the host, or dead
half way, and Debian's next `apt-get install` refuses with "dpkg was interrupted")."""

from __future__ import annotations

from pyinfra.api import FactBase

_AUDIT_MARK = "dbzfs-audit-end"


class DpkgInterrupted(FactBase):
    """
    ``dpkg --audit``'s report (empty when every package is whole) and the package-manager
    processes running now.

    .. code:: python

        {"audit": ["The following packages are only half configured, ...", " mariadb-server ..."],
         "running": ["812 apt-get", "1043 dpkg"]}
    """

    def command(self) -> str:
        return f"dpkg --audit; echo {_AUDIT_MARK}; pgrep -a -x 'apt-get|dpkg' || true"

    def requires_command(self) -> str:
        return "dpkg"

    def process(self, output: list[str]) -> dict[str, list[str]]:
        mark = output.index(_AUDIT_MARK) if _AUDIT_MARK in output else len(output)
        return {
            "audit": [line for line in output[:mark] if line.strip()],
            "running": [line.strip() for line in output[mark + 1 :] if line.strip()],
        }
