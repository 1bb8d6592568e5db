"""Facts about what a host can reach over the network."""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override


class PortAnswers(FactBase):
    """Whether a TCP connection from this host to `address`:`port` is accepted within `timeout`
    seconds (a server listening there); False when refused or unreachable."""

    @override
    def command(self, address: str, port: int, timeout: int = 3) -> StringCommand:
        probe = f"exec 3<>/dev/tcp/{address}/{int(port)}"
        return StringCommand(
            f"timeout {int(timeout)} bash -c", QuoteString(probe), "2>/dev/null && echo open || echo closed"
        )

    @override
    def process(self, output: list[str]) -> bool:
        return any(line.strip() == "open" for line in output)
