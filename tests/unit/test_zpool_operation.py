import logging

import pytest
from pyinfra.api import OperationError, OperationValueError
from pyinfra.facts.files import File

from facts.drives import BlockDevices, DriveState
from facts.zfs import ZpoolProperties, ZpoolTopology
from operations import zpool

from tests.unit.fact_stubs import fixture_lines, run_operation

BY_ID = "/dev/disk/by-id/nvme-INTEL_SSDPE2KE064T8_"


def drive(n):
    return f"{BY_ID}PHLN{n:04d}00V6P4BGN"


# The fixtures' pool: 11 two-way mirrors of drives 1..22, spares 23 and 24 (Let's Encrypt).
VDEVS = [[drive(2 * i + 1), drive(2 * i + 2)] for i in range(11)]
SPARES = [drive(23), drive(24)]
PROPS = {"autoreplace": "on", "autotrim": "on"}


def blank(path, n=1):
    return {
        "path": path,
        "exists": True,
        "device": f"/dev/nvme{n}n1",
        "kernel_name": f"nvme{n}n1",
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


def blank_drives(paths, **changes):
    states = {path: blank(path, n) for n, path in enumerate(paths, start=1)}
    for path, change in changes.items():
        states[path].update(change)
    return states


def new_pool_facts(states):
    return {ZpoolTopology: None, DriveState: lambda paths: {p: states.get(p) for p in paths}}


def existing_pool_facts(status_fixture="zfs/zpool_status_healthy.txt", **props):
    properties = ZpoolProperties().process(fixture_lines("zfs/zpool_get_dbpool.txt"))
    for key, value in props.items():
        properties[key] = {"value": value, "source": "local"}
    return {
        ZpoolTopology: ZpoolTopology().process(fixture_lines(status_fixture)),
        ZpoolProperties: properties,
        File: None,  # no udev rule left by a create cut short
    }


def run(facts, vdevs=VDEVS, spares=SPARES, **kwargs):
    kwargs.setdefault("ashift", 12)
    kwargs.setdefault("properties", PROPS)
    return run_operation(zpool.pool, facts, "dbpool", vdevs=vdevs, spares=spares, **kwargs)


SMALL = [[drive(1), drive(2)], [drive(3), drive(4)]]
SMALL_SPARES = [drive(5)]
SMALL_DRIVES = [drive(n) for n in range(1, 6)]


# --- new pool ---------------------------------------------------------------------------------


def created(commands, kernels=None):
    """The commands before the pool's creation, and the `zpool create` itself: asserts that it runs
    with udev's watch off on its drives (kernels: their names, when the test gives them) and that
    the watch comes back on whether the create succeeds or fails."""
    *before, off, create, on = commands
    assert off.startswith("mkdir -p /run/udev/rules.d && printf ") and f"> {zpool.NOWATCH_RULE} &&" in off
    assert (
        on
        == f"rm -f {zpool.NOWATCH_RULE} && udevadm control --reload && udevadm trigger --action=change "
        + (
            "--settle " + " ".join(f"/dev/{k}" for k in kernels)
            if kernels
            else on.split("--action=change ", 1)[1]
        )
    )
    if kernels:
        for k in kernels:
            assert f'KERNEL=="{k}", OPTIONS+="nowatch"' in off
    command, _, rest = create.partition(" || { ")
    assert rest == f"{on} ; false ; }}", create
    return before, command


def test_the_create_runs_with_udevs_watch_off():
    commands, _ = run(new_pool_facts(blank_drives(SMALL_DRIVES)), SMALL, SMALL_SPARES)
    before, command = created(commands, [f"nvme{n}n1" for n in range(1, 6)])
    assert before == [] and command.startswith("zpool create ")
    assert zpool.udev_watch(["nvme1n1"], on=False).get_raw_value() == (
        "mkdir -p /run/udev/rules.d && printf '%s\\n' "
        """'ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="nvme1n1", OPTIONS+="nowatch"' """
        "> /run/udev/rules.d/99-dbzfs-zpool-create-nowatch.rules && udevadm control --reload && "
        "udevadm trigger --action=change --settle /dev/nvme1n1"
    )


def test_new_pool_exact_command():
    commands, host = run(new_pool_facts(blank_drives(SMALL_DRIVES)), SMALL, SMALL_SPARES)
    assert created(commands) == (
        [],
        "zpool create -o ashift=12 -o autoreplace=on -o autotrim=on dbpool"
        f" mirror {drive(1)} {drive(2)} mirror {drive(3)} {drive(4)} spare {drive(5)}",
    )
    [(_, _, kwargs)] = [call for call in host.fact_calls if call[0] is DriveState]
    assert kwargs == {"paths": SMALL_DRIVES}


def test_new_pool_of_24_drives_three_way_mirrors_no_spares():
    drives = [drive(n) for n in range(1, 25)]
    vdevs = [drives[i : i + 3] for i in range(0, 24, 3)]
    commands, _ = run(new_pool_facts(blank_drives(drives)), vdevs, [], ashift=13)
    before, command = created(commands)
    assert before == []
    assert command.startswith("zpool create -o ashift=13 ")
    assert command.count(" mirror ") == 8
    assert f"mirror {drives[0]} {drives[1]} {drives[2]} mirror" in command
    assert " spare " not in command


def test_new_pool_quotes_paths():
    odd = "/dev/disk/by-id/nvme-Odd Name$1"
    states = blank_drives([odd, drive(2)])
    commands, _ = run(new_pool_facts(states), [[odd, drive(2)]], [], properties={})
    assert created(commands) == ([], f"zpool create -o ashift=12 dbpool mirror '{odd}' {drive(2)}")


def refused(states, vdevs=SMALL, spares=SMALL_SPARES, **kwargs):
    """The OperationError message; asserts that nothing was yielded before it."""
    yielded = []
    with pytest.raises(OperationError) as error:
        from pyinfra.context import ctx_host

        from tests.unit.fact_stubs import FakeHost

        with ctx_host.use(FakeHost(new_pool_facts(states))):
            for command in zpool.pool._inner(
                "dbpool", vdevs=vdevs, spares=spares, ashift=12, properties=PROPS, **kwargs
            ):
                yielded.append(str(command))
    assert yielded == []
    return str(error.value)


def test_drive_with_ext4_is_refused_naming_the_drive():
    states = blank_drives(
        SMALL_DRIVES,
        **{
            drive(3): {"signatures": [{"device": "/dev/nvme3n1", "type": "ext4", "label": None, "uuid": "x"}]}
        },
    )
    message = refused(states)
    assert (
        f"drive {drive(3)} (/dev/nvme3n1) holds a ext4 filesystem (blkid); refusing to create "
        "pool dbpool. To reuse it, add it to wipe_drives for this host"
    ) in message
    assert drive(1) not in message


def test_drive_with_partition_table_is_refused():
    states = blank_drives(SMALL_DRIVES, **{drive(2): {"partition_table": "gpt"}})
    message = refused(states)
    assert f"drive {drive(2)} (/dev/nvme2n1) holds a gpt partition table (blkid)" in message


def test_drive_with_foreign_zfs_label_is_refused():
    label = {
        "device": "/dev/nvme5n1p1",
        "pool": "oldtank",
        "pool_guid": "16433306536254417230",
        "state": "exported",
        "source": "blkid",
    }
    states = blank_drives(
        SMALL_DRIVES,
        **{drive(5): {"partition_table": "gpt", "partitions": ["/dev/nvme5n1p1"], "zfs_labels": [label]}},
    )
    message = refused(states)
    assert (
        f"drive {drive(5)} (/dev/nvme5n1) holds a ZFS label of pool oldtank on /dev/nvme5n1p1"
        " (guid 16433306536254417230, exported, blkid)"
    ) in message


def test_label_of_same_pool_name_suggests_import():
    label = {"device": "/dev/nvme1n1p1", "pool": "dbpool", "pool_guid": "1", "state": None, "source": "blkid"}
    states = blank_drives(SMALL_DRIVES, **{drive(1): {"zfs_labels": [label]}})
    assert "`zpool import dbpool` it instead" in refused(states)


def test_spare_label_without_pool_name_is_refused():
    label = {"device": "/dev/nvme4n1p1", "pool": None, "pool_guid": None, "state": "spare", "source": "zdb"}
    states = blank_drives(SMALL_DRIVES, **{drive(4): {"zfs_labels": [label]}})
    assert "holds a ZFS label with no pool name (a hot spare or cache device)" in refused(states)


def test_every_problem_is_listed_at_once():
    states = blank_drives(
        SMALL_DRIVES,
        **{drive(1): {"partition_table": "dos"}, drive(4): {"exists": False}},
    )
    message = refused(states)
    assert drive(1) in message and drive(4) in message
    assert message.startswith("refusing to create pool dbpool; no drive was changed")


def test_missing_drive_is_refused():
    states = blank_drives(SMALL_DRIVES)
    del states[drive(4)]
    assert f"drive {drive(4)} does not exist on this host" in refused(states)


def test_boot_disk_is_refused_even_when_listed_for_wiping():
    states = blank_drives(
        SMALL_DRIVES,
        **{drive(1): {"mounts": ["/boot/efi", "/", "[SWAP]"], "partition_table": "gpt"}},
    )
    message = refused(states, wipe=[drive(1)])
    assert f"drive {drive(1)} (/dev/nvme1n1) is the boot disk (mounted at /boot/efi, /, [SWAP])" in (message)


def test_mounted_and_lvm_drives_are_refused():
    states = blank_drives(
        SMALL_DRIVES,
        **{
            drive(2): {"mounts": ["/srv"]},
            drive(3): {"holders": ["/dev/mapper/vg0-data"]},
        },
    )
    message = refused(states)
    assert f"drive {drive(2)} (/dev/nvme2n1) is in use: mounted at /srv" in message
    assert f"drive {drive(3)} (/dev/nvme3n1) is in use by /dev/mapper/vg0-data" in message


def test_drive_that_could_not_be_probed_is_refused_even_when_listed_for_wiping():
    states = blank_drives(
        SMALL_DRIVES, **{drive(2): {"probe_errors": ["blkid: error: /dev/nvme2n1: Permission denied"]}}
    )
    message = refused(states, wipe=[drive(2)])
    assert (
        f"drive {drive(2)} (/dev/nvme2n1) could not be probed: blkid: error: /dev/nvme2n1: Permission denied"
    ) in message


def test_partition_and_non_nvme_are_refused():
    states = blank_drives(
        SMALL_DRIVES,
        **{
            drive(1): {"whole_disk": False, "device": "/dev/nvme1n1p1"},
            drive(2): {"nvme_namespace": False, "device": "/dev/sdb", "kernel_name": "sdb"},
        },
    )
    message = refused(states)
    assert f"drive {drive(1)} (/dev/nvme1n1p1) is a partition, not a whole disk" in message
    assert f"drive {drive(2)} (/dev/sdb) is not a whole NVMe namespace" in message


def test_non_nvme_allowed_when_not_required():
    states = blank_drives(SMALL_DRIVES, **{drive(2): {"nvme_namespace": False, "kernel_name": "vdb"}})
    commands, _ = run(new_pool_facts(states), SMALL, SMALL_SPARES, require_nvme=False)
    assert created(commands)[1].startswith("zpool create")
    assert 'KERNEL=="vdb", OPTIONS+="nowatch"' in commands[-3]


def test_drive_in_wipe_list_is_wiped_then_pool_created():
    label = {
        "device": "/dev/nvme3n1p1",
        "pool": "oldtank",
        "pool_guid": "1",
        "state": None,
        "source": "blkid",
    }
    states = blank_drives(
        SMALL_DRIVES,
        **{
            drive(3): {
                "partition_table": "gpt",
                "partitions": ["/dev/nvme3n1p1", "/dev/nvme3n1p9"],
                "zfs_labels": [label],
            },
            drive(5): {
                "signatures": [{"device": "/dev/nvme5n1", "type": "ext4", "label": None, "uuid": "x"}]
            },
        },
    )
    # drive 1 is listed but blank: nothing to wipe.
    commands, _ = run(new_pool_facts(states), SMALL, SMALL_SPARES, wipe=[drive(1), drive(3), drive(5)])
    assert created(commands) == (
        [
            f"zpool labelclear -f {drive(3)}-part1",
            f"wipefs -a {drive(3)}-part1",
            f"wipefs -a {drive(3)}-part9",
            f"wipefs -a {drive(3)}",
            f"wipefs -a {drive(5)}",
            "udevadm settle",
        ],
        "zpool create -o ashift=12 -o autoreplace=on -o autotrim=on dbpool"
        f" mirror {drive(1)} {drive(2)} mirror {drive(3)} {drive(4)} spare {drive(5)}",
    )


def test_wipe_list_does_not_excuse_other_drives():
    states = blank_drives(SMALL_DRIVES, **{drive(2): {"partition_table": "gpt"}})
    assert drive(2) in refused(states, wipe=[drive(1)])


# --- argument checks --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "vdevs, spares, properties, expected",
    [
        ([["/dev/nvme0n1", drive(2)]], [], {}, "drives must be /dev/disk/by-id paths"),
        ([[drive(1), drive(2)]], [drive(2)], {}, "drives listed more than once"),
        ([[]], [], {}, "every vdev needs at least one drive"),
        ([[drive(1), drive(2)]], [], {"ashift": "12"}, "not settable through properties"),
        ([[drive(1), drive(2)]], [], {"capacity": "1"}, "not settable through properties"),
    ],
)
def test_bad_arguments(vdevs, spares, properties, expected):
    with pytest.raises(OperationValueError, match=expected):
        run({}, vdevs, spares, properties=properties)


