"""Helpers for code that runs inside a pyinfra deploy: work done once per run whichever host's
deploy gets there first, and reads made on several hosts at once."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import gevent
from gevent.event import AsyncResult
from pyinfra import state
from pyinfra.api.host import Host
from pyinfra.context import ctx_host

T = TypeVar("T")

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
