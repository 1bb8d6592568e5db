"""Checks run inside a pyinfra deploy before any operation is added."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import gevent
from gevent.event import AsyncResult
from pyinfra import inventory, state
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.host import Host
from pyinfra.context import ctx_host

from roles import secrets, validation

_validated: set[int] = set()
T = TypeVar("T")


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
        raise PyinfraError(str(exc)) from None
    data = {h.name: {k: v for k, v in h.data.dict().items() if k not in parameters} for h in inventory}
    problems = validation.validate(data, loaded)
    if problems:
        raise PyinfraError("\n" + validation.format_problems(problems))
    _validated.add(id(state))


_once: dict[tuple[int, str], AsyncResult] = {}


def once_per_run(name: str, compute: Callable[[], T]) -> T:
    """`compute()` once per pyinfra run, whichever host's deploy gets here first; the other hosts'
    deploys (run in parallel while pyinfra prepares) wait for that answer, or its exception."""
    key = (id(state), name)
    if key not in _once:
        _once[key] = result = AsyncResult()
        try:
            result.set(compute())
        except Exception as exc:  # every host's deploy raises it
            result.set_exception(exc)
    return _once[key].get()


def on_every_host(hosts: Iterable[Host], read: Callable[[Host], T]) -> list[T]:
    """`read(host)` for each host at once (each in its host's context), in the order given."""

    def one(h: Host) -> T:
        with ctx_host.use(h):
            return read(h)

    greenlets = [gevent.spawn(one, h) for h in hosts]
    gevent.joinall(greenlets, raise_error=True)
    return [g.value for g in greenlets]
