"""scripts/bootstrap's two modes: `./dbzfs validate` and `./dbzfs deploy` need only python3-venv and
the .venv (operator mode), never the lab's qemu, vagrant or the database servers (lab mode).

The run test executes the real ./dbzfs and scripts/bootstrap (copied into a scratch tree whose other
entries link to this checkout) on a simulated operator machine: `dpkg-query` answers truthfully
for python3-venv and "not installed" for everything else, and `apt-get` is a tripwire that records
any call and fails. The validator that ./dbzfs then runs is the real one, with this venv's Python.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BOOTSTRAP = REPO / "scripts" / "bootstrap"
LAB_ONLY = ("qemu", "vagrant", "mariadb", "postgresql", "debootstrap", "apt-cacher-ng", "vde2")


def packages(*args: str) -> list[str]:
    r = subprocess.run([str(BOOTSTRAP), *args, "--list"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_operator_mode_installs_no_lab_package():
    operator = packages("operator")
    assert operator == ["python3-venv"]
    assert not [p for p in operator if any(word in p for word in LAB_ONLY)]


def test_lab_mode_installs_everything():
    lab = packages("lab")
    assert packages() == lab  # the default
    assert set(packages("operator")) <= set(lab)
    for word in ("qemu-system-x86", "vagrant", "mariadb-server", "postgresql-15", "apt-cacher-ng", "vde2"):
        assert word in lab


def test_bootstrap_rejects_an_unknown_mode():
    r = subprocess.run([str(BOOTSTRAP), "everything"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "usage" in r.stderr


def _operator_machine(tmp_path: Path) -> tuple[Path, dict[str, str], Path, Path]:
    """A scratch checkout (real dbzfs, scripts/bootstrap and requirements.txt, the rest linked)
    with an up-to-date .venv stamp, and an environment whose dpkg-query knows only python3-venv."""
    tree = tmp_path / "checkout"
    tree.mkdir()
    for entry in REPO.iterdir():
        if entry.name in (".git", ".venv", "scripts", "dbzfs", "requirements.txt", ".lab"):
            continue
        (tree / entry.name).symlink_to(entry)
    (tree / "scripts").mkdir()
    for name in ("dbzfs", "scripts/bootstrap", "requirements.txt"):
        shutil.copy2(REPO / name, tree / name)
    # The .venv this test runs in stands for the one bootstrap made: its stamp is current.
    digest = subprocess.run(
        ["sha256sum", "requirements.txt"], cwd=tree, capture_output=True, text=True, check=True
    ).stdout[:16]
    venv_bin = tree / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (tree / ".venv" / f".requirements-{digest}").touch()
    _script(venv_bin / "python", f'exec {sys.executable} "$@"')

    real_dpkg_query = shutil.which("dpkg-query")
    assert real_dpkg_query, "dpkg-query missing: this toolkit runs on Debian"
    fake = tmp_path / "bin"
    fake.mkdir()
    queried, apt_calls = tmp_path / "dpkg-query.log", tmp_path / "apt.log"
    _script(
        fake / "dpkg-query",
        f'for a; do last=$a; done; echo "$last" >> {queried}\n'
        f'case "$last" in python3-venv) exec {real_dpkg_query} "$@" ;; esac\n'
        'echo "dpkg-query: no packages found matching $last" >&2; exit 1',
    )
    for tool in ("apt-get", "apt"):
        _script(fake / tool, f'echo "{tool} $*" >> {apt_calls}; exit 97')

    env = {k: v for k, v in os.environ.items() if not k.startswith("DBZFS_SECRET")}
    env.update(
        PATH=f"{fake}:{env['PATH']}",
        HOME=str(tmp_path),  # no ~/.config/dbzfs/secrets.yml of the machine's
        DBZFS_SECRET_REPLICATION_PASSWORD="x",
        DBZFS_SECRET_BOULDER_PASSWORD="y",
        DBZFS_SECRET_HEAP_PASSWORD="z",
    )
    return tree, env, queried, apt_calls


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_validate_runs_on_a_machine_with_only_python3_venv(tmp_path):
    tree, env, queried, apt_calls = _operator_machine(tmp_path)

    for _ in range(2):  # and again: still nothing to install
        r = subprocess.run(
            [str(tree / "dbzfs"), "validate", "inventories/prod.py"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
        assert "host(s) OK" in r.stdout
        assert "bootstrap" not in r.stdout + r.stderr  # installed nothing, created no venv
    assert not apt_calls.exists(), apt_calls.read_text()
    assert queried.read_text().split() == ["python3-venv", "python3-venv"]


def test_the_lab_commands_want_the_lab_packages_on_that_machine(tmp_path):
    """The control: on the same machine `./dbzfs lab` does go for qemu, vagrant and the servers
    (an `id` that says "not root" stops it before it would touch anything)."""
    tree, env, _, apt_calls = _operator_machine(tmp_path)
    _script(tmp_path / "bin" / "id", "echo 1000")
    _script(tmp_path / "bin" / "qemu-system-x86_64", "echo 'QEMU emulator version 7.2.22'")  # bookworm's
    r = subprocess.run(
        [str(tree / "dbzfs"), "lab", "status"], cwd=tree, env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1, f"{r.stdout}\n{r.stderr}"
    assert "must run as root to install packages" in r.stderr
    wanted = r.stdout.partition("installing Debian packages:")[2].split()
    for package in ("vagrant", "mariadb-server", "postgresql-15"):
        assert package in wanted
    # qemu without the NVMe dbcs switch: the lab's qemu from backports, asked for by name
    assert {"qemu-system-x86/bookworm-backports", "qemu-utils/bookworm-backports"} <= set(wanted)
    assert "python3-venv" not in wanted
    assert not apt_calls.exists()


def test_dbzfs_sees_a_running_lab_whatever_lab_status_prints_after_it(tmp_path):
    """`lab status | grep -q` under pipefail read a running lab as stopped: grep quits at the
    first match and lab status, still writing, dies of the closed pipe."""
    fake = tmp_path / "py"
    lines = 'for i in $(seq 20000); do echo "line $i"; done\n'
    function = subprocess.run(
        ["sed", "-n", "/^lab_running()/,/^}/p", str(REPO / "dbzfs")], capture_output=True, text=True
    ).stdout
    assert function.startswith("lab_running()")
    script = f"set -euo pipefail\npy={fake}\n{function}\nif lab_running; then echo yes; else echo no; fi\n"
    for state, seen in (("running (pid 1)", "yes\n"), ("stopped", "no\n")):
        fake.write_text(f'#!/bin/bash\necho "db1    {state}"\n{lines}')
        fake.chmod(0o755)
        assert subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout == seen, state
