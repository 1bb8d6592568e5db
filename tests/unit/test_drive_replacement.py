"""runbooks/replace_drive.py's pre-checks (day2/drive_replacement.py); the operation itself is
tested in test_zpool_operation.py (replace)."""

from day2.drive_replacement import by_id, problems

HOSTS = ["db1", "db2"]
OLD = "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_db2-nvme03"
NEW = "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_db2-nvme24"


def lines(found):
    return [str(p) for p in found]


def test_a_complete_request_has_no_problem():
    assert problems("db2", OLD, NEW, None, HOSTS, {"db2"}) == []
    assert problems("db2", OLD, NEW, "yes", HOSTS, {"db1", "db2"}) == []


def test_names_without_the_directory_are_by_id_names():
    assert by_id("nvme-QEMU_NVMe_Ctrl_db2-nvme24") == NEW
    assert by_id(NEW) == NEW
    short = [by_id_name.rsplit("/", 1)[1] for by_id_name in (OLD, NEW)]
    assert problems("db2", *short, None, HOSTS, {"db2"}) == []


def test_every_problem_at_once_naming_the_key_and_the_fix():
    found = lines(problems(None, None, "/dev/nvme3n1", "maybe", HOSTS, set()))
    assert found == [
        "host = None: missing. Fix: name the host: --data host=HOST",
        "old = None: missing. Fix: --data old=/dev/disk/by-id/NAME (zpool status -P; ls -l /dev/disk/by-id)",
        "new = '/dev/nvme3n1': not a /dev/disk/by-id path. Fix: the drive's name under /dev/disk/by-id "
        "(stable across reboots and bays)",
        "wipe = 'maybe': not yes or no. Fix: --data wipe=yes to wipe the new drive",
    ]


def test_the_host_must_be_in_the_inventory_and_in_the_run():
    assert lines(problems("db9", OLD, NEW, None, HOSTS, {"db1"})) == [
        "host = 'db9': not a host of the inventory. Fix: one of db1, db2"
    ]
    assert lines(problems("db2", OLD, NEW, None, HOSTS, {"db1"})) == [
        "db2: --limit = 'db1': leaves out db2. Fix: include db2"
    ]


def test_the_new_drive_is_not_the_old_one():
    assert lines(problems("db2", OLD, "nvme-QEMU_NVMe_Ctrl_db2-nvme03", None, HOSTS, {"db2"})) == [
        "db2: new = 'nvme-QEMU_NVMe_Ctrl_db2-nvme03': is the old drive. Fix: give the drive that replaces it"
    ]
