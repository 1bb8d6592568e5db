"""inventories/lab.py and lab/lab.yaml, offline: the lab's hosts have the shape the deploy expects."""

import fnmatch
import runpy
from pathlib import Path

import pytest
import yaml

from lab.definition import DEFINITION, SSH_KEY, LabDefinitionError, _check, load

REPO = Path(__file__).resolve().parents[2]


def inventory():
    return runpy.run_path(str(REPO / "inventories" / "lab.py"))


def test_groups_and_roles():
    inv = inventory()
    assert [n for n, _ in inv["mariadb"]] == ["db1", "db2"]
    assert [n for n, _ in inv["postgresql"]] == ["pg1", "pg2"]
    hosts = dict(inv["mariadb"] + inv["postgresql"])
    assert hosts["db1"]["role"] == "primary" and hosts["db1"]["server_id"] == 1
    assert (
        hosts["db2"]["role"] == "replica"
        and hosts["db2"]["primary"] == "db1"
        and hosts["db2"]["server_id"] == 2
    )
    assert hosts["pg2"]["primary"] == "pg1"
    for name, data in hosts.items():
        assert data["ssh_hostname"] == "127.0.0.1" and data["ssh_user"] == "root"
        assert data["ssh_key"] == str(SSH_KEY) and Path(data["ssh_key"]).is_absolute()
        assert data["ssh_strict_host_key_checking"] == "off" and data["ssh_known_hosts_file"] == "/dev/null"
        assert data["hardware"] == {"ram_bytes": 4096 * 1024 * 1024, "cpus": load().vm(name).vcpus}
        assert "/" not in data["replication_address"]
    assert len({d["ssh_port"] for d in hosts.values()}) == 4
    assert len({d["replication_address"] for d in hosts.values()}) == 4


def test_drive_pattern_matches_exactly_the_vms_own_drives():
    lab = load()
    everything = [i for vm in lab.vms.values() for i in vm.drive_ids]
    # what udev also creates in the guest: namespace links and, once ZFS labels a drive, partitions
    everything += (
        [i + "_1" for i in everything]
        + [i + "-part1" for i in everything]
        + [i + "-part9" for i in everything]
    )
    for vm in lab.vms.values():
        assert vm.drive_count == 24
        assert sorted(fnmatch.filter(everything, vm.drive_pattern)) == sorted(vm.drive_ids)
        assert vm.drive_ids[0] == f"nvme-QEMU_NVMe_Ctrl_{vm.name}-nvme00"


def test_bare_vms_are_not_in_the_lab_inventory_but_in_their_own():
    lab = load()
    assert list(lab.bare) == ["bare1"] and lab.bare["bare1"].image == "bare"
    # the lab's VMs boot the zfs image, except those whose deploy installs ZFS prebuilt
    assert all(vm.image == ("bare" if vm.zfs_install == "prebuilt" else "zfs") for vm in lab.vms.values())
    assert [vm.name for vm in lab.vms.values() if vm.zfs_install == "prebuilt"] == ["pg2"]
    assert lab.bare["bare1"].zfs_install == "dkms" and "zfs_install" not in lab.bare["bare1"].host_data
    assert "bare1" not in lab.names and lab.vm("bare1").ssh_port == 2241
    inv = runpy.run_path(str(REPO / "inventories" / "lab_install.py"))
    assert [n for n, _ in inv["mariadb"]] == ["bare1"] and inv["postgresql"] == []
    data = dict(inv["mariadb"])["bare1"]
    assert data["role"] == "primary" and data["drive_count"] == 24 and data["ssh_port"] == 2241
    names = [n for group in ("mariadb", "postgresql") for n, _ in inventory()[group]]
    assert "bare1" not in names


def test_lab_install_inventory_passes_validation():
    from model.secrets import Secrets
    from validation import load_inventory_isolated, validate

    secrets = Secrets({"replication_password": "x" * 24}, "test")
    assert validate(load_inventory_isolated("inventories/lab_install.py"), secrets) == []


