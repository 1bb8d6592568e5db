"""Every host data key is defined once, in model/keys.py, and everything else derives from it or
is checked against it here: group_data/all.py as pyinfra loads it, HostConfig's defaults, the keys
the code reads, validation's types and choices, the owners named, docs/keys.md."""

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engines import db_settings
from model import checking, keys, keys_doc, sizing, zfs_properties
from model.hostdata import DEFAULTS, HostConfig, MonitoringSpec, PoolSpec
from model.secrets import Secrets
from roles import backup_fleet, topology_checks, zfs_packages
from validation import KEY_TYPES, KNOWN_KEYS, checks, validate

from tests.unit.conftest import REPO, host_data

CODE = ["model", "host_scripts", "facts", "operations", "engines", "roles", "validation", "day2", "runbooks"]
CODE += ["lab", "bench", "zfsrepo"]
# Keys their owner reads through what HostConfig derives from them.
READ_THROUGH = {"zfs_dataset_roles": ".child_datasets", "zpool_spares": ".layout("}
SECRETS = Secrets({"replication_password": "x", "app_password": "y"}, "test")


def code_files() -> list[Path]:
    return [REPO / "deploy.py", *(p for top in CODE for p in sorted((REPO / top).rglob("*.py")))]


def test_docs_keys_md_is_the_rendering_of_the_definitions():
    current = (REPO / "docs" / "keys.md").read_text()
    assert current == keys_doc.markdown(), (
        "docs/keys.md is not the rendering of model/keys.py: regenerate it with "
        f"`.venv/bin/{keys_doc.COMMAND}`"
    )


def test_group_data_all_hands_pyinfra_every_default_and_nothing_else(tmp_path):
    """The data pyinfra gives a host that sets nothing: group_data/all.py, loaded by pyinfra
    itself (in a child process: importing pyinfra_cli patches the interpreter for gevent)."""
    inventory = tmp_path / "inventory.py"
    inventory.write_text('hosts = ["bare"]\n')
    result = subprocess.run(
        [sys.executable, "-m", "validation", "--dump-data", str(inventory)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)["bare"]
    assert loaded == json.loads(json.dumps(keys.defaults()))
    assert list(loaded) == list(keys.KEYS)


def test_hostdata_defaults_are_the_definitions():
    assert DEFAULTS == keys.defaults()
    assert set(KNOWN_KEYS) == set(KEY_TYPES) == set(keys.KEYS)


@pytest.mark.parametrize("cls", [HostConfig, PoolSpec, MonitoringSpec])
def test_hostconfig_writes_no_default_of_its_own(cls):
    """from_data gives every field, its defaults from model/keys.py: none written a second time."""
    own = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    ]
    assert own == []


def test_from_data_of_nothing_is_the_defaults():
    cfg = HostConfig.from_data("h", {"engine": "mariadb"})
    for key, k in keys.KEYS.items():
        # cluster defaults to the engine; HostConfig keeps the engine's snapshot_retention only
        if k.field == key and key not in ("engine", "cluster", "snapshot_retention"):
            assert getattr(cfg, key) == k.default, key
    assert cfg.pool.name == keys.default("zpool_name")
    assert cfg.monitoring.scrape_interval == keys.default("prometheus_scrape_interval")


@pytest.mark.parametrize("key", sorted(keys.KEYS))
def test_every_key_is_defined_completely(key):
    k = keys.KEYS[key]
    assert k.kind in keys.KINDS
    assert k.section in keys.SECTIONS
    assert (k.default is None and k.nullable) or checking.has_kind(k.default, k.kind)
    assert k.example and k.doc and "\n" not in k.doc and not k.doc.endswith(".")
    if k.choices:
        assert k.default is None or k.default in k.choices
        assert k.invalid != "not one of its values", "say what a wrong value is"
    # The owner is a module of the code that reads the key: by its name, HostConfig's field, or
    # what HostConfig makes of it.
    owner = REPO / (k.owner.replace(".", "/") + ".py")
    assert owner.exists(), k.owner
    source = owner.read_text()
    read_as = {f'"{key}"', f".{k.field.rsplit('.', 1)[-1]}", READ_THROUGH.get(key)}
    assert any(r and r in source for r in read_as), (k.owner, read_as)


