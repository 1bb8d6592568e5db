"""The operator's commands behave: `-h`/`--help` prints a usage and does nothing else, `--version`
too, and every command exits 0 done, 1 failed, 2 refused or misused.

./dbzfs runs from a scratch copy (the script and VERSION) whose scripts/bootstrap, .venv/bin/python
and .venv/bin/pyinfra are stubs that append their command line to a marker file: a command that ran
anything leaves the marker behind. The commands come from the script itself (its case branches and
its usage), so a new command is checked without being listed here. The Python front ends (lab, bench,
zfs-repo) run with this venv's Python; lab's subcommands with everything that acts replaced by a
tripwire.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "dbzfs"

# Typical arguments before the --help, per command (a command missing here gets a made-up one).
ARGS = {
    "converge": ["--with-backup"],
    "test": ["tests/unit"],
    "test-long": ["tests/vagrant", "-x"],
    "test-crash": ["--cycles", "3"],
    "test-install": ["-k", "install"],
    "test-vagrant": ["-x"],
    "bench": ["--quick", "--engine", "mariadb"],
    "lab": ["up", "db1"],
    "zfs-repo": ["--out", "/tmp/repo"],
    "validate": ["inventories/lab.py"],
    "deploy": ["inventories/lab.py", "--dry"],
    "roll": ["inv.py", "--dry"],
}


def case_labels() -> set[str]:
    """The commands the script's case statements know (their branches' labels)."""
    labels: set[str] = set()
    for m in re.finditer(r"^\s+([a-z][a-z0-9|-]*)\)", SCRIPT.read_text(), re.M):
        labels.update(m.group(1).split("|"))
    return labels - {"help", "version"}


COMMANDS = sorted(case_labels())


def _stub(path: Path, marker: Path, rc_var: str) -> None:
    path.write_text(f'#!/bin/sh\necho "{path.name} $*" >> {marker}\nexit ${{{rc_var}:-0}}\n')
    path.chmod(0o755)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A scratch checkout: the real dbzfs and VERSION; a bootstrap, python and pyinfra that record."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    for name in ("dbzfs", "VERSION"):
        shutil.copy2(REPO / name, root / name)
    marker = tmp_path / "ran"
    _stub(root / "scripts" / "bootstrap", marker, "STUB_BOOTSTRAP_RC")
    _stub(root / ".venv" / "bin" / "python", marker, "STUB_PYTHON_RC")
    _stub(root / ".venv" / "bin" / "pyinfra", marker, "STUB_PYINFRA_RC")
    return root


def dbzfs(tree: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(tree / "dbzfs"), *args],
        cwd=tree.parent,  # the script finds its own directory
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def ran(tree: Path) -> list[str]:
    marker = tree.parent / "ran"
    return marker.read_text().splitlines() if marker.exists() else []


def usage_commands(text: str) -> list[str]:
    """The commands a global usage lists: its lines indented two spaces."""
    return re.findall(r"^  ([a-z][a-z0-9-]*)\b", text, re.M)


def test_every_command_has_a_usage_block_and_a_branch(tree):
    """The commands the global usage lists are the ones the case branches dispatch."""
    out = dbzfs(tree, "help")
    assert out.returncode == 0, out.stderr
    listed = usage_commands(out.stdout)
    assert len(listed) == len(set(listed))
    assert sorted(listed) == COMMANDS
    assert {"converge", "test", "lab", "validate", "deploy", "roll"} <= set(COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("form", ["--help", "-h", "after-args", "help-cmd"])
def test_help_prints_the_command_usage_and_runs_nothing(tree, cmd, form):
    args = {
        "--help": [cmd, "--help"],
        "-h": [cmd, "-h"],
        "after-args": [cmd, *ARGS.get(cmd, ["something"]), "--help"],
        "help-cmd": ["help", cmd],
    }[form]
    r = dbzfs(tree, *args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: ./dbzfs {cmd} ") or r.stdout.startswith(f"usage: ./dbzfs {cmd}\n")
    assert "Exit status, every command: 0 done, 1 failed, 2 refused or misused" in r.stdout
    assert r.stderr == ""
    assert ran(tree) == []


@pytest.mark.parametrize(
    "args",
    [
        ["lab", "ssh", "--help"],
        ["lab", "ssh", "db1", "-h"],
        ["lab", "down", "--timeout", "5", "--help"],
        ["deploy", "--help", "inventories/lab.py"],
        ["test-crash", "--cycles", "0", "--help"],  # help first, even with a bad argument
        ["roll", "--help"],
    ],
)
def test_help_anywhere(tree, args):
    r = dbzfs(tree, *args)
    assert r.returncode == 0 and r.stdout.startswith(f"usage: ./dbzfs {args[0]} "), r.stderr
    assert ran(tree) == []


def test_pass_through_usages_say_where_the_args_go_and_how_to_see_their_help(tree):
    for cmd in ("test", "test-long", "test-crash", "test-install", "test-vagrant"):
        assert ".venv/bin/python -m pytest --help" in dbzfs(tree, cmd, "--help").stdout, cmd
    assert (
        "PYINFRA ARGS go to pyinfra (its options: .venv/bin/pyinfra --help)"
        in dbzfs(tree, "deploy", "-h").stdout
    )
    assert ".venv/bin/python -m lab SUBCOMMAND --help" in dbzfs(tree, "lab", "-h").stdout


def test_lab_ssh_passes_help_in_the_remote_command_to_the_vm(tree):
    """The documented exception: `lab ssh NAME CMD...` runs CMD on the VM as typed."""
    r = dbzfs(tree, "lab", "ssh", "db1", "zfs", "--help")
    assert r.returncode == 0, r.stderr
    assert ran(tree) == ["bootstrap lab", "python -m lab ssh db1 zfs --help"]


@pytest.mark.parametrize("args", [["help"], ["-h"], ["--help"]])
def test_global_usage(tree, args):
    r = dbzfs(tree, *args)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("usage: ./dbzfs COMMAND [ARGS]\n")
    assert sorted(usage_commands(r.stdout)) == COMMANDS
    assert "Exit status, every command: 0 done, 1 failed, 2 refused or misused" in r.stdout
    assert ran(tree) == []


@pytest.mark.parametrize("args", [["--version"], ["version"]])
def test_version(tree, args):
    version = (REPO / "VERSION").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    r = dbzfs(tree, *args)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"dbzfs {version}\n", "")
    assert ran(tree) == []


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["nosuch"],
        ["--nosuch"],
        ["help", "nosuch"],
        ["deploy"],
        ["deploy", "--dry", "inventories/lab.py"],
        ["validate"],
        ["validate", "a.py", "b.py"],
        ["roll"],
        ["lab"],
        ["test-crash", "--cycles", "0"],
        ["test-crash", "--cycles"],
    ],
)
def test_misuse_exits_2_with_a_usage_on_stderr_and_runs_nothing(tree, args):
    r = dbzfs(tree, *args)
    assert r.returncode == 2
    assert r.stdout == ""
    assert "usage: ./dbzfs" in r.stderr
    assert ran(tree) == []


def test_the_commands_run_the_moved_modules(tree):
    """The positive control of the marker (a command that runs leaves it) and the module names."""
    assert dbzfs(tree, "validate", "inv.py").returncode == 0
    assert dbzfs(tree, "deploy", "inv.py", "--dry", "--diff").returncode == 0
    assert dbzfs(tree, "roll", "--dry", "inv.py").returncode == 0
    assert ran(tree) == [
        "bootstrap operator",
        "python -m validation inv.py",
        "bootstrap operator",
        "python -m validation inv.py",
        "pyinfra inv.py deploy.py --dry --diff",
        "bootstrap operator",
        "python -m day2.rolling_run --dry inv.py",
    ]


@pytest.mark.parametrize("validator_rc", [2, 1])
def test_deploy_stops_with_the_validators_status_when_it_refuses_or_fails(tree, validator_rc):
    """2: the validator refused the data; 1: it failed. Either way pyinfra never runs."""
    r = dbzfs(tree, "deploy", "inv.py", STUB_PYTHON_RC=str(validator_rc))
    assert r.returncode == validator_rc
    assert "no host was touched" in r.stderr
    assert [line for line in ran(tree) if line.startswith("pyinfra")] == []


def test_the_test_commands_pass_their_args_to_pytest(tree):
    for cmd, selection in (
        ("test", []),
        ("test-long", []),
        ("test-crash", ["-m", "long or not long", "tests/e2e/test_crash.py"]),
        ("test-install", ["tests/install"]),
        ("test-vagrant", ["tests/vagrant"]),
    ):
        assert dbzfs(tree, cmd, "-x", "tests/unit").returncode == 0
        assert ran(tree)[-1].endswith(" " + " ".join([*selection, "-x", "tests/unit"])), cmd
        assert "pytest.main()" in ran(tree)[-1]


@pytest.mark.parametrize(
    ("tests", "args", "rc"),
    [
        ("def test_ok():\n    pass\n", [], 0),
        ("def test_bad():\n    assert False\n", [], 1),  # pytest: 1, tests failed
        ("def test_ok():\n    pass\n", ["--no-such-option"], 2),  # pytest: 4, usage error
        ("", [], 2),  # pytest: 5, no test collected
        ("import pytest\n\ndef test_stop():\n    raise KeyboardInterrupt\n", [], 1),  # 2, interrupted
    ],
)
def test_pytest_statuses_in_the_convention(tree, tests, args, rc):
    """./dbzfs test with the real pytest (this venv's) on a scratch test file."""
    python_stub = tree / ".venv" / "bin" / "python"
    python_stub.write_text(
        f'#!/bin/sh\necho "python $*" >> {tree.parent / "ran"}\nexec {sys.executable} "$@"\n'
    )
    (tree / "t").mkdir()
    (tree / "t" / "test_scratch.py").write_text(tests)
    r = dbzfs(tree, "test", "-p", "no:cacheprovider", *args, "t")
    assert r.returncode == rc, f"{r.stdout}\n{r.stderr}"


# The Python front ends, with this venv's Python (their --help is read-only).


def python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("module", ["lab", "bench.run", "zfsrepo"])
def test_front_end_help(module):
    r = python("-m", module, "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: ")
    assert re.search(r"0 done, 1 failed( \([a-z ]+\))?, 2 refused or misused", r.stdout)


def lab_subcommands() -> list[str]:
    from lab import cli

    return list(cli.COMMANDS)


def test_lab_subcommand_help_in_a_process_of_its_own():
    for sub in lab_subcommands():
        r = python("-m", "lab", sub, "--help")
        assert r.returncode == 0, f"{sub}: {r.stderr}"
        assert r.stdout.startswith(f"usage: python -m lab {sub}"), sub


class Tripwire:
    """Stands for whatever acts (the lab's definition, control, VMs, images, cache, ssh)."""

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, attr):
        raise AssertionError(f"{self.name}.{attr} used")

    def __call__(self, *args, **kwargs):
        raise AssertionError(f"{self.name}() called")


