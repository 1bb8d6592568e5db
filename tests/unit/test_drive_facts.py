import os
import stat
import subprocess

import pytest

from facts.drives import LABEL_AREAS_BLANK, BlockDevices, DrivesByPattern, DriveState, natural_key

from tests.unit.fact_stubs import fixture_lines

KIB = 1024
MIB = 1024 * KIB

INTEL = "/dev/disk/by-id/nvme-INTEL_SSDPE2KE064T8_PHLN"
BOOT = "/dev/disk/by-id/nvme-SAMSUNG_MZ1L2960HCJR-00A07_S665NE0T100001"


def intel(n, suffix=""):
    return f"{INTEL}{n:04d}00V6P4BGN{suffix}"


def drives_by_pattern(pattern):
    fact = DrivesByPattern()
    fact.command(pattern=pattern)
    return fact.process(fixture_lines("drives/by_id_listing.txt"))


def test_pattern_keeps_whole_drives_in_natural_order():
    assert drives_by_pattern("nvme-INTEL_SSDPE2KE064T8_*") == [
        intel(1),
        intel(2),
        intel(3),
        intel(10),
        intel(11),
    ]


def test_pattern_accepts_a_full_by_id_path():
    assert drives_by_pattern("/dev/disk/by-id/nvme-SAMSUNG_*") == [BOOT]


def test_pattern_drops_eui_aliases_unless_asked_for():
    eui = drives_by_pattern("nvme-eui.*")
    assert len(eui) == 6
    assert all("/nvme-eui." in path for path in eui)


def test_pattern_without_match_is_empty():
    assert drives_by_pattern("nvme-MICRON_*") == []


def test_pattern_command_lists_by_id_with_targets_in_one_process():
    command = str(DrivesByPattern().command(pattern="nvme-X_*"))
    assert command.startswith("find /dev/disk/by-id/ -mindepth 1 -maxdepth 1 -type l -xtype b")
    assert "-printf '%f %l\\n'" in command and "readlink" not in command


def test_relative_udev_links_are_resolved_for_alias_detection():
    fact = DrivesByPattern()
    fact.command(pattern="nvme-QEMU_*")
    lines = [
        "nvme-QEMU_NVMe_Ctrl_db1-nvme01 ../../nvme1n1",
        "nvme-QEMU_NVMe_Ctrl_db1-nvme01_1 ../../nvme1n1",
        "nvme-QEMU_NVMe_Ctrl_db1-nvme00 ../../nvme0n1",
        "nvme-QEMU_NVMe_Ctrl_db1-nvme00-part1 ../../nvme0n1p1",
    ]
    assert fact.process(lines) == [
        "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_db1-nvme00",
        "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_db1-nvme01",
    ]


def test_natural_key():
    assert sorted(["d10", "d9", "d1"], key=natural_key) == ["d1", "d9", "d10"]


def drive_states():
    return DriveState().process(fixture_lines("drives/drive_state_output.txt"))


def test_drive_state_command_quotes_paths_and_probes_partitions():
    command = str(DriveState().command(paths=[intel(1), "/dev/disk/by-id/nvme-it's"]))
    assert f"for p in {intel(1)} '/dev/disk/by-id/nvme-it'\"'\"'s' ; do" in command
    assert "lsblk -J -p -o NAME,TYPE,FSTYPE,PTTYPE,MOUNTPOINTS" in command
    assert 'blkid -p -o export "$x"' in command
    assert 'zdb -l "$x"' in command
    assert command.endswith("done; done; true")


def test_blank_drive():
    state = drive_states()[intel(1)]
    assert state == {
        "path": intel(1),
        "exists": True,
        "device": "/dev/nvme1n1",
        "kernel_name": "nvme1n1",
        "whole_disk": True,
        "nvme_namespace": True,
        "partition_table": None,
        "partitions": [],
        "signatures": [],
        "zfs_labels": [],
        "mounts": [],
        "holders": [],
        "probe_errors": [],
    }