# --- existing pool ----------------------------------------------------------------------------


def test_matching_pool_yields_nothing():
    commands, host = run(existing_pool_facts())
    assert commands == []
    assert host.noops == ["pool dbpool has the declared layout and properties"]
    assert DriveState not in [call[0] for call in host.fact_calls]


def test_matching_pool_in_another_mirror_order():
    shuffled = [list(reversed(vdev)) for vdev in reversed(VDEVS)]
    commands, _ = run(existing_pool_facts(), shuffled, list(reversed(SPARES)))
    assert commands == []


def test_property_drift_is_set():
    commands, host = run(existing_pool_facts(autotrim="off", autoreplace="off"))
    assert commands == ["zpool set autoreplace=on dbpool", "zpool set autotrim=on dbpool"]
    assert host.noops == []


def test_property_compare_is_normalised():
    commands, _ = run(existing_pool_facts(), properties={"autoreplace": True, "autotrim": "ON"})
    assert commands == []


def differs(facts, vdevs=VDEVS, spares=SPARES, **kwargs):
    with pytest.raises(OperationError) as error:
        run(facts, vdevs, spares, **kwargs)
    message = str(error.value)
    assert message.startswith("pool dbpool differs from its declared layout")
    assert "never destroyed or re-created" in message
    return message


