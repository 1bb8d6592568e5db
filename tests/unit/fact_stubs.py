"""Drive pyinfra operations without a host: a stand-in host whose facts are stubs.

pyinfra operations keep their undecorated generator as `op._inner`; running it inside
`ctx_host.use(...)` makes `from pyinfra import host` resolve to the stand-in.
"""

from __future__ import annotations

from pathlib import Path

from pyinfra.context import ctx_host

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_lines(relative: str) -> list[str]:
    """A fixture as pyinfra hands command output to FactBase.process: lines, no newlines."""
    return (FIXTURES / relative).read_text().splitlines()


class FakeHost:
    name = "db1.example.net"
    print_prefix = "[db1.example.net] "

    def __init__(self, facts: dict):
        self.facts = facts
        self.fact_calls: list = []
        self.noops: list[str] = []

    def get_fact(self, cls, *args, **kwargs):
        self.fact_calls.append((cls, args, kwargs))
        if cls not in self.facts:
            raise AssertionError(f"unexpected fact {cls.__name__}({kwargs})")
        value = self.facts[cls]
        return value(*args, **kwargs) if callable(value) else value

    def noop(self, description: str) -> None:
        self.noops.append(description)


def run_operation(op, facts: dict, *args, **kwargs):
    """(commands as shell strings, the fake host) for one run of `op` against `facts`."""
    host = FakeHost(facts)
    with ctx_host.use(host):
        commands = [str(command) for command in op._inner(*args, **kwargs)]
    return commands, host
