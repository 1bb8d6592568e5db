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
