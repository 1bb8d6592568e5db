"""lab/control.py offline: the lab's throwaway secrets file (lab_env) and `status` with a VM that
runs no database. Never the lab's real files or VMs: SECRETS points into tmp_path, and no VM is
asked whether it runs."""

import os
import stat
import subprocess

import pytest
import yaml

from lab import control, definition
from model import secrets as secrets_mod

KEY = control.BACKUP_SSH_KEY


@pytest.fixture
def secrets_file(tmp_path, monkeypatch):
    path = tmp_path / "cache" / "lab-secrets.yml"
    monkeypatch.setattr(control, "SECRETS", path)
    monkeypatch.delenv("DBZFS_SECRETS_FILE", raising=False)
    # ssh-keygen's key files go to a temporary directory of their own under here: none may stay
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    return path


def public_key(private_text, tmp_path):
    path = tmp_path / "check-key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(private_text)
    try:
        return subprocess.run(
            ["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True
        ).stdout
    finally:
        path.unlink()


def test_the_backup_key_is_generated_with_the_passwords_and_reads_back_as_written(secrets_file, tmp_path):
    assert KEY in control.LAB_SECRETS
    env = control.lab_env()
    assert env["DBZFS_SECRETS_FILE"] == str(secrets_file)
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    assert os.listdir(tmp_path / "scratch") == []  # ssh-keygen's files are gone
    assert not secrets_file.with_suffix(".tmp").exists()
    text = secrets_file.read_text()
    assert f"{KEY}: |\n  -----BEGIN OPENSSH PRIVATE KEY-----\n" in text  # a literal block scalar
    held = yaml.safe_load(text)
    key = held[KEY]
    assert key.startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert key.endswith("-----END OPENSSH PRIVATE KEY-----\n") and key.count("\n") > 3
    # the deploy reads the file with model/secrets.py: the scalar's text, the same key
    loaded = secrets_mod.load({"DBZFS_SECRETS_FILE": str(secrets_file)})
    assert {k: loaded.get(k) for k in control.LAB_SECRETS} == {k: held[k] for k in control.LAB_SECRETS}
    assert all(loaded.get(k) for k in control.LAB_SECRETS)
    public = public_key(loaded.get(KEY), tmp_path)
    assert public.startswith("ssh-ed25519 ") and public.split()[2] == f"dbzfs-lab-{KEY}"


def test_the_pgbackrest_key_is_a_second_key_of_its_own(secrets_file, tmp_path):
    assert control.PGBACKREST_SSH_KEY == "pgbackrest_ssh_private_key" in control.LAB_SECRETS
    control.lab_env()
    text = secrets_file.read_text()
    assert f"{control.PGBACKREST_SSH_KEY}: |\n  -----BEGIN OPENSSH PRIVATE KEY-----\n" in text
    loaded = secrets_mod.load({"DBZFS_SECRETS_FILE": str(secrets_file)})
    backup_public = public_key(loaded.get(KEY), tmp_path).split()
    pgbackrest_public = public_key(loaded.get(control.PGBACKREST_SSH_KEY), tmp_path).split()
    assert pgbackrest_public[0] == "ssh-ed25519"
    assert pgbackrest_public[2] == "dbzfs-lab-pgbackrest_ssh_private_key"
    assert pgbackrest_public[1] != backup_public[1]  # not the backup host's key again


def test_an_older_file_keeps_its_secrets_and_gains_the_key(secrets_file):
    secrets_file.parent.mkdir()
    fd = os.open(secrets_file, os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("replication_password: old-replication\nlab_app_password: old-app\n")
    control.lab_env()
    held = yaml.safe_load(secrets_file.read_text())
    assert held["replication_password"] == "old-replication" and held["lab_app_password"] == "old-app"
    assert held[KEY].startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert held[control.PGBACKREST_SSH_KEY].startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    written = secrets_file.read_text()
    control.lab_env()  # nothing missing: the file stays as it is
    assert secrets_file.read_text() == written


def test_a_file_with_the_backup_key_keeps_it_and_gains_the_pgbackrest_key(secrets_file):
    """A lab secrets file written before pgBackRest: the backup host's key stays the same."""
    secrets_file.parent.mkdir()
    backup_key = control.ssh_private_key()
    fd = os.open(secrets_file, os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(control.dump_secrets({"replication_password": "r", "lab_app_password": "a", KEY: backup_key}))
    control.lab_env()
    held = yaml.safe_load(secrets_file.read_text())
    assert held[KEY] == backup_key
    assert held[control.PGBACKREST_SSH_KEY].startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert held[control.PGBACKREST_SSH_KEY] != backup_key
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600


def test_an_explicit_secrets_file_wins(secrets_file, monkeypatch, tmp_path):
    monkeypatch.setenv("DBZFS_SECRETS_FILE", str(tmp_path / "mine.yml"))
    assert control.lab_env()["DBZFS_SECRETS_FILE"] == str(tmp_path / "mine.yml")
    assert not secrets_file.exists()


@pytest.mark.parametrize(
    "text",
    ["line one\nline two\n", "no newline at the end\nsecond", "  indented\nnext\n", "one line"],
)
def test_the_secrets_dump_round_trips(text, tmp_path):
    path = tmp_path / "secrets.yml"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(control.dump_secrets({"a": text, "b": "plain-token_xyz"}))
    assert yaml.safe_load(path.read_text()) == {"a": text, "b": "plain-token_xyz"}
    loaded = secrets_mod.load({"DBZFS_SECRETS_FILE": str(path)})
    assert (loaded.get("a"), loaded.get("b")) == (text, "plain-token_xyz")


def test_status_shows_a_backup_vm_with_no_engine(monkeypatch):
    monkeypatch.setattr(control.vmmod, "pid", lambda vm: None)
    monkeypatch.setattr(control.aptcache, "answers", lambda port: False)
    monkeypatch.setattr(control.image, "is_built", lambda lab, variant: False)
    lines = []
    rows = control.status(definition.load(), log=lines.append)
    assert list(rows) == ["db1", "db2", "pg1", "pg2", "db3", "bare1", "backup1", "bench1"]
    header = next(line for line in lines if line.startswith("VM "))
    row = next(line for line in lines if line.startswith("backup1 "))
    db1 = next(line for line in lines if line.startswith("db1 "))
    assert row.split()[:7] == ["backup1", "stopped", "127.0.0.1:2251", "-", "10.99.0.51", "-", "backup"]
    assert db1.split()[5:7] == ["mariadb", "primary"]
    assert header.index("engine") == row.index("10.99.0.51") + 13 == db1.index("mariadb")


@pytest.mark.parametrize("with_backup", [False, True])
def test_converge_with_the_backup_host_boots_it_and_uses_its_inventory(monkeypatch, with_backup):
    lab = definition.load()
    booted, commands = [], []
    monkeypatch.setattr(control, "up", lambda lab, names, log: booted.extend(names) or lab)
    monkeypatch.setattr(control, "lab_env", lambda: {})
    monkeypatch.setattr(
        control.subprocess,
        "run",
        lambda argv, **kw: commands.append(argv) or subprocess.CompletedProcess(argv, 0),
    )
    control.converge(lab, log=lambda _: None, with_backup=with_backup)
    assert booted == [*lab.names, *(["backup1"] if with_backup else [])]
    inventory = control.BACKUP_INVENTORY if with_backup else control.INVENTORY
    assert commands[0][-2:] == [str(inventory), "deploy.py"]
    hosts = next(a for a in commands[1] if a.startswith("--hosts="))
    assert ("paramiko://backup1" in hosts) == with_backup
    assert f"--inventory={control.rel(inventory)}" in commands[1]


def test_pruning_keeps_the_current_images_of_every_release(tmp_path, monkeypatch):
    import dataclasses
    import os

    from lab import control, image
    from lab.definition import load

    monkeypatch.setattr(image, "IMAGES", tmp_path)
    lab = load()
    mine = {}
    for suite in ("trixie", "bookworm"):
        other = dataclasses.replace(lab, image={**lab.image, "suite": suite})
        for v in image.VARIANTS:
            mine[(suite, v)] = image.path(other, v)
    old = [tmp_path / f"old{i}" for i in range(3)]
    for i, d in enumerate([*old, *mine.values()]):
        d.mkdir()
        (d / "manifest.json").write_text("{}")
        os.utime(d / "manifest.json", (1000 + i, 1000 + i))
    control.prune_images(lab, keep=2, log=lambda _: None)
    assert all(d.exists() for d in mine.values())
    assert not any(d.exists() for d in old)
