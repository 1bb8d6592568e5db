"""Drives pulled from and put into a running lab VM, as a technician does with an NVMe bay.

qemu's human monitor (.lab/<vm>/monitor.sock) removes a drive's NVMe controller (device_del: the
guest is told through ACPI, its driver lets go, the PCI function disappears) and adds a new one at
the same PCI address (device_add ... addr=), so the guest sees the new drive in the old one's slot
(the same /dev/disk/by-path name, which is what ZFS's autoreplace matches). A new drive is a new
blank file with a new serial, hence a new /dev/disk/by-id name.

The VM's qemu command line is not changed: booted again, the VM has its declared drives.
"""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

from .definition import VM
from .vm import LabError, Log, drive_path

PROMPT = b"(qemu) "
ESCAPES = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]|\x1b[()][A-Za-z0-9]")


def monitor(vm: VM, command: str, timeout: float = 10) -> str:
    """One human-monitor command; what it printed (the echoed command and the prompt removed)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(vm.state_dir / "monitor.sock"))
        _read_to_prompt(s)  # the banner
        s.sendall(command.encode() + b"\n")
        raw = _read_to_prompt(s)
    text = ESCAPES.sub(b"", raw).replace(b"\r", b"").decode(errors="replace")
    lines = text.splitlines()
    if lines and lines[0].strip().endswith(command.strip()):
        lines = lines[1:]  # the monitor echoes the command line
    return "\n".join(lines).strip()


def _read_to_prompt(s: socket.socket) -> bytes:
    data = b""
    while not data.endswith(PROMPT):
        chunk = s.recv(65536)
        if not chunk:
            raise LabError("qemu's monitor closed the connection")
        data += chunk
    return data[: -len(PROMPT)]


def pci_slots(info_pci: str) -> dict[str, int]:
    """`info pci` -> {device id: slot on bus 0} for the devices that have an id."""
    slots, slot = {}, None
    for line in info_pci.splitlines():
        found = re.match(r"\s*Bus\s+0, device\s+(\d+), function\s+0:", line)
        if found:
            slot = int(found.group(1))
            continue
        named = re.match(r'\s*id "([^"]+)"', line)
        if named and slot is not None:
            slots[named.group(1)] = slot
    return slots


def controller_id(index: int) -> str:
    return f"nvme{index}"  # the -device id qemu_argv gives drive `index`


def pull_drive(vm: VM, index: int, timeout: float = 60, log: Log = print) -> int:
    """Drive `index` of the running VM pulled from its bay; returns its PCI slot (for the new one)."""
    name = controller_id(index)
    slots = pci_slots(monitor(vm, "info pci"))
    if name not in slots:
        raise LabError(f"{vm.name}: no drive in bay {index} (no PCI device {name!r} in qemu)")
    answer = monitor(vm, f"device_del {name}")
    if answer:
        raise LabError(f"{vm.name}: device_del {name}: {answer}")
    deadline = time.monotonic() + timeout
    while name in pci_slots(monitor(vm, "info pci")):
        if time.monotonic() > deadline:
            raise LabError(f"{vm.name}: the guest did not let go of {name} within {timeout} s")
        time.sleep(1)
    log(f"==> {vm.name}: drive {index} ({vm.serials[index]}) pulled from PCI slot {slots[name]}")
    return slots[name]


def new_drive_path(vm: VM, index: int, serial: str) -> Path:
    return drive_path(vm, index).with_name(f"nvme{index:02d}-{serial}.raw")


def insert_drive(vm: VM, index: int, slot: int, serial: str, log: Log = print) -> Path:
    """A new blank drive (its own file, serial `serial`) into bay `index` of the running VM, at PCI
    slot `slot` (where pull_drive found the old one)."""
    path = new_drive_path(vm, index, serial)
    if path.exists():
        raise LabError(f"{vm.name}: {path} exists: a new drive must be blank")
    with open(path, "wb") as f:
        f.truncate(vm.drive_size)
    backend = f"nv{index}-{serial}"
    for command in (
        f"drive_add 0 if=none,id={backend},file={path},format=raw,cache=unsafe,discard=unmap",
        f"device_add nvme,id={controller_id(index)},serial={serial},drive={backend},dbcs=off,addr={slot:#x}",
    ):
        answer = monitor(vm, command)
        if answer and answer != "OK":
            raise LabError(f"{vm.name}: {command}: {answer}")
    log(f"==> {vm.name}: new blank drive {serial} in bay {index} (PCI slot {slot})")
    return path
