"""What the sizing module needs to know about a live host."""

from __future__ import annotations

from typing_extensions import override

from pyinfra.api import FactBase


class HostHardware(FactBase):
    """
    Returns the memory the kernel manages and the logical CPUs online.

    .. code:: python

        {"ram_bytes": 4109611008, "cpus": 2}
    """

    @override
    def command(self) -> str:
        # kB from /proc/meminfo, multiplied here: mawk prints large products as 4.1e+09.
        return "awk '/^MemTotal:/ {print $2}' /proc/meminfo && nproc"

    @override
    def process(self, output):
        lines = [line.strip() for line in output if line.strip()]
        return {"ram_bytes": int(lines[0]) * 1024, "cpus": int(lines[1])}