def test_drive_with_ext4():
    state = drive_states()[intel(2)]
    assert state["signatures"] == [
        {
            "device": "/dev/nvme2n1",
            "type": "ext4",
            "label": None,
            "uuid": "2f1b8a9e-4c3d-4e5f-9a8b-7c6d5e4f3a21",
        }
    ]
    assert state["partition_table"] is None
    assert state["zfs_labels"] == []


def test_drive_of_exported_foreign_pool():
    state = drive_states()[intel(3)]
    assert state["partition_table"] == "gpt"
    assert state["partitions"] == ["/dev/nvme3n1p1", "/dev/nvme3n1p9"]
    assert state["signatures"] == []
    # blkid names the pool; zdb adds the label state.
    assert state["zfs_labels"] == [
        {
            "device": "/dev/nvme3n1p1",
            "pool": "oldtank",
            "pool_guid": "16433306536254417230",
            "state": "exported",
            "source": "blkid",
        }
    ]


def test_spare_label_only_zdb_sees():
    state = drive_states()[intel(4)]
    assert state["zfs_labels"] == [
        {
            "device": "/dev/nvme4n1p1",
            "pool": None,
            "pool_guid": None,
            "state": "spare",
            "source": "zdb",
        }
    ]


def test_boot_disk():
    state = drive_states()[BOOT]
    assert state["mounts"] == ["/boot/efi", "/", "[SWAP]"]
    assert state["partitions"] == ["/dev/nvme0n1p1", "/dev/nvme0n1p2", "/dev/nvme0n1p3"]
    assert [s["type"] for s in state["signatures"]] == ["vfat", "ext4", "swap"]
    assert state["holders"] == []


def test_missing_drive():
    state = drive_states()[intel(6)]
    assert state["exists"] is False
    assert state["device"] is None


def test_partition_given_instead_of_drive():
    state = drive_states()[intel(7, "-part1")]
    assert state["exists"] is True
    assert state["whole_disk"] is False
    assert state["nvme_namespace"] is False
    assert state["kernel_name"] == "nvme7n1p1"


def test_ambivalent_probe_is_a_signature():
    state = drive_states()[intel(8)]
    assert [s["type"] for s in state["signatures"]] == ["several signatures"]


def test_lvm_holder_and_legacy_mountpoint_column():
    fact = DriveState()
    output = [
        f"@drive {intel(9)}",
        "@device /dev/nvme9n1",
        "@sysblock",
        "@lsblk",
        '{"blockdevices": [{"name": "/dev/nvme9n1", "type": "disk", "fstype": "LVM2_member",'
        ' "pttype": null, "mountpoint": null, "children": [{"name": "/dev/mapper/vg0-data",'
        ' "type": "lvm", "fstype": "xfs", "pttype": null, "mountpoint": "/srv"}]}]}',
        "@blkid /dev/nvme9n1",
        "DEVNAME=/dev/nvme9n1",
        "UUID=wCBeLJ-3ors-t60q-f4sB-2Mhc-eLvN-DZ9s9v",
        "VERSION=LVM2 001",
        "TYPE=LVM2_member",
        "USAGE=raid",
    ]
    state = fact.process(output)[intel(9)]
    assert state["holders"] == ["/dev/mapper/vg0-data"]
    assert state["mounts"] == ["/srv"]
    assert [s["type"] for s in state["signatures"]] == ["LVM2_member"]


def test_blkid_error_is_kept_not_taken_for_blank():
    output = [
        f"@drive {intel(1)}",
        "@device /dev/nvme1n1",
        "@sysblock",
        "@blkid /dev/nvme1n1",
        "blkid: error: /dev/nvme1n1: Permission denied",
    ]
    state = DriveState().process(output)[intel(1)]
    assert state["probe_errors"] == ["blkid: error: /dev/nvme1n1: Permission denied"]
    assert state["signatures"] == []