@pytest.fixture
def tripped_lab(monkeypatch):
    from lab import cli

    for name in ("load", "control", "vmmod", "aptcache", "vagrant_box"):
        monkeypatch.setattr(cli, name, Tripwire(name))
    monkeypatch.setattr(cli.os, "execvp", Tripwire("execvp"))
    return cli


@pytest.mark.parametrize("sub", lab_subcommands())
@pytest.mark.parametrize("where", ["after", "before", "-h"])
def test_lab_subcommand_help_acts_not(tripped_lab, capsys, sub, where):
    argv = {"after": [sub, "--help"], "before": ["--help", sub], "-h": [sub, "x", "-h"]}[where]
    assert tripped_lab.main(argv) == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m lab {sub}")


@pytest.mark.parametrize(
    "argv",
    [
        ["nosuch"],
        [],
        ["down", "--timeout", "x"],
        ["down", "--timeout"],
        ["image", "foo"],
        ["up", "--cache"],
        ["converge", "db1"],
        ["status", "now"],
        ["reset-drives"],
        ["ssh"],
        ["vagrant-box", "--apt-proxy"],
    ],
)
def test_lab_misuse_exits_2_before_anything(tripped_lab, argv):
    with pytest.raises(SystemExit) as e:
        tripped_lab.main(argv)
    assert e.value.code == 2