BROKEN_DEFINITIONS = {  # an edit of lab.yaml -> the refusal it meets
    "bare ssh port": (lambda r: r["bare_vms"]["bare1"].update(ssh_port=2221), "ssh_port must differ"),
    "bare name": (lambda r: r["bare_vms"].update(db1=r["bare_vms"].pop("bare1")), "both vms and bare_vms"),
    "bare replica of db1": (
        lambda r: r["bare_vms"]["bare1"].update(role="replica", primary="db1"),
        "not a mariadb primary",
    ),
    "joining primary": (
        lambda r: r["joining_vms"]["db3"].update(role="primary", primary=None),
        "joins as a replica",
    ),
    "joining replica of bare1": (
        lambda r: r["joining_vms"]["db3"].update(primary="bare1"),
        "not a mariadb primary",
    ),
    "joining name": (
        lambda r: r["joining_vms"].update(db1=r["joining_vms"].pop("db3")),
        "both vms and joining_vms",
    ),
    "joining address": (
        lambda r: r["joining_vms"]["db3"].update(private_address="10.99.0.12"),
        "private_address must differ",
    ),
    "backup ssh port": (lambda r: r["backup_vms"]["backup1"].update(ssh_port=2241), "ssh_port must differ"),
    "backup address": (
        lambda r: r["backup_vms"]["backup1"].update(private_address="10.99.0.21"),
        "private_address must differ",
    ),
    "backup name": (
        lambda r: r["backup_vms"].update(pg1=r["backup_vms"].pop("backup1")),
        "both vms and backup_vms",
    ),
    "backup with an engine": (
        lambda r: r["backup_vms"]["backup1"].update(engine="postgresql"),
        "a backup VM runs no database",
    ),
    "bare replica of backup1": (
        lambda r: r["bare_vms"]["bare1"].update(role="replica", primary="backup1"),
        "not a mariadb primary",
    ),
}


@pytest.mark.parametrize("case", BROKEN_DEFINITIONS)
def test_bare_joining_and_backup_vms_are_checked_like_the_others(case):
    edit, refusal = BROKEN_DEFINITIONS[case]
    raw = yaml.safe_load(DEFINITION.read_text())
    edit(raw)
    with pytest.raises(LabDefinitionError, match=refusal):
        _check(raw)


def test_joining_vms_are_booted_by_name_and_join_through_the_topology_inventories():
    lab = load()
    assert list(lab.joining) == ["db3"] and "db3" not in lab.names and "db3" in lab.all_vms
    db3 = lab.vm("db3")
    assert (db3.role, db3.primary, db3.server_id, db3.image) == ("replica", "db1", 3, "zfs")
    assert db3.host_data["hardware"]["ram_bytes"] == 3072 * 1024 * 1024
    assert "db3" not in [n for n, _ in inventory()["mariadb"]]
    topology = runpy.run_path(str(REPO / "tests" / "e2e" / "inventories" / "topology.py"))
    joined = dict(topology["groups"]({}, ["db3"])["mariadb"])
    assert [joined[n].get("primary") for n in ("db1", "db2", "db3")] == [None, "db1", "db1"]
    moved = dict(topology["groups"]({"mariadb": "db2", "postgresql": "pg2"}, ["db3"])["mariadb"])
    assert [(moved[n]["role"], moved[n].get("primary")) for n in ("db1", "db2", "db3")] == [
        ("replica", "db2"),
        ("primary", None),
        ("replica", "db2"),
    ]


def test_the_three_node_inventories_pass_validation(tmp_path, monkeypatch):
    from model.secrets import Secrets
    from validation import load_inventory_isolated, validate

    import tests.e2e.topology as topology

    monkeypatch.setattr(topology, "STATE", tmp_path)
    secrets = Secrets({"replication_password": "x" * 24, "lab_app_password": "y" * 24}, "test")
    for path in (topology.inventory(joined=("db3",)), topology.inventory("db3", "pg2", joined=("db3",))):
        problems = validate(load_inventory_isolated(str(path)), secrets)
        # pg2's module repository key exists once the lab has built it (not on a clean clone)
        assert [p for p in problems if "key_file" not in p.key] == []


