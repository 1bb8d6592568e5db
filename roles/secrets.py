"""Secrets (replication and application passwords): from the environment or a YAML file kept
outside the repository. Never from host data, never logged.

    DBZFS_SECRET_<KEY>   one secret, e.g. DBZFS_SECRET_REPLICATION_PASSWORD
    DBZFS_SECRETS_FILE   a YAML mapping of key -> secret (default ~/.config/dbzfs/secrets.yml);
                         must be outside the repository and readable by its owner only
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Mapping

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_PREFIX = "DBZFS_SECRET_"
FILE_ENV = "DBZFS_SECRETS_FILE"
DEFAULT_FILE = "~/.config/dbzfs/secrets.yml"
REPLICATION_PASSWORD = "replication_password"


class SecretsError(Exception):
    pass


class Secrets:
    def __init__(self, values: Mapping[str, str], source: str):
        self._values = dict(values)
        self.source = source

    def get(self, key: str) -> str | None:
        return self._values.get(key)

    def __contains__(self, key: str) -> bool:
        return bool(self._values.get(key))

    def __repr__(self) -> str:  # never print values
        return f"Secrets(keys={sorted(self._values)}, source={self.source!r})"


def _file_path(environ: Mapping[str, str]) -> Path:
    return Path(os.path.expanduser(environ.get(FILE_ENV) or DEFAULT_FILE))


def load(environ: Mapping[str, str] | None = None) -> Secrets:
    environ = os.environ if environ is None else environ
    values: dict[str, str] = {}
    path = _file_path(environ)
    sources = []
    if path.exists():
        real = path.resolve()
        if real == REPO_ROOT or REPO_ROOT in real.parents:
            raise SecretsError(f"secrets file {path} is inside the repository; keep it outside "
                               "(e.g. ~/.config/dbzfs/secrets.yml)")
        mode = real.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SecretsError(f"secrets file {path} is readable by others (mode "
                               f"{stat.S_IMODE(mode):04o}); run: chmod 600 {path}")
        loaded = yaml.safe_load(real.read_text()) or {}
        if not isinstance(loaded, dict):
            raise SecretsError(f"secrets file {path} must hold a mapping of key: secret")
        values.update({str(k): str(v) for k, v in loaded.items() if v is not None})
        sources.append(str(path))
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX) and value:
            values[name[len(ENV_PREFIX):].lower()] = value
            sources.append(name)
    return Secrets(values, ", ".join(sources) or
                   f"no {ENV_PREFIX}* variables, no file at {path}")


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper()