def test_missing_mirror_is_reported():
    extra = [drive(25), drive(26)]
    message = differs(existing_pool_facts(), VDEVS + [extra])
    assert f"declared mirror {drive(25)} {drive(26)} is missing from the pool" in message


def test_extra_disk_is_reported():
    # The pool's mirror-4 is drives 9 and 10; declare it as a two-way mirror of 9 and 27.
    vdevs = [list(v) for v in VDEVS]
    vdevs[4] = [drive(9), drive(27)]
    message = differs(existing_pool_facts(), vdevs)
    assert f"mirror-4 ({drive(9)} {drive(10)}) lacks {drive(27)}; has extra disk {drive(10)}" in (message)


def test_undeclared_vdev_is_reported():
    message = differs(existing_pool_facts(), VDEVS[:-1])
    assert f"pool has mirror-10 ({drive(21)} {drive(22)}) which is not declared" in message


def test_wider_mirror_declared_is_reported():
    vdevs = [list(v) for v in VDEVS]
    vdevs[0] = [drive(1), drive(2), drive(25)]
    message = differs(existing_pool_facts(), vdevs)
    assert f"mirror-0 ({drive(1)} {drive(2)}) lacks {drive(25)}" in message


def test_spare_differences_are_reported():
    message = differs(existing_pool_facts(), VDEVS, [drive(23), drive(30)])
    assert f"declared spare {drive(30)} is missing from the pool" in message
    assert f"pool has spare {drive(24)} which is not declared" in message