def test_the_backup_vm_is_in_its_own_inventory_with_the_lab_unchanged():
    lab = load()
    plain = inventory()
    assert "backup" not in plain and "_backup_host" in plain
    assert "backup1" not in [n for g in ("mariadb", "postgresql") for n, _ in plain[g]]
    inv = runpy.run_path(str(REPO / "inventories" / "lab_backup.py"))
    groups = {k: v for k, v in inv.items() if not k.startswith("_") and isinstance(v, list)}
    assert sorted(groups) == ["backup", "mariadb", "monitoring", "postgresql"]
    for group in ("mariadb", "postgresql", "monitoring"):
        assert inv[group] == plain[group]
    assert [n for n, _ in inv["backup"]] == ["backup1"]
    data = dict(inv["backup"])["backup1"]
    name, host = plain["_host"](lab.vm("backup1"))
    assert name == "backup1" and data == host
    assert data["ssh_hostname"] == "127.0.0.1" and data["ssh_port"] == 2251 and data["ssh_user"] == "root"
    assert data["ssh_key"] == str(SSH_KEY)
    assert data["role"] == "backup" and data["replication_address"] == "10.99.0.51"
    assert not {"engine", "primary", "server_id"} & set(data)
    assert data["drive_count"] == 4 and data["hardware"]["ram_bytes"] == 1536 * 1024**2
    assert data["prometheus_scrape_interval"] == plain["LAB_DATA"]["prometheus_scrape_interval"]
    with pytest.raises(ValueError, match="db1 is not a backup VM"):
        plain["_backup_host"](lab.vm("db1"))


def test_lab_backup_inventory_passes_validation():
    from lab.control import ssh_private_key
    from model.secrets import Secrets
    from validation import load_inventory_isolated, validate

    secrets = Secrets(
        {
            "replication_password": "x" * 24,
            "lab_app_password": "y" * 24,
            "backup_ssh_private_key": ssh_private_key(),
            "pgbackrest_ssh_private_key": ssh_private_key(),
        },
        "test",
    )
    hosts = load_inventory_isolated("inventories/lab_backup.py")
    assert sorted(hosts) == ["backup1", "db1", "db2", "pg1", "pg2"]
    problems = validate(hosts, secrets)
    # pg2's module repository key exists once the lab has built it (not on a clean clone)
    assert [p for p in problems if "key_file" not in p.key] == []


def test_the_degraded_test_widens_db2_s_drive_pattern_only():
    """tests/e2e/test_degraded.py: a drive of another serial (db2-other24) in a pulled drive's bay;
    the inventory it then checks and converges with matches it and db2's own drives (the namespace
    aliases it matches too, ..._1, are left out by DrivesByPattern), and changes nothing else."""
    plain = inventory()
    wider = runpy.run_path(str(REPO / "tests" / "e2e" / "inventories" / "db2_wider_pattern.py"))
    for group in ("postgresql", "monitoring"):
        assert wider[group] == plain[group]
    before, after = dict(plain["mariadb"]), dict(wider["mariadb"])
    assert before["db1"] == after["db1"]
    assert {k: v for k, v in after["db2"].items() if k != "drive_pattern"} == {
        k: v for k, v in before["db2"].items() if k != "drive_pattern"
    }
    pattern, vm = after["db2"]["drive_pattern"], load().vm("db2")
    assert not fnmatch.fnmatchcase("nvme-QEMU_NVMe_Ctrl_db2-other24", before["db2"]["drive_pattern"])
    assert fnmatch.fnmatchcase("nvme-QEMU_NVMe_Ctrl_db2-other24", pattern)
    assert all(fnmatch.fnmatchcase(name, pattern) for name in vm.drive_ids)
    assert not fnmatch.fnmatchcase("nvme-QEMU_NVMe_Ctrl_db1-nvme00", pattern)
