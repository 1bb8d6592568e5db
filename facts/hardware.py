"""What the sizing module needs to know about a live host."""

from __future__ import annotations

from pyinfra.api import FactBase
from typing_extensions import override

MEMORY = "/sys/devices/system/memory"
ROUND = 128 * 1024 * 1024  # fallback granularity, the x86 memory block size


class HostHardware(FactBase):
    """
    Returns the host's RAM and the logical CPUs online.

    RAM is the kernel's online memory blocks (installed RAM, e.g. exactly 4 GiB on a 4 GiB VM), not
    MemTotal: MemTotal moves by a few pages as drivers and modules reserve memory (loading zfs on a
    fresh host does), and every setting sized from it would change with it, so a second converge
    would rewrite zfs.conf and the server configs. Without memory blocks in sysfs: MemTotal rounded
    down to 128 MiB.

    .. code:: python

        {"ram_bytes": 4294967296, "cpus": 2}
    """

    @override
    def command(self) -> str:
        # kB and counts only; the arithmetic is done here (mawk prints large products as 4.1e+09).
        return (
            f"if [ -r {MEMORY}/block_size_bytes ]; then echo blocks $(cat {MEMORY}/block_size_bytes) "
            f"$(cat {MEMORY}/memory*/state | grep -cx online); fi; "
            "awk '/^MemTotal:/ {print \"memtotal\", $2}' /proc/meminfo; echo cpus $(nproc)"
        )

    @override
    def process(self, output: list[str]) -> dict[str, int]:
        values = {}
        for line in output:
            key, *rest = line.split()
            values[key] = rest
        memtotal = int(values["memtotal"][0]) * 1024
        ram = memtotal // ROUND * ROUND
        if "blocks" in values and len(values["blocks"]) == 2:
            size, online = int(values["blocks"][0], 16), int(values["blocks"][1])
            if size * online >= memtotal:
                ram = size * online
        return {"ram_bytes": ram, "cpus": int(values["cpus"][0])}
