"""What the rules that check host data work with (pure: no pyinfra).

Each concern's rules live with the code that owns its keys (roles/zfs_checks.py,
roles/engine_checks.py, roles/backup_checks.py, ...); validation/checks.py runs them all, in one
order, over a `Context`: the hosts' data with every key of the wrong type left out (its type was
reported once), their HostConfigs, the secrets, and the problems found so far. A rule reads a key
only when `ctx.ok(cfg, key)` (its type was right) and reports with `ctx.add(host, key, value,
message, fix)`.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from model import keys, secrets as secrets_mod
from model.hostdata import HostConfig
from model.problems import Problem

# How the messages name each kind of value (model/keys.py's kinds).
KIND_WORDS = {
    keys.STRING: "a string",
    keys.INTEGER: "an integer",
    keys.NUMBER: "a number",
    keys.BOOLEAN: "a boolean",
    keys.LIST: "a list",
    keys.MAPPING: "a mapping",
}
ENGINES = keys.choices("engine")


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def kind_of(value: object) -> str:
    """What a value is, in the words the messages use."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "a list"
    return f"a {type(value).__name__}"


def has_kind(value: object, kind: str) -> bool:
    """`value` is of `kind` (one of model/keys.py's kinds)."""
    if kind == keys.STRING:
        return isinstance(value, str)
    if kind == keys.INTEGER:
        return is_int(value)
    if kind == keys.LIST:
        return isinstance(value, (list, tuple))
    if kind == keys.BOOLEAN:
        return isinstance(value, bool)
    if kind == keys.NUMBER:
        return is_int(value) or (isinstance(value, float) and math.isfinite(value))
    return isinstance(value, Mapping)


def close(word: str, choices: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(word, sorted(choices), n=3, cutoff=0.75)


class Context:
    def __init__(self, secrets: secrets_mod.Secrets):
        self.problems: list[Problem] = []
        self.secrets = secrets
        # Per host: the keys whose type is wrong (reported once; rules reading them are skipped).
        self.bad: dict[str, set[str]] = {}
        # Per host: its data without those keys, so HostConfig and the rules never see them.
        self.data: dict[str, dict] = {}
        self.cfg: dict[str, HostConfig] = {}
        # Hosts whose parent, data and log datasets are named and declared (roles/zfs_checks.py).
        self.named: set[str] = set()

    def add(self, host: str | None, key: str, value: object, message: str, fix: str = "") -> None:
        self.problems.append(Problem(host, key, value, message, fix))

    def ok(self, c: HostConfig | str, *names: str) -> bool:
        """None of these keys had the wrong type (so rules may read them)."""
        name = c if isinstance(c, str) else c.name
        return not (self.bad.get(name, set()) & set(names))

    def choice(self, c: HostConfig, key: str, value: object) -> bool:
        """The check of a key with a fixed set of values (its choices in model/keys.py); False
        when it reported one. A key of the wrong type is not checked again."""
        problem = keys.KEYS[key].choice_problem(value) if self.ok(c, key) else None
        if problem:
            self.add(c.name, key, value, *problem)
        return problem is None

    # --- nested types, shared by the owners' type checks ----------------------------------------

    def type_items(self, name: str, key: str, items: Sequence[Any], kind: str, example: str) -> bool:
        """Every item of a list is of `kind` (model/keys.py's)."""
        good = True
        for i, item in enumerate(items):
            if not has_kind(item, kind):
                self.add(
                    name,
                    f"{key}[{i}]",
                    item,
                    f"must be {KIND_WORDS[kind]}, not {kind_of(item)}",
                    f"e.g. {example}",
                )
                good = False
        return good

    def type_engine_keys(self, name: str, key: str, value: Mapping[Any, Any]) -> bool:
        """A mapping keyed by engine: no other keys, each value a mapping."""
        good = True
        for engine, per_engine in value.items():
            where = f"{key}[{engine!r}]"
            if engine not in ENGINES:
                self.add(name, where, per_engine, "not an engine", f"key it by engine: {list(ENGINES)}")
                good = False
            elif not isinstance(per_engine, Mapping):
                self.add(
                    name,
                    where,
                    per_engine,
                    f"must be a mapping, not {kind_of(per_engine)}",
                    "keep the shape of the default in group_data/all.py",
                )
                good = False
        return good
