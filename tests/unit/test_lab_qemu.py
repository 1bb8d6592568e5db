"""The lab's qemu: every NVMe drive without shadow doorbells, and a qemu that cannot turn them off
refused before anything boots (docs/lab.md)."""

from pathlib import Path

import pytest

from lab import vm as vmmod
from lab.definition import load


def test_every_nvme_drive_has_shadow_doorbells_off(tmp_path, monkeypatch):
    key = tmp_path / "id_ed25519"
    key.with_suffix(".pub").write_text("ssh-ed25519 AAAA dbzfs-lab\n")  # the lab's key, made at `lab up`
    monkeypatch.setattr(vmmod, "SSH_KEY", key)
    vm = load().vm("db1")
    argv = vmmod.qemu_argv(vm, Path("/nonexistent"), "tcg", 3142, "10.0.2.100")
    nvme = [a for a in argv if a.startswith("nvme,")]
    assert len(nvme) == len(vm.serials) == 24
    assert all(a.endswith(",dbcs=off") for a in nvme), nvme


def test_a_qemu_without_the_switch_is_refused(tmp_path, monkeypatch):
    old = tmp_path / "qemu-system-x86_64"
    old.write_text("#!/bin/sh\necho 'QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)'\n")
    old.chmod(0o755)
    monkeypatch.setattr(vmmod, "QEMU", str(old))
    with pytest.raises(vmmod.LabError) as e:
        vmmod.require_qemu()
    assert "QEMU emulator version 7.2.22" in str(e.value)
    assert "dbcs=off" in str(e.value) and "run scripts/bootstrap lab" in str(e.value)


def test_a_missing_qemu_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(vmmod, "QEMU", str(tmp_path / "absent"))
    with pytest.raises(vmmod.LabError, match="is not installed"):
        vmmod.require_qemu()


def test_this_machines_qemu_has_the_switch():
    vmmod.require_qemu()  # scripts/bootstrap lab installed it
