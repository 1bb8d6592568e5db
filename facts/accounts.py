"""One system account and its group, read with one command (pyinfra's Users fact runs several
commands per account on the host: tens of seconds on an emulated CPU, for the two we need)."""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand


class SystemAccount(FactBase):
    """
    The passwd entry of `account` and the group of the same name; ``None`` for what does not exist.

    .. code:: python

        {"user": {"uid": 105, "gid": 111, "home": "/nonexistent", "shell": "/bin/false"},
         "group": {"gid": 111}}
    """

    def command(self, account: str) -> StringCommand:
        return StringCommand(
            "echo",
            "user:$(getent passwd",
            QuoteString(account),
            ");",
            "echo",
            "group:$(getent group",
            QuoteString(account),
            ");",
        )

    def process(self, output: list[str]) -> dict:
        result: dict = {"user": None, "group": None}
        for line in output:
            kind, _, entry = line.partition(":")
            fields = entry.split(":")
            if kind == "user" and len(fields) >= 7:
                result["user"] = {
                    "uid": int(fields[2]),
                    "gid": int(fields[3]),
                    "home": fields[5],
                    "shell": fields[6],
                }
            elif kind == "group" and len(fields) >= 3:
                result["group"] = {"gid": int(fields[2])}
        return result
