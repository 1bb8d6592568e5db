"""A problem in the input (the inventory file, a host's data, a runbook's argument): one message
naming the host, the key, the value as written, what is wrong and the fix. Every check of the
toolkit reports in this shape, before any host is touched."""

from __future__ import annotations

from dataclasses import dataclass


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Problem:
    """One mistake: the host (None for the inventory file as a whole), the key (or "line N" of
    the file), the value as written, what is wrong and the fix."""

    host: str | None
    key: str
    value: object
    message: str
    fix: str

    def __str__(self) -> str:
        value = self.value if _is_number(self.value) else repr(self.value)
        text = f"{self.key} = {value}: {self.message}"
        if self.host is not None:
            text = f"{self.host}: {text}"
        return f"{text}. Fix: {self.fix}" if self.fix else text


class ValidationError(Exception):
    def __init__(self, problems: list[Problem], source: str | None = None):
        self.problems = problems
        self.source = source
        super().__init__(format_problems(problems, source))


class InventoryError(Exception):
    """The inventory file itself is wrong (missing, not Python, no hosts, a host twice): its
    problems, reported like the data's, before any host is looked at."""

    def __init__(self, problems: list[Problem], source: str):
        self.problems = problems
        self.source = source
        super().__init__(format_problems(problems, source, what="in the inventory file"))


def format_problems(
    problems: list[Problem], source: str | None = None, what: str = "in the inventory data"
) -> str:
    """The report: one header naming the inventory file (when known), one line per problem."""
    where = f"{source}: " if source else ""
    lines = [f"{where}{len(problems)} problem(s) {what}; no host was changed:"]
    lines += [f"  - {p}" for p in problems]
    return "\n".join(lines)
