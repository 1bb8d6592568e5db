"""Mistakes in the inventory file itself: `./dbzfs validate INVENTORY` (validation.main)
names the file in one header line, then each problem with its line or host, the value and the fix;
it exits non-zero and never prints a traceback."""

import os
import subprocess
import sys

import pytest

from tests.unit.conftest import REPO

HOST = (
    '{"engine": "mariadb", "role": "primary", "server_id": 1, "drive_pattern": "nvme-X_*", "drive_count": 24}'
)


def validate_cli(inventory):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBZFS_")}
    env.update(DBZFS_SECRETS_FILE="/nonexistent/secrets.yml", DBZFS_SECRET_REPLICATION_PASSWORD="x")
    result = subprocess.run(
        [sys.executable, "-m", "validation", str(inventory)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, (result.stdout, result.stderr)  # refused
    assert "Traceback" not in result.stderr and result.stdout == ""
    return result.stderr


def lines_of(report):
    header, *problems = report.strip().splitlines()
    return header, [p.removeprefix("  - ") for p in problems]


def write(tmp_path, text):
    inventory = tmp_path / "inv.py"
    inventory.write_text(text)
    return inventory


CASES = {
    "syntax error": (
        f'mariadb = [\n    ("db1", {HOST[:-1]},, }}),\n]\n',
        [
            'line 2 = \'("db1", {"engine": "mariadb", "role": "primary", "server_id": 1, '
            '"drive_pattern": "nvme-X_*", "drive_count": 24,, }),\': Python syntax error: '
            "invalid syntax. Fix: correct the syntax there"
        ],
    ),
    "exception in the inventory's code": (
        'def host(name):\n    return (name, {"engine": ENGINE})\n\nmariadb = [host("db1")]\n',
        [
            "line 2 = 'return (name, {\"engine\": ENGINE})': NameError: name 'ENGINE' is not "
            "defined. Fix: correct the code or the data it reads"
        ],
    ),
    "no hosts at all": (
        "TIB = 1024**4\nmariadb = []\n",
        ["inventory = '{path}': no hosts. Fix: list hosts in groups, e.g. mariadb = [(\"db01\", {...})]"],
    ),
    "a host twice, in two groups": (
        f'mariadb = [("db1", {HOST})]\npostgresql = [("db1", {{"engine": "postgresql"}})]\n',
        [
            "db1: inventory = ['mariadb', 'postgresql']: listed 2 times (groups: mariadb, "
            "postgresql); pyinfra keeps one host and merges the entries' data key by key, the last "
            "one winning. Fix: keep one entry per host with all its data; to add it to another "
            "group, list its bare name there"
        ],
    ),
    "a host twice in one group": (
        f'mariadb = [("db1", {HOST}), "db1"]\n',
        [
            "db1: inventory = ['mariadb', 'mariadb']: listed 2 times (groups: mariadb, mariadb); "
            "pyinfra keeps one host and merges the entries' data key by key, the last one winning. "
            "Fix: keep one entry per host with all its data; to add it to another group, list its "
            "bare name there"
        ],
    ),
    "a list where a (name, data) tuple belongs": (
        f'mariadb = [["db1", {HOST}]]\n',
        [
            f"mariadb[0] = ['db1', {eval(HOST)!r}]: not a host entry (pyinfra would ignore the "
            'whole group mariadb or fail on it). Fix: write "name" or ("name", {...data...})'
        ],
    ),
    "a bare (name, data) tuple as a group": (
        f'mariadb = ("db1", {HOST})\n',
        [
            f"mariadb = ('db1', {eval(HOST)!r}): pyinfra ignores or misreads it: a group is a list "
            'of hosts, or a tuple (list of hosts, group data). Fix: mariadb = [("name", {...}), '
            "...] or ([...], {...})"
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_inventory_mistake(case, tmp_path):
    text, expected = CASES[case]
    inventory = write(tmp_path, text)
    header, problems = lines_of(validate_cli(inventory))
    assert header == (f"{inventory}: {len(expected)} problem(s) in the inventory file; no host was changed:")
    assert problems == [e.replace("{path}", str(inventory)) for e in expected]


def test_missing_inventory_file():
    header, problems = lines_of(validate_cli("inventories/nope.py"))
    assert header == ("inventories/nope.py: 1 problem(s) in the inventory file; no host was changed:")
    assert problems == [
        "inventory = 'inventories/nope.py': no such file. Fix: give the path "
        "of an inventory file, e.g. inventories/prod.py"
    ]


def test_a_directory_is_not_an_inventory():
    header, problems = lines_of(validate_cli("inventories"))
    assert problems == [
        "inventory = 'inventories': not a Python file. Fix: give the path of an "
        "inventory file, e.g. inventories/prod.py"
    ]


def test_error_in_group_data_names_that_file(tmp_path):
    # pyinfra also reads group_data/ next to the inventory
    (tmp_path / "group_data").mkdir()
    (tmp_path / "group_data" / "mariadb.py").write_text("x = 1\ny = 1 / 0\n")
    inventory = write(tmp_path, f'mariadb = [("db1", {HOST})]\n')
    header, problems = lines_of(validate_cli(inventory))
    assert problems == [
        f"{tmp_path}/group_data/mariadb.py line 2 = 'y = 1 / 0': "
        "ZeroDivisionError: division by zero. Fix: correct the code or the data "
        "it reads"
    ]


def test_data_problems_name_the_inventory_once(tmp_path):
    inventory = write(tmp_path, f'mariadb = [("db1", {HOST[:-1]}, "zpool_name": "mirror1"}})]\n')
    header, problems = lines_of(validate_cli(inventory))
    assert header == f"{inventory}: 1 problem(s) in the inventory data; no host was changed:"
    assert problems == [
        "db1: zpool_name = 'mirror1': zpool refuses names beginning with mirror, raidz, draid or "
        "spare, and names beginning with log, cache, special, dedup or c[0-9] read as vdevs. Fix: "
        'pick another name, e.g. "dbpool" or "db01"'
    ]


def test_a_broken_lab_definition_is_one_message(tmp_path):
    """inventories/lab.py reads lab/lab.yaml: its error reaches the operator as one line."""
    inventory = write(
        tmp_path,
        f"from lab.definition import load\n_lab = load({str(tmp_path / 'lab.yaml')!r})\nmariadb = []\n",
    )
    (tmp_path / "lab.yaml").write_text("vms: [db1]\n")
    header, problems = lines_of(validate_cli(inventory))
    assert len(problems) == 1
    assert problems[0].startswith(
        f"line 2 = \"_lab = load('{tmp_path}/lab.yaml')\": "
        f"LabDefinitionError: {tmp_path}/lab.yaml: vms = ['db1']: "
    )
