"""Facts about a pgBackRest repository (roles/pgbackrest.py), read where it is: the backup host."""

from __future__ import annotations

import json

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

# `pgbackrest info`'s status codes (doc: "info" command, status)
MISSING_STANZA_PATH = 1
NO_VALID_BACKUP = 2
MISSING_STANZA_DATA = 3


class PgbackrestInfo(FactBase):
    """
    Returns a stanza as ``pgbackrest info --output=json`` describes it on the repository's host,
    None where pgBackRest is not installed.

    .. code:: python

        {
            "status": 0,
            "message": "ok",
            "backups": [
                {"label": "20261205-061000F", "type": "full", "start": 1764915000, "stop": 1764915012,
                 "lsn_start": "0/5000028", "lsn_stop": "0/5000100"},
            ],
            "archive": {"min": "000000010000000000000005", "max": "000000010000000000000009"},
        }
    """

    @override
    def requires_command(self, stanza: str) -> str:
        return "pgbackrest"

    @override
    def command(self, stanza: str) -> StringCommand:
        return StringCommand(
            "runuser -u postgres -- pgbackrest --log-level-console=error --output=json",
            QuoteString(f"--stanza={stanza}"),
            "info",
        )

    @override
    def process(self, output: list[str]) -> dict:
        return parse_info(output)


def parse_info(output: list[str]) -> dict:
    stanzas = json.loads("\n".join(output) or "[]")
    if not stanzas:
        return {"status": MISSING_STANZA_PATH, "message": "missing stanza path", "backups": [], "archive": {}}
    stanza = stanzas[0]
    backups = [
        {
            "label": b["label"],
            "type": b["type"],
            "start": b["timestamp"]["start"],
            "stop": b["timestamp"]["stop"],
            "lsn_start": (b.get("lsn") or {}).get("start"),
            "lsn_stop": (b.get("lsn") or {}).get("stop"),
        }
        for b in stanza.get("backup", [])
    ]
    archives = stanza.get("archive") or []
    archive = {"min": archives[-1].get("min"), "max": archives[-1].get("max")} if archives else {}
    return {
        "status": stanza["status"]["code"],
        "message": stanza["status"]["message"],
        "backups": backups,
        "archive": archive,
    }
