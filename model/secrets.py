"""Secrets (replication and application passwords): from the environment or a YAML file kept
outside the repository. Never from host data, never logged.

    DBZFS_SECRET_<KEY>   one secret, e.g. DBZFS_SECRET_REPLICATION_PASSWORD
    DBZFS_SECRETS_FILE   a YAML mapping of key -> secret (default ~/.config/dbzfs/secrets.yml);
                         must be outside the repository and readable by its owner only
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

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
            raise SecretsError(
                f"secrets file {path} is inside the repository; keep it outside "
                "(e.g. ~/.config/dbzfs/secrets.yml)"
            )
        mode = real.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SecretsError(
                f"secrets file {path} is readable by others (mode "
                f"{stat.S_IMODE(mode):04o}); run: chmod 600 {path}"
            )
        values.update(_read_file(path, real))
        sources.append(str(path))
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX) and value:
            values[name[len(ENV_PREFIX) :].lower()] = value
            sources.append(name)
    return Secrets(values, ", ".join(sources) or f"no {ENV_PREFIX}* variables, no file at {path}")


_STR_TAG = "tag:yaml.org,2002:str"
_NULL_TAG = "tag:yaml.org,2002:null"


def _read_file(path: Path, real: Path) -> dict[str, str]:
    """key -> secret from a flat YAML mapping. Every error names the file and the line (and
    column) only: YAML's own messages quote the file, and that would print secrets."""

    def error(what: str, mark: yaml.Mark | None = None, fix: str = "") -> SecretsError:
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return SecretsError(
            f"secrets file {path}{where}: {what}. Fix: "
            + (
                fix
                or "one 'key: secret' per line, e.g. replication_password: "
                "'...' (quote secrets holding : # ' or \")"
            )
        )

    try:
        text = real.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise error("not UTF-8 text", fix="save it as UTF-8") from None
    except OSError as exc:
        raise SecretsError(
            f"secrets file {path}: cannot read it ({exc.strerror}). Fix: make it "
            "readable by its owner (chmod 600)"
        ) from None
    try:
        # Nodes, not Python values: YAML would turn a secret written as yes, 0123 or 1e3 into
        # True, 83 or 1000.0; the secret is the text as written.
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        raise error("not valid YAML", exc.problem_mark or exc.context_mark) from None
    except yaml.YAMLError:
        raise error("not valid YAML") from None
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        kind = "a list" if isinstance(root, yaml.SequenceNode) else "a single value"
        raise error(f"holds {kind}, not a mapping of key: secret", root.start_mark)
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    for key, value in root.value:
        if not (isinstance(key, yaml.ScalarNode) and key.tag == _STR_TAG and key.value):
            raise error("a key must be a name (text), e.g. replication_password", key.start_mark)
        if not isinstance(value, yaml.ScalarNode):
            kind = "a list" if isinstance(value, yaml.SequenceNode) else "a mapping"
            raise error(f"the value is {kind}, not one secret", value.start_mark)
        if key.value in lines:
            raise error(
                f"a key repeats the one on line {lines[key.value]}", key.start_mark, "keep one line per key"
            )
        lines[key.value] = key.start_mark.line + 1
        if value.tag != _NULL_TAG:
            values[key.value] = value.value
    return values


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper()
