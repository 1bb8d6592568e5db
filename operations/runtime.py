"""Helpers for code that runs inside a pyinfra deploy: work done once per run whichever host's
deploy gets there first, and reads made on several hosts at once."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import gevent
from gevent.event import AsyncResult
from pyinfra import state
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.host import Host
from pyinfra.context import ctx_host

T = TypeVar("T")

# The exit status of a run a check refused before any change (the toolkit's convention: 0 done,
# 1 failed, 2 refused or misused). pyinfra exits 1 on every PyinfraError.
REFUSED = 2


class Refused(PyinfraError):
    """A check refused the run before any operation changed anything: bad inventory data, a bad
    runbook argument, a live state the run must not act on. Inside `refusals_exit_2()` (deploy.py
    and every runbook) the run stops with exit status 2 instead of pyinfra's 1."""


_refusals_shown: set[int] = set()


@contextmanager
def refusals_exit_2() -> Iterator[None]:
    """Around a deploy file's body: a Refused raised while pyinfra prepares the operations (in
    any host's deploy) is printed once and ends the run with exit status 2, pyinfra's connections
    closed as after any other error. Everything else goes on as pyinfra's own error handling."""
    try:
        yield
    except Refused as exc:
        if id(state) not in _refusals_shown:
            _refusals_shown.add(id(state))
            print(f"--> refused (exit {REFUSED}):{exc}", file=sys.stderr, flush=True)
        raise SystemExit(REFUSED) from None


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