def test_every_key_the_code_reads_is_defined():
    """Reads of pyinfra host data (host.data.X, host.data.get("X")) anywhere in the code, and
    from_data's: each names a defined key, pyinfra's connection data (ssh_*) or a runbook's
    parameter (day2/kit.py: not host data, given with --data)."""
    parameters = set()
    read: dict[str, set[str]] = {}

    def host_data(node: ast.AST) -> bool:
        if not (isinstance(node, ast.Attribute) and node.attr == "data"):
            return False
        owner = node.value
        return (isinstance(owner, ast.Name) and owner.id == "host") or (
            isinstance(owner, ast.Attribute) and owner.attr == "host"
        )

    for path in code_files():
        where = str(path.relative_to(REPO))
        for node in ast.walk(ast.parse(path.read_text())):
            name = None
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                func = node.func
                if (isinstance(func, ast.Name) and func.id == "Parameter") or (
                    isinstance(func, ast.Attribute) and func.attr == "Parameter"
                ):
                    parameters.add(node.args[0].value)
                elif isinstance(func, ast.Attribute) and func.attr == "get":
                    mine = (
                        path.name == "hostdata.py"
                        and isinstance(func.value, ast.Name)
                        and func.value.id == "data"
                    )
                    if host_data(func.value) or mine:
                        name = node.args[0].value
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_get":
                name = node.args[1].value if isinstance(node.args[1], ast.Constant) else None
            elif (
                isinstance(node, ast.Attribute) and host_data(node.value) and node.attr not in ("get", "dict")
            ):
                name = node.attr
            elif (
                isinstance(node, ast.Subscript)
                and host_data(node.value)
                and isinstance(node.slice, ast.Constant)
            ):
                name = node.slice.value
            if name is not None:
                read.setdefault(name, set()).add(where)
    assert len(read) >= len(keys.KEYS), "the scan finds from_data's reads"
    unknown = {
        name: sorted(files)
        for name, files in read.items()
        if name not in keys.KEYS and not name.startswith("ssh_") and name not in parameters
    }
    assert not unknown, f"host data read but not defined in model/keys.py: {unknown}"


def test_validation_derives_its_types_from_the_definitions():
    for key, k in keys.KEYS.items():
        assert KEY_TYPES[key] == (checking.KIND_WORDS[k.kind], k.nullable, k.example)
    assert set(checks.NESTED) <= set(keys.KEYS)


def test_the_owners_value_lists_are_the_definitions():
    assert zfs_packages.INSTALLS == keys.choices("zfs_install")
    assert sizing.ENGINES == db_settings.ENGINES == checking.ENGINES == keys.choices("engine")
    assert sizing.WORKLOADS == keys.choices("workload")
    assert (*topology_checks.DATABASE_ROLES, backup_fleet.ROLE) == keys.choices("role")


CHOICES = sorted(k for k, d in keys.KEYS.items() if d.choices)


@pytest.mark.parametrize("key", CHOICES)
def test_a_value_outside_a_keys_choices_is_refused_as_its_definition_says(key):
    data = host_data(
        engine="mariadb",
        role="primary",
        server_id=1,
        drive_pattern="nvme-X_*",
        drive_count=4,
        hardware={"ram_bytes": 4 * 1024**3, "cpus": 2},
    )
    assert validate({"db9": data}, SECRETS) == []
    data[key] = "bogus"
    message, fix = keys.KEYS[key].choice_problem("bogus")
    assert f"db9: {key} = 'bogus': {message}. Fix: {fix}" in [
        str(p) for p in validate({"db9": data}, SECRETS)
    ]


def test_the_zfs_vocabulary_is_written_once():
    """What host data may declare for ZFS (the properties, their values, the size and name
    patterns): model/zfs_properties.py only, not again in validation or the rules."""
    names = {"DATASET_PROPERTIES", "CHOICES", "SIZE_PROPERTIES", "NONE_SIZE_PROPERTIES", "ON_OFF"}
    names |= {"ZFS_SIZE_RE", "COMPRESSION_RE", "POOL_NAME_RE", "DATASET_NAME_RE", "MOUNTPOINT_RE"}
    names.add("POOL_RESERVED_PREFIXES")
    rules = [*(REPO / "validation").glob("*.py"), *(REPO / "roles").glob("*_checks.py")]
    rules += [REPO / "roles" / "zfs_packages.py", REPO / "roles" / "zfs_module_params.py"]
    elsewhere = []
    for path in rules:
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id in names:
                    elsewhere.append(f"{path.relative_to(REPO)}: {target.id}")
    assert elsewhere == []
    assert zfs_properties.CHOICES["atime"] == ("on", "off")
