"""lab/hotplug.py against a stand-in for qemu's human monitor (a unix socket that answers as
qemu 10 does: banner, prompt, echo with terminal escapes)."""

import socket
import threading

import pytest

from lab import hotplug
from lab.definition import load

INFO_PCI = """  Bus  0, device   0, function 0:
    Host bridge: PCI device 8086:1237
      PCI subsystem 1af4:1100
      id ""
  Bus  0, device   4, function 0:
    Class 0264: PCI device 1b36:0010
      PCI subsystem 1af4:1100
      IRQ 11, pin A
      BAR0: 64 bit memory at 0xfebf0000 [0xfebf3fff].
      id "nvme0"
  Bus  0, device   5, function 0:
    Class 0264: PCI device 1b36:0010
      id "nvme1"
"""


def test_pci_slots_maps_device_ids_to_their_slot():
    assert hotplug.pci_slots(INFO_PCI) == {"nvme0": 4, "nvme1": 5}


class FakeMonitor:
    """Answers each command with the canned reply, recording what it was sent."""

    def __init__(self, path, replies):
        self.replies, self.sent = replies, []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            conn, _ = self.server.accept()
            with conn:
                conn.sendall(b"QEMU 10.0.0 monitor - type 'help' for more information\r\n(qemu) ")
                command = conn.makefile("rb").readline().decode().strip()
                self.sent.append(command)
                echo = b"\x1b[K" + command.encode() + b"\r\n"
                conn.sendall(echo + self.replies(command).encode().replace(b"\n", b"\r\n") + b"(qemu) ")


def test_monitor_returns_the_reply_without_echo_or_prompt(tmp_path, monkeypatch):
    lab_vm = load().vms["db2"]
    monkeypatch.setattr(type(lab_vm), "state_dir", property(lambda self: tmp_path))
    fake = FakeMonitor(tmp_path / "monitor.sock", lambda c: INFO_PCI if c == "info pci" else "")
    assert hotplug.monitor(lab_vm, "info pci") == INFO_PCI.strip()
    assert hotplug.monitor(lab_vm, "device_del nvme1") == ""
    assert fake.sent == ["info pci", "device_del nvme1"]


def test_pull_then_insert_uses_the_same_slot_and_a_new_blank_file(tmp_path, monkeypatch):
    lab_vm = load().vms["db2"]
    monkeypatch.setattr(type(lab_vm), "state_dir", property(lambda self: tmp_path))
    (tmp_path / "drives").mkdir()
    pulled = []

    def replies(command):
        if command == "info pci":
            return INFO_PCI.replace('id "nvme1"', 'id "gone"') if pulled else INFO_PCI
        if command.startswith("device_del"):
            pulled.append(command)
        return ""

    fake = FakeMonitor(tmp_path / "monitor.sock", replies)
    slot = hotplug.pull_drive(lab_vm, 1, log=lambda m: None)
    assert slot == 5
    path = hotplug.insert_drive(lab_vm, 1, slot, "db2-nvme24", log=lambda m: None)
    assert path.stat().st_size == lab_vm.drive_size and path.read_bytes()[:4096] == bytes(4096)
    assert fake.sent[-2].startswith(f"drive_add 0 if=none,id=nv1-db2-nvme24,file={path},")
    added = "device_add nvme,id=nvme1,serial=db2-nvme24,drive=nv1-db2-nvme24,dbcs=off,addr=0x5"
    assert fake.sent[-1] == added
    with pytest.raises(hotplug.LabError, match="must be blank"):
        hotplug.insert_drive(lab_vm, 1, slot, "db2-nvme24", log=lambda m: None)


def test_pulling_an_empty_bay_names_it(tmp_path, monkeypatch):
    lab_vm = load().vms["db2"]
    monkeypatch.setattr(type(lab_vm), "state_dir", property(lambda self: tmp_path))
    FakeMonitor(tmp_path / "monitor.sock", lambda c: INFO_PCI)
    with pytest.raises(hotplug.LabError, match="no drive in bay 7"):
        hotplug.pull_drive(lab_vm, 7, log=lambda m: None)
