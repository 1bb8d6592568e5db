"""Facts for the host firewall (roles/firewall.py, operations/firewall.py)."""

from __future__ import annotations

from pyinfra.api import FactBase
from typing_extensions import override


class SessionAddress(FactBase):
    """The address the host sees the running SSH session come from (SSH_CONNECTION's first
    field); None outside SSH."""

    @override
    def command(self) -> str:
        return 'echo "session=${SSH_CONNECTION%% *}"'

    @override
    def process(self, output: list[str]) -> str | None:
        for line in output:
            if line.startswith("session="):
                return line.split("=", 1)[1].strip() or None
        return None


class FirewallState(FactBase):
    """The rules file's SHA-1 (None when absent) and whether our table is loaded in the kernel."""

    @override
    def command(self, path: str, table: str) -> str:
        return (
            f"if [ -f {path} ]; then echo \"sha1=$(sha1sum < {path} | cut -d' ' -f1)\"; fi; "
            f"if command -v nft >/dev/null && nft list table inet {table} >/dev/null 2>&1; "
            "then echo loaded=1; fi; "
            "echo end=1"
        )

    @override
    def process(self, output: list[str]) -> dict:
        fields = dict(line.split("=", 1) for line in output if "=" in line)
        return {"sha1": fields.get("sha1"), "loaded": fields.get("loaded") == "1"}
