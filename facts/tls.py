"""Facts for TLS (roles/tls.py, operations/tls.py)."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase
from typing_extensions import override


class PemFile(FactBase):
    """A PEM file's text (a certificate: nothing secret), or None when absent."""

    @override
    def command(self, path: str) -> str:
        q = shlex.quote(path)
        return f"if [ -f {q} ]; then cat {q}; else echo '<absent>'; fi"

    @override
    def process(self, output: list[str]) -> str | None:
        text = "\n".join(output).strip()
        return None if text == "<absent>" else text + "\n"


class KeyState(FactBase):
    """Whether the private key exists, and its owner and mode (never its content)."""

    @override
    def command(self, path: str) -> str:
        q = shlex.quote(path)
        return f"if [ -f {q} ]; then stat -c 'owner=%U:%G mode=%a' {q}; else echo absent; fi"

    @override
    def process(self, output: list[str]) -> dict:
        line = " ".join(output).strip()
        if line == "absent":
            return {"exists": False}
        fields = dict(part.split("=", 1) for part in line.split())
        return {"exists": True, "owner": fields["owner"], "mode": fields["mode"]}