def test_different_ashift_is_reported():
    message = differs(existing_pool_facts(), ashift=13)
    assert "ashift is 12, declared 13" in message


def test_undeclared_log_and_cache_vdevs_are_reported():
    lab = "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_lab0"
    facts = existing_pool_facts("zfs/zpool_status_lab_with_log_cache.txt")
    with pytest.raises(OperationError) as error:
        run_operation(
            zpool.pool,
            facts,
            "labpool",
            vdevs=[[lab + "1", lab + "2", lab + "3"], [lab + "4"]],
            spares=[lab + "7"],
            ashift=12,
            properties={},
        )
    message = str(error.value)
    assert "pool has logs vdevs" in message
    assert "pool has cache vdevs" in message
    assert "mirror-0" not in message  # the 3-way mirror and the single disk match


def test_degraded_pool_is_reported_not_a_difference(caplog):
    caplog.set_level(logging.WARNING, logger="pyinfra")
    commands, host = run(existing_pool_facts("zfs/zpool_status_degraded.txt"))
    assert commands == []
    assert host.noops == ["pool dbpool has the declared layout and properties"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"[db1.example.net] pool dbpool is DEGRADED: {drive(1)} is FAULTED (too many errors)" in (warnings)
    assert any(f"{drive(1)} is being replaced by {drive(23)} (spare-0, ONLINE)" in w for w in warnings)
    assert any(f"{drive(8)} is UNAVAIL (was {drive(8)}-part1)" in w for w in warnings)
    assert any(f"spare {drive(23)} is in use" in w for w in warnings)


def test_degraded_pool_still_gets_property_fixes(caplog):
    commands, _ = run(existing_pool_facts("zfs/zpool_status_degraded.txt", autotrim="off"))
    assert commands == ["zpool set autotrim=on dbpool"]


def test_healthy_pool_logs_no_warning(caplog):
    caplog.set_level(logging.WARNING, logger="pyinfra")
    run(existing_pool_facts())
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


# --- drives found by a pattern: any pairing into the declared shape -----------------------------


def sorted_layout(drives, spares=2):
    """What the storage role declares from drives found by a pattern: sorted, paired in order."""
    drives = sorted(drives)
    in_mirrors = drives[: len(drives) - spares]
    return [in_mirrors[i : i + 2] for i in range(0, len(in_mirrors), 2)], drives[len(in_mirrors) :]


def test_a_replaced_drive_sorting_elsewhere_is_the_declared_layout_when_found_by_pattern(caplog):
    # Drive 1 was replaced by drive 30: sorted, the names pair up differently from the pool.
    status = fixture_lines("zfs/zpool_status_healthy.txt")
    status = [line.replace("PHLN000100V6P4BGN", "PHLN003000V6P4BGN") for line in status]
    facts = existing_pool_facts()
    facts[ZpoolTopology] = ZpoolTopology().process(status)
    vdevs, spares = sorted_layout([drive(n) for n in range(2, 25)] + [drive(30)])
    with pytest.raises(OperationError, match="differs from its declared layout"):
        run(facts, vdevs, spares)
    caplog.set_level(logging.WARNING, logger="pyinfra")
    commands, host = run(facts, vdevs, spares, exact_pairs=False)
    assert commands == [] and host.noops == ["pool dbpool has the declared layout and properties"]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_new_drive_waiting_for_its_replace_is_warned_about_not_refused(caplog):
    caplog.set_level(logging.WARNING, logger="pyinfra")
    # Drive 8 is gone (UNAVAIL) and drive 30, blank, sits in its bay.
    found = [n for n in range(1, 25) if n != 8] + [30]
    vdevs, spares = sorted_layout([drive(n) for n in found])
    facts = existing_pool_facts("zfs/zpool_status_degraded.txt")
    facts[BlockDevices] = block_devices({drive(n): n for n in found})
    commands, _ = run(facts, vdevs, spares, exact_pairs=False)
    assert commands == []
    [warning] = [r.getMessage() for r in caplog.records if "does not hold" in r.getMessage()]
    assert warning == (
        f"[db1.example.net] pool dbpool does not hold {drive(30)}, which the host's drive_pattern "
        f"matches; the pool's drives not found: {drive(8)}. The pool is left as it is; to put the new "
        "drive in: pyinfra INVENTORY runbooks/replace_drive.py --data host=db1.example.net --data old=OLD "
        "--data new=NEW"
    )


def block_devices(numbers):
    """BlockDevices' stub: {path: n} of the drives that are there, each /dev/nvme<n>n1."""
    return lambda paths: {p: f"/dev/nvme{numbers[p]}n1" for p in paths if p in numbers}


def autoreplaced_as(name):
    """The healthy pool with drive 8's place taken by `name` (autoreplace, or a replace by hand)."""
    status = fixture_lines("zfs/zpool_status_healthy.txt")
    return ZpoolTopology().process([line.replace(f"{drive(8)}-part1", f"{name}-part1") for line in status])


def test_the_new_drive_in_the_pool_under_another_of_its_names_is_not_a_drive_to_put_in(caplog):
    """ZED's autoreplace names the new drive by one of its /dev/disk/by-id links; drive_pattern
    matches another of them: one drive, there and in the pool."""
    caplog.set_level(logging.WARNING, logger="pyinfra")
    eui = "/dev/disk/by-id/nvme-eui.0025388b91c3a930"
    facts = existing_pool_facts()
    facts[ZpoolTopology] = autoreplaced_as(eui)
    found = [drive(n) for n in range(1, 25) if n != 8] + [drive(30)]
    facts[BlockDevices] = block_devices({**{drive(n): n for n in range(1, 25)}, drive(30): 8, eui: 8})
    vdevs, spares = sorted_layout(found)
    commands, host = run(facts, vdevs, spares, exact_pairs=False)
    assert commands == [] and host.noops == ["pool dbpool has the declared layout and properties"]
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning == (
        f"[db1.example.net] {drive(30)}, which the host's drive_pattern matches, is in pool dbpool as "
        f"{eui} (the same drive, /dev/nvme8n1). The pool is left as it is; nothing needs replacing; to "
        "name the drives as the pool does, list them in `drives` (zpool status -P dbpool)"
    )


def test_a_drive_of_the_pool_outside_the_pattern_is_named_as_such(caplog):
    """The pattern matches 24 drives, one of them blank and not in the pool, which holds a drive of
    another model in drive 8's place: that drive is there, the inventory must name it."""
    caplog.set_level(logging.WARNING, logger="pyinfra")
    other = "/dev/disk/by-id/nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0T500123"
    facts = existing_pool_facts()
    facts[ZpoolTopology] = autoreplaced_as(other)
    found = [drive(n) for n in range(1, 25) if n != 8] + [drive(30)]
    facts[BlockDevices] = block_devices({**{d: n for n, d in enumerate(found)}, other: 40})
    vdevs, spares = sorted_layout(found)
    commands, _ = run(facts, vdevs, spares, exact_pairs=False)
    assert commands == []
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"pool dbpool holds drive(s) the inventory does not name: {other} (/dev/nvme40n1)" in warning
    assert f"pool dbpool does not hold {drive(30)}, which the host's drive_pattern matches; " in warning
    assert "the pool's drives not found: none." in warning
    assert f"widen drive_pattern to match {other} too, or list the pool's drives in `drives`" in warning
    assert "replace_drive.py" not in warning  # nothing to replace: the drive is there


def test_another_shape_is_still_refused_when_found_by_pattern():
    vdevs, spares = sorted_layout([drive(n) for n in range(1, 25)], spares=0)
    with pytest.raises(OperationError) as e:
        run(existing_pool_facts(), vdevs, spares, exact_pairs=False)
    assert "the pool has 2 spare(s), declared 0" in str(e.value)
    wide = [[drive(n) for n in range(3 * i + 1, 3 * i + 4)] for i in range(8)]
    with pytest.raises(OperationError) as e:
        run(existing_pool_facts(), wide, [], exact_pairs=False)
    assert "the pool's vdevs are 11 x 2-way mirror, declared 8 x 3-way mirror" in str(e.value)


# --- replace ----------------------------------------------------------------------------------


def replace_facts(states, status_fixture="zfs/zpool_status_degraded.txt"):
    facts = existing_pool_facts(status_fixture)
    facts[DriveState] = lambda paths: {p: states.get(p) for p in paths}
    return facts


def test_replace_a_faulted_drive_whose_spare_stands_in():
    commands, _ = run_operation(
        zpool.replace, replace_facts(blank_drives([drive(25)])), "dbpool", old=drive(1), new=drive(25)
    )
    assert commands == [f"zpool replace dbpool {drive(1)} {drive(25)}"]


def test_replace_an_unavailable_drive():
    commands, _ = run_operation(
        zpool.replace, replace_facts(blank_drives([drive(26)])), "dbpool", old=drive(8), new=drive(26)
    )
    assert commands == [f"zpool replace dbpool {drive(8)} {drive(26)}"]


def test_replace_refuses_a_new_drive_that_holds_data_naming_it_and_the_opt_in():
    states = blank_drives([drive(25)], **{drive(25): {"partition_table": "gpt"}})
    with pytest.raises(OperationError) as e:
        run_operation(zpool.replace, replace_facts(states), "dbpool", old=drive(1), new=drive(25))
    message = str(e.value)
    assert f"drive {drive(25)} (/dev/nvme1n1) holds a gpt partition table" in message
    assert "To reuse it, replace with wipe" in message and "no drive was changed" in message


def test_replace_with_wipe_clears_the_new_drive_first():
    states = blank_drives([drive(25)], **{drive(25): {"partition_table": "gpt"}})
    commands, _ = run_operation(
        zpool.replace, replace_facts(states), "dbpool", old=drive(1), new=drive(25), wipe=True
    )
    assert commands == [
        f"wipefs -a {drive(25)}",
        "udevadm settle",
        f"zpool replace dbpool {drive(1)} {drive(25)}",
    ]


def test_replace_refuses_a_drive_not_in_the_pool_and_a_spare():
    facts = replace_facts(blank_drives([drive(25)]))
    with pytest.raises(OperationError, match=f"drive {drive(30)} is not in pool dbpool"):
        run_operation(zpool.replace, facts, "dbpool", old=drive(30), new=drive(25))
    with pytest.raises(OperationError, match="is a hot spare of pool dbpool"):
        run_operation(zpool.replace, facts, "dbpool", old=drive(24), new=drive(25))
    with pytest.raises(OperationError, match="give a new drive"):
        run_operation(zpool.replace, facts, "dbpool", old=drive(8), new=drive(24))


def test_replace_is_a_noop_once_the_new_drive_is_in_the_pool():
    # drive 23 (a spare) stands in for drive 1 in the fixture: as if it were the new drive of a
    # replace that is resilvering, then done.
    status = fixture_lines("zfs/zpool_status_healthy.txt")
    facts = {ZpoolTopology: ZpoolTopology().process(status), DriveState: lambda paths: {}}
    commands, host = run_operation(zpool.replace, facts, "dbpool", old=drive(30), new=drive(1))
    assert commands == [] and "has replaced" in host.noops[0]


def test_replace_needs_the_pool_imported():
    with pytest.raises(OperationError, match="not imported"):
        run_operation(zpool.replace, {ZpoolTopology: None}, "dbpool", old=drive(1), new=drive(25))


def test_a_create_cut_short_has_its_drives_watched_again():
    facts = existing_pool_facts()
    facts[File] = {"mode": 644}
    commands, host = run(facts)
    assert commands == [
        f"rm -f {zpool.NOWATCH_RULE} && udevadm control --reload && udevadm trigger --action=change --settle "
        + " ".join([d for vdev in VDEVS for d in vdev] + list(SPARES))
    ]
    assert not host.noops
