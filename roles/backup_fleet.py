"""Who backs up whom, and the backup key: what the backup host's role (roles/backup.py) and the
roles that ship to it (roles/binlogs.py, roles/pgbackrest.py) share."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence

from pyinfra import host, inventory

from model.hostdata import HostConfig
from operations import runtime
from roles import engine

ROLE = "backup"
SECRET = "backup_ssh_private_key"
COPIES = "backup"  # <pool>/backup holds the copies


def configs() -> list[HostConfig]:
    """Every inventory host's settings, whatever --limit selects."""
    return [HostConfig.from_data(h.name, h.data) for h in inventory]


def backup_hosts(hosts: Sequence[HostConfig]) -> list[HostConfig]:
    return [h for h in hosts if h.is_backup_host]


def database_hosts(hosts: Sequence[HostConfig]) -> list[HostConfig]:
    return [h for h in hosts if not h.is_backup_host and h.engine]


def copies_root(cfg: HostConfig) -> str:
    return f"{cfg.pool.name}/{COPIES}"


_public_keys: dict[str, str] = {}


def public_key(private_text: str) -> str:
    """The OpenSSH public key of a private key's text (ssh-keygen -y on the machine running the
    deploy; the private key only ever in a mode 600 file of a private temporary directory)."""
    if private_text not in _public_keys:
        with tempfile.TemporaryDirectory(prefix="dbzfs-key-") as tmp:
            path = os.path.join(tmp, "key")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(key_text(private_text))
            result = subprocess.run(
                ["ssh-keygen", "-y", "-f", path], capture_output=True, text=True, check=False
            )
        if result.returncode != 0 or not result.stdout.strip():
            raise ValueError("not an OpenSSH private key without a passphrase (ssh-keygen -y refused it)")
        _public_keys[private_text] = result.stdout.split()[0] + " " + result.stdout.split()[1]
    return _public_keys[private_text]


def key_text(private_text: str) -> str:
    """ssh reads a key file only when it ends with a newline."""
    return private_text if private_text.endswith("\n") else private_text + "\n"


def secret_public_key(secret: str) -> str:
    """The public half of the key in `secret`, or stop the run naming the host and the secret."""
    try:
        return public_key(engine.secret(secret).unmask())
    except ValueError as exc:
        raise runtime.Refused(f"{host.name}: secret {secret!r}: {exc}") from None