@pytest.mark.parametrize("argv", [["up", "nosuchvm"], ["down", "db1", "nosuchvm"], ["ssh", "nosuchvm"]])
def test_lab_refuses_an_unknown_vm_before_anything(tripped_lab, monkeypatch, capsys, argv):
    from lab.definition import load

    monkeypatch.setattr(tripped_lab, "load", load)  # the real lab.yaml, read only
    assert tripped_lab.main(argv) == 2
    assert "no VM 'nosuchvm'" in capsys.readouterr().err


def test_lab_ssh_help_scope():
    from lab import cli

    assert cli._help_for(["ssh", "db1", "--help"]) == "ssh"
    assert cli._help_for(["ssh", "db1", "zfs", "--help"]) is None  # zfs's, on the VM
    assert cli._help_for(["up", "db1", "-h"]) == "up"
    assert cli._help_for(["-h"]) == ""
    assert cli._help_for(["up", "db1"]) is None


def test_bench_misuse_and_a_broken_lab_definition_exit_2(monkeypatch, capsys):
    from bench import run
    from lab.definition import LabDefinitionError

    monkeypatch.setattr(run, "bench", Tripwire("bench"))
    monkeypatch.setattr(run, "converge_only", Tripwire("converge_only"))
    for argv in (["--converge", "--quick"], ["--engine", "oracle"], ["--nosuch"]):
        with pytest.raises(SystemExit) as e:
            run.main(argv)
        assert e.value.code == 2, argv

    def broken():
        raise LabDefinitionError("not valid YAML", file="lab/lab.yaml")

    monkeypatch.setattr(run.definition, "load", broken)
    assert run.main(["--quick"]) == 2
    assert "refused (nothing was run)" in capsys.readouterr().err


