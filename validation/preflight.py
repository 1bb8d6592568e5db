"""The check every pyinfra deploy of ours (deploy.py, runbooks/) runs before it adds any operation:
the whole inventory's data validated once per run."""

from __future__ import annotations

from pyinfra import inventory, state

import validation
from model import secrets
from operations import runtime

_validated: set[int] = set()


def validate_inventory(parameters: tuple[str, ...] = ()) -> None:
    """Validate every host's data (the whole inventory, not only --limit'ed hosts, since the
    rules span hosts). pyinfra loads deploy.py once per host: the check runs once per run and
    raises before the first host gets any operation. `parameters`: a runbook's own keys (given
    with --data), which are not host data."""
    if id(state) in _validated:
        return
    try:
        loaded = secrets.load()
    except secrets.SecretsError as exc:
        raise runtime.Refused(str(exc)) from None
    data = {h.name: {k: v for k, v in h.data.dict().items() if k not in parameters} for h in inventory}
    problems = validation.validate(data, loaded)
    if problems:
        raise runtime.Refused("\n" + validation.format_problems(problems))
    _validated.add(id(state))
