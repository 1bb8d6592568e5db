"""lab/lab.yaml mistakes (lab/definition.py): each is one LabDefinitionError naming the file (and
line, for YAML-level ones), the VM, the key, the value and the fix; never a traceback of another
exception type."""

import copy

import pytest
import yaml

from lab.definition import DEFINITION, LabDefinitionError, _check, load

BASE = yaml.safe_load(DEFINITION.read_text())


def vm(name, **settings):
    return lambda raw: raw["vms"][name].update(settings)


def defaults(**settings):
    return lambda raw: raw["defaults"].update(settings)


def top(key, value):
    return lambda raw: raw.__setitem__(key, value)


def backup(name, **settings):
    return lambda raw: raw["backup_vms"][name].update(settings)


CASES = {
    "zero memory": (
        vm("db1", memory=0),
        "db1: memory = 0: must be at least 2048 MiB. Fix: e.g. 4096 (the deploy needs 2 GiB)",
    ),
    "negative memory in defaults": (
        defaults(memory=-4096),
        "db1: defaults.memory = -4096: must be at least 2048 MiB. Fix: e.g. 4096 (the deploy needs 2 GiB)",
    ),
    "memory with a unit": (
        vm("db2", memory="4G"),
        "db2: memory = '4G': must be an integer (MiB), not str. Fix: e.g. 4096",
    ),
    "memory as a boolean": (
        vm("db1", memory=True),
        "db1: memory = True: must be an integer (MiB), not bool. Fix: e.g. 4096",
    ),
    "zero vcpus": (vm("pg1", vcpus=0), "pg1: vcpus = 0: must be at least 1 vCPUs. Fix: e.g. 2"),
    "vcpus as text": (
        vm("pg1", vcpus="2"),
        "pg1: vcpus = '2': must be an integer (vCPUs), not str. Fix: e.g. 2",
    ),
    "zero drives": (
        vm("db1", drive_count=0),
        "db1: drive_count = 0: must be at least 2 drives. Fix: e.g. 24 (mirrors need 2 or more)",
    ),
    "drive size with a space": (
        vm("db1", drive_size="512 M"),
        "db1: drive_size = '512 M': not a size. Fix: digits and K, M, G or T, without a space: e.g. 512M, 8G",
    ),
    "drive size zero": (
        vm("db1", drive_size=0),
        "db1: drive_size = 0: ZFS refuses drives smaller than 64M. Fix: e.g. 512M",
    ),
    "drive size too small for ZFS": (
        defaults(drive_size="1M"),
        "db1: defaults.drive_size = '1M': ZFS refuses drives smaller than 64M. Fix: e.g. 512M",
    ),
    "drive serial with an unknown field": (
        vm("db1", drive_serial="{vm}-{idx}"),
        "db1: drive_serial = '{vm}-{idx}': not a format "
        "with the fields {vm} and {index} ('idx'). Fix: e.g. \"{vm}-nvme{index:02d}\"",
    ),
    "ssh port as text": (
        vm("db1", ssh_port="2221"),
        "db1: ssh_port = '2221': must be a TCP port 1024..65535. Fix: e.g. 2221, unique among the VMs",
    ),
    "duplicate ssh port": (
        vm("pg2", ssh_port=2221),
        "pg2: ssh_port = 2221: ssh_port must differ "
        "between VMs: db1 has it too. Fix: give each VM its own ssh_port",
    ),
    "duplicate address": (
        vm("db2", private_address="10.99.0.11"),
        "db2: private_address = "
        "'10.99.0.11': private_address must differ between VMs: db1 has it too."
        " Fix: give each VM its own private_address",
    ),
    "address not an IP": (
        vm("db2", private_address="10.99.0"),
        "db2: private_address = '10.99.0': not an IPv4 address. Fix: e.g. 10.99.0.11, unique among the VMs",
    ),
    "a VM as a list": (
        lambda raw: raw["vms"].__setitem__("db1", ["mariadb"]),
        "vms.db1 = ['mariadb']: must be a mapping, not list. Fix: key: value settings, e.g. engine: mariadb",
    ),
    "vms as a list": (
        top("vms", ["db1"]),
        "vms = ['db1']: needs a non-empty 'vms' mapping. Fix: one entry per VM: name -> settings",
    ),
    "defaults as a list": (
        top("defaults", [4096]),
        "defaults = [4096]: must be a mapping, not list. Fix: key: value settings shared by the VMs",
    ),
    "misspelt VM key": (
        vm("db1", memroy=8192),
        "db1: memroy = 8192: unknown key. Fix: use only "
        "engine, role, primary, server_id, ssh_port, private_address, memory, "
        "vcpus, drive_count, drive_size, drive_serial, groups, zfs_install",
    ),
    "unknown engine": (
        vm("db1", engine="mysql"),
        "db1: engine = 'mysql': not an engine. Fix: use one of mariadb, postgresql",
    ),
    "MariaDB VM without server_id": (
        lambda raw: raw["vms"]["db1"].pop("server_id"),
        "db1: server_id = None: a MariaDB VM "
        "needs an integer server_id 1..4294967295. Fix: e.g. 1, unique among the VMs",
    ),
    "image packages as text": (
        lambda raw: raw["image"].__setitem__("zfs_packages", "zfs-dkms"),
        "image.zfs_packages = 'zfs-dkms': must be a list of names. Fix: e.g. [linux-image-amd64]",
    ),
    "prefix as text": (
        lambda raw: raw["network"].__setitem__("private_prefix", "24"),
        "network.private_prefix = '24': must be a prefix length 8..30. Fix: e.g. 24",
    ),
    # backup_vms: a backup host runs no database
    "backup VM with an engine": (
        backup("backup1", engine="mariadb"),
        "backup1: engine = 'mariadb': a backup VM runs no database. "
        "Fix: remove it (a backup VM pulls the database VMs' snapshots)",
    ),
    "backup VM with a primary": (
        backup("backup1", primary="db1"),
        "backup1: primary = 'db1': a backup VM runs no database. "
        "Fix: remove it (a backup VM pulls the database VMs' snapshots)",
    ),
    "backup VM with a server_id": (
        backup("backup1", server_id=51),
        "backup1: server_id = 51: a backup VM runs no database. "
        "Fix: remove it (a backup VM pulls the database VMs' snapshots)",
    ),
    "backup VM with an engine in defaults": (
        defaults(engine="mariadb"),
        "backup1: defaults.engine = 'mariadb': a backup VM runs no database. "
        "Fix: remove it (a backup VM pulls the database VMs' snapshots)",
    ),
    "backup VM as a replica": (
        backup("backup1", role="replica"),
        "backup1: role = 'replica': a VM of backup_vms is a backup host. Fix: role: backup",
    ),
    "benchmark VM with an engine": (
        lambda raw: raw["bench_vms"]["bench1"].__setitem__("engine", "postgresql"),
        "bench1: engine = 'postgresql': a benchmark VM declares no database. "
        "Fix: remove it (the benchmark installs and runs both engines in turn)",
    ),
    "benchmark VM as a primary": (
        lambda raw: raw["bench_vms"]["bench1"].__setitem__("role", "primary"),
        "bench1: role = 'primary': a VM of bench_vms is a benchmark VM. Fix: role: bench",
    ),
    "bench role among the database VMs": (
        vm("db2", role="bench", primary=None),
        "db2: role = 'bench': a benchmark VM belongs in bench_vms. "
        "Fix: move the VM to bench_vms, without engine, primary or server_id",
    ),
    "backup VM without a role": (
        lambda raw: raw["backup_vms"]["backup1"].pop("role"),
        "backup1: role: missing. Fix: set role for the VM or in defaults",
    ),
    "backup role among the database VMs": (
        vm("db2", role="backup", primary=None),
        "db2: role = 'backup': a backup host runs no database: it belongs in backup_vms. "
        "Fix: move the VM to backup_vms, without engine, primary or server_id",
    ),
    "backup VM below 1 GiB": (
        backup("backup1", memory=512),
        "backup1: memory = 512: must be at least 1024 MiB. Fix: e.g. 1536 (a backup VM needs 1 GiB)",
    ),
    "backup VM with one drive": (
        backup("backup1", drive_count=1),
        "backup1: drive_count = 1: must be at least 2 drives. Fix: e.g. 24 (mirrors need 2 or more)",
    ),
    "backup VM in an unknown group": (
        backup("backup1", groups=["backup"]),
        "backup1: groups = ['backup']: must be a list of inventory groups. "
        "Fix: e.g. [monitoring] (have: monitoring)",
    ),
    "backup VM named like a lab VM": (
        lambda raw: raw["backup_vms"].__setitem__("db1", raw["backup_vms"].pop("backup1")),
        "backup_vms.db1: VM names in both vms and backup_vms. Fix: give the VM its own name",
    ),
    "backup VM named like a joining VM": (
        lambda raw: raw["backup_vms"].__setitem__("db3", raw["backup_vms"].pop("backup1")),
        "backup_vms.db3: VM names in both joining_vms and backup_vms. Fix: give the VM its own name",
    ),
    "backup VM named like a bare VM": (
        lambda raw: raw["backup_vms"].__setitem__("bare1", raw["backup_vms"].pop("backup1")),
        "backup_vms.bare1: VM names in both bare_vms and backup_vms. Fix: give the VM its own name",
    ),
    "backup VM on a lab VM's ssh port": (
        backup("backup1", ssh_port=2223),
        "backup1: ssh_port = 2223: ssh_port must differ between VMs: db3 has it too. "
        "Fix: give each VM its own ssh_port",
    ),
    "backup VM on a bare VM's address": (
        backup("backup1", private_address="10.99.0.41"),
        "backup1: private_address = '10.99.0.41': private_address must differ between VMs: "
        "bare1 has it too. Fix: give each VM its own private_address",
    ),
    "backup_vms as a list": (
        top("backup_vms", ["backup1"]),
        "backup_vms = ['backup1']: must be a mapping, not list. "
        "Fix: one entry per backup VM: name -> settings",
    ),
    "a replica of the backup VM": (
        vm("db2", primary="backup1"),
        "db2: primary = 'backup1': is not a mariadb primary here. "
        "Fix: name a mariadb primary of the same section",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_lab_definition_mistake(case):
    mutate, expected = CASES[case]
    raw = copy.deepcopy(BASE)
    mutate(raw)
    with pytest.raises(LabDefinitionError) as err:
        _check(raw)
    assert str(err.value) == expected


def write(tmp_path, text):
    path = tmp_path / "lab.yaml"
    path.write_text(text)
    return path


def test_a_vm_twice_is_refused_with_both_lines(tmp_path):
    """YAML keeps the last of two `db2:` keys silently: the first VM would vanish."""
    text = DEFINITION.read_text()
    lines = text.splitlines()
    first = lines.index("  db2:") + 1
    path = write(tmp_path, text.replace("  pg2:\n", "  db2:\n", 1))
    second = path.read_text().splitlines().index("  db2:", first) + 1
    with pytest.raises(LabDefinitionError) as err:
        load(path)
    assert str(err.value) == (
        f"{path} line {second}: db2: the key appears twice in one mapping "
        f"(first on line {first}); YAML would keep only the last. Fix: "
        "rename one (each VM needs its own name) or remove it"
    )


def test_a_key_twice_in_a_vm(tmp_path):
    text = DEFINITION.read_text().replace(
        "    ssh_port: 2221\n", "    ssh_port: 2221\n    ssh_port: 2299\n", 1
    )
    with pytest.raises(LabDefinitionError, match=r"line \d+: ssh_port: the key appears twice"):
        load(write(tmp_path, text))


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "vms:\n  db1:\n    memory: [4096\n")
    with pytest.raises(LabDefinitionError) as err:
        load(path)
    assert str(err.value).startswith(f"{path} line 4: not valid YAML: ")
    assert str(err.value).endswith(". Fix: correct the YAML there")


def test_missing_file(tmp_path):
    with pytest.raises(LabDefinitionError) as err:
        load(tmp_path / "nope.yaml")
    assert str(err.value) == (
        f"{tmp_path}/nope.yaml: cannot read it (No such file or "
        "directory). Fix: restore lab/lab.yaml from git"
    )


def test_errors_name_the_definition_file_relative_to_the_repository(tmp_path, monkeypatch):
    raw = copy.deepcopy(BASE)
    raw["vms"]["db1"]["vcpus"] = 0
    (tmp_path / "lab").mkdir()
    path = tmp_path / "lab" / "lab.yaml"
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.setattr("lab.definition.REPO", tmp_path)
    with pytest.raises(LabDefinitionError) as err:
        load(path)
    assert str(err.value) == "lab/lab.yaml: db1: vcpus = 0: must be at least 1 vCPUs. Fix: e.g. 2"


def test_the_lab_definition_loads_as_before():
    lab = load()
    assert lab.names == ["db1", "db2", "pg1", "pg2"] and list(lab.bare) == ["bare1"]
    db1 = lab.vm("db1")
    assert (db1.memory, db1.vcpus, db1.drive_count, db1.drive_size, db1.ssh_port) == (
        4096,
        1,
        24,
        512 * 1024**2,
        2221,
    )
    assert lab.image == BASE["image"]  # the image cache key hashes it: unchanged


def test_zfs_install_prebuilt_boots_the_bare_image_and_bare_vms_refuse_it():
    raw = copy.deepcopy(BASE)
    name = next(iter(raw["vms"]))
    raw["vms"][name]["zfs_install"] = "prebuilt"
    vm = _check(raw).vms[name]
    assert (vm.image, vm.zfs_install) == ("bare", "prebuilt")
    assert vm.host_data["zfs_install"] == "prebuilt"
    assert set(vm.host_data["zfs_module_repository"]) == {"url", "suite", "key_file"}
    raw["vms"][name]["zfs_install"] = "dkms"
    with pytest.raises(LabDefinitionError) as err:
        _check(raw)
    assert "zfs_install = 'dkms': not a way the lab installs ZFS" in str(err.value)


def test_the_benchmark_vm_is_booted_by_name_with_the_lab_drives():
    lab = load()
    bench1 = lab.vm("bench1")
    assert list(lab.bench) == ["bench1"] and "bench1" not in lab.names
    assert (bench1.role, bench1.engine, bench1.image, bench1.memory) == ("bench", None, "zfs", 2048)
    assert (bench1.drive_count, bench1.drive_size) == (24, 1024**3)


def test_the_backup_vm_is_booted_by_name_and_runs_no_database():
    lab = load()
    assert list(lab.backup) == ["backup1"] and "backup1" not in lab.names
    assert list(lab.all_vms) == ["db1", "db2", "pg1", "pg2", "db3", "bare1", "backup1", "bench1"]
    backup1 = lab.vm("backup1")
    assert lab.backup["backup1"] is lab.all_vms["backup1"]
    assert (backup1.role, backup1.engine, backup1.primary, backup1.server_id) == ("backup", None, None, None)
    assert (backup1.ssh_port, backup1.private_address, backup1.memory) == (2251, "10.99.0.51", 1536)
    assert (backup1.drive_count, backup1.drive_size, backup1.vcpus) == (4, 1024**3, 1)
    assert (backup1.image, backup1.zfs_install, backup1.groups) == ("zfs", None, ())
    assert backup1.host_data == {
        "role": "backup",
        "replication_address": "10.99.0.51",
        "hardware": {"ram_bytes": 1536 * 1024 * 1024, "cpus": 1},
        "drive_pattern": "nvme-QEMU_NVMe_Ctrl_backup1-nvme??",
        "drive_count": 4,
        "debian_release": lab.release,
    }
    # the database VMs' data keep their keys
    assert set(lab.vm("db1").host_data) == {
        "engine",
        "debian_release",
        "role",
        "primary",
        "server_id",
        "replication_address",
        "hardware",
        "drive_pattern",
        "drive_count",
    }
    assert set(lab.vm("pg2").host_data) >= {"engine", "primary", "server_id", "zfs_install"}


def test_backup_vms_take_groups_and_a_prebuilt_zfs_and_may_be_absent():
    raw = copy.deepcopy(BASE)
    raw["backup_vms"]["backup1"].update(groups=["monitoring"], zfs_install="prebuilt")
    backup1 = _check(raw).backup["backup1"]
    assert backup1.groups == ("monitoring",) and (backup1.image, backup1.zfs_install) == ("bare", "prebuilt")
    assert backup1.host_data["zfs_install"] == "prebuilt" and "engine" not in backup1.host_data
    del raw["backup_vms"]
    lab = _check(raw)
    assert lab.backup == {} and "backup1" not in lab.all_vms
    with pytest.raises(LabDefinitionError, match="no VM 'backup1'"):
        lab.vm("backup1")


def test_every_database_vm_installs_zfs_prebuilt_on_the_bare_image_when_asked(monkeypatch):
    from lab import definition

    monkeypatch.setenv(definition.ZFS_ENV, "prebuilt")
    lab = definition.load()
    for vm in [*lab.vms.values(), *lab.joining.values()]:
        assert vm.image == "bare" and vm.host_data["zfs_install"] == "prebuilt", vm.name
    assert all(vm.image == "bare" for vm in lab.bare.values())  # they install with DKMS, as before
    monkeypatch.setenv(definition.ZFS_ENV, "dkms")
    with pytest.raises(definition.LabDefinitionError, match="prebuilt, or unset"):
        definition.load()
