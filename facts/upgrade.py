"""What a host's release upgrade reads before it changes anything: its apt source files (their
exact text), and a script's output (the probe of day2/upgrade_probe.py, which day2 parses)."""

from __future__ import annotations

import base64

from pyinfra.api import FactBase, QuoteString, StringCommand

SOURCE_FILES = "/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources"


class AptSourceFiles(FactBase):
    """
    The host's apt source files and their text (read as base64: kept byte for byte).

    .. code:: python

        {"/etc/apt/sources.list": "deb http://deb.debian.org/debian bookworm main\\n", ...}
    """

    def command(self) -> StringCommand:
        return StringCommand(
            f'for f in {SOURCE_FILES}; do [ -f "$f" ] && echo "file=$f $(base64 -w0 < "$f")"; done;',
            "echo end=1",
        )

    def process(self, output: list[str]) -> dict[str, str]:
        files = {}
        for line in output:
            if line.startswith("file="):
                path, _, encoded = line[len("file=") :].partition(" ")
                files[path] = base64.b64decode(encoded).decode()
        return files


class ScriptOutput(FactBase):
    """The lines a bash script prints (it must end with its own completion marker: a script cut
    short is told from one that finished by what it printed, not by an exit code)."""

    def command(self, script: str) -> StringCommand:
        return StringCommand("bash", "-c", QuoteString(script))

    def process(self, output: list[str]) -> list[str]:
        return list(output)