def test_missing_blkid_is_an_error():
    output = [
        f"@drive {intel(1)}",
        "@device /dev/nvme1n1",
        "@sysblock",
        "@blkid /dev/nvme1n1",
        "sh: 1: blkid: not found",
    ]
    assert DriveState().process(output)[intel(1)]["probe_errors"] == ["sh: 1: blkid: not found"]


def label_areas_blank(path) -> bool:
    """The fact's shell function, run by a real shell on a regular file."""
    script = f'{LABEL_AREAS_BLANK} label_areas_blank "$1"'
    return subprocess.run(["bash", "-c", script, "bash", str(path)], check=False).returncode == 0


@pytest.mark.parametrize(
    ("size", "offset", "blank"),
    [
        (8 * MIB, None, True),  # all zeros: zdb is skipped
        (8 * MIB, 0, False),  # L0
        (8 * MIB, 300 * KIB, False),  # L1
        (8 * MIB, 4 * MIB, True),  # data between the labels is no label
        (8 * MIB, 8 * MIB - 600 * KIB, True),  # below L2
        (8 * MIB, 8 * MIB - 500 * KIB, False),  # L2
        (8 * MIB, 8 * MIB - 1, False),  # L3
        # not a multiple of 256 KiB: L2 and L3 end at the size rounded down, zeros after them
        (8 * MIB + 100 * KIB, 8 * MIB - 1, False),
        (8 * MIB + 100 * KIB, 8 * MIB + 50 * KIB, True),
        (512 * KIB, None, False),  # too small to tell: zdb reads it
    ],
)
def test_label_areas_blank(tmp_path, size, offset, blank):
    device = tmp_path / "drive"
    with device.open("wb") as f:
        f.truncate(size)
        if offset is not None:
            f.seek(offset)
            f.write(b"\x01")
    assert label_areas_blank(device) is blank


def test_label_areas_of_a_missing_device_are_not_blank(tmp_path):
    assert label_areas_blank(tmp_path / "gone") is False


def test_zdb_runs_only_where_labels_may_be():
    command = str(DriveState().command(paths=[intel(1)]))
    assert command.startswith("label_areas_blank() {")
    assert '! label_areas_blank "$x"; then echo "@zdb $x"; zdb -l "$x"' in command


# --- BlockDevices: which of a pool's drives are there (roles/zfs.py, operations/zpool.py) ----------


def test_block_devices_command_checks_each_path_in_one_loop():
    command = str(BlockDevices().command(paths=["/dev/disk/by-id/nvme-A", "/dev/disk/by-id/nvme-B it"]))
    assert command == (
        "for p in /dev/disk/by-id/nvme-A '/dev/disk/by-id/nvme-B it' ; do "
        '[ -b "$p" ] && echo "$p $(readlink -f "$p")"; done; true'
    )


def test_block_devices_keeps_the_paths_that_resolve():
    lines = ["/dev/disk/by-id/nvme-A /dev/nvme3n1", "", "/dev/disk/by-id/nvme-eui.1 /dev/nvme3n1"]
    assert BlockDevices().process(lines) == {
        "/dev/disk/by-id/nvme-A": "/dev/nvme3n1",
        "/dev/disk/by-id/nvme-eui.1": "/dev/nvme3n1",
    }


def test_block_devices_run_by_a_real_shell(tmp_path):
    """A link to a block device resolves; a dangling link (a pulled drive's) and a link to
    something else do not."""
    block = next((f"/dev/{n}" for n in ("loop0", "vda", "sda", "nvme0n1") if _is_block(f"/dev/{n}")), None)
    if block is None:
        pytest.skip("no block device on this machine")
    (tmp_path / "there").symlink_to(block)
    (tmp_path / "gone").symlink_to(tmp_path / "nvme9n1")
    (tmp_path / "null").symlink_to("/dev/null")
    paths = [str(tmp_path / name) for name in ("there", "gone", "null")]
    command = str(BlockDevices().command(paths=paths))
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert BlockDevices().process(out.splitlines()) == {str(tmp_path / "there"): block}


def _is_block(path):
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False