def test_zfs_repo_misuse_and_a_broken_lab_definition_exit_2(monkeypatch, tmp_path, capsys):
    import zfsrepo.__main__ as zfs_repo
    from lab.definition import LabDefinitionError

    monkeypatch.setattr(zfs_repo, "image", Tripwire("image"))
    monkeypatch.setattr(zfs_repo, "publish", Tripwire("publish"))
    for argv in ([], ["--out", str(tmp_path), "--kernel", "6.1; rm -rf /"], ["--nosuch"]):
        with pytest.raises(SystemExit) as e:
            zfs_repo.main(argv)
        assert e.value.code == 2, argv

    def broken():
        raise LabDefinitionError("not valid YAML", file="lab/lab.yaml")

    monkeypatch.setattr(zfs_repo, "load", broken)
    assert zfs_repo.main(["--out", str(tmp_path)]) == 2
    assert "refused (nothing was built)" in capsys.readouterr().err


@pytest.mark.parametrize("runbook", sorted(p.name for p in (REPO / "runbooks").glob("*.py")))
def test_a_runbooks_help_is_pyinfras_and_runs_nothing(runbook):
    """`pyinfra INVENTORY runbooks/X.py ... --help`: pyinfra's eager --help prints its usage and
    exits 0 before it loads the inventory, connects or loads the runbook (an inventory that does
    not exist proves it: loading it would fail)."""
    r = subprocess.run(
        [str(REPO / ".venv" / "bin" / "pyinfra"), "no-such-inventory.py", f"runbooks/{runbook}"]
        + ["--data", "host=db2", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("Usage: pyinfra"), r.stdout[:200]
    assert "Connecting" not in r.stdout + r.stderr and "Loading" not in r.stdout + r.stderr


def test_deploy_py_run_with_pyinfra_exits_2_on_refused_data(tmp_path):
    """The convention holds without ./dbzfs too: pyinfra itself on deploy.py with data the
    validation refuses stops before any operation with exit status 2 (pyinfra's own is 1). The
    host is this machine (@local): nothing is connected to but a local shell, nothing is run."""
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = [("@local", {"engine": "oracle", "role": "primary"})]\n')
    secrets = tmp_path / "secrets.yml"
    secrets.write_text("replication_password: x\n")
    secrets.chmod(0o600)
    r = subprocess.run(
        [str(REPO / ".venv" / "bin" / "pyinfra"), str(inventory), "deploy.py", "--dry"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DBZFS_SECRETS_FILE": str(secrets)},
    )
    out = r.stdout + r.stderr
    assert r.returncode == 2, out[-3000:]
    assert "engine = 'oracle': unknown engine" in out
    assert "Detected changes" not in out
