"""Checks run inside a pyinfra deploy before any operation is added."""

from __future__ import annotations

from pyinfra import inventory, state
from pyinfra.api.exceptions import PyinfraError

from roles import secrets, validation

_validated: set[int] = set()


def validate_inventory() -> None:
    """Validate every host's data (the whole inventory, not only --limit'ed hosts, since the
    rules span hosts). pyinfra loads deploy.py once per host: the check runs once per run and
    raises before the first host gets any operation."""
    if id(state) in _validated:
        return
    try:
        loaded = secrets.load()
    except secrets.SecretsError as exc:
        raise PyinfraError(str(exc)) from None
    problems = validation.validate({h.name: h.data.dict() for h in inventory}, loaded)
    if problems:
        raise PyinfraError("\n" + validation.format_problems(problems))
    _validated.add(id(state))
