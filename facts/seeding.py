"""
What the seeding runbook (runbooks/seed.py) reads of a member of a replication group before it
changes anything, in one command: whether its server is installed and running, whether its data
directory holds a database, its service account's ids and its SSH host key.
"""

from __future__ import annotations

from typing import Any

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"


class SeedHostState(FactBase):
    """
    A member's server and data directory, with no server needed.

    .. code:: python

        {
            "installed": True,           # the server binary exists
            "active": "inactive",        # systemctl is-active of its unit ("" without systemd)
            "uid": "105", "gid": "111",  # the service account ("" when it does not exist)
            "host_key": "ssh-ed25519 AAAA... root@db2",  # HOST_KEY, "" when missing
            "pg_version": "15",          # DATA/PG_VERSION ("" when none)
            "directories": ["mysql", "app"],  # directories in DATA ([] when none or missing)
        }
    """

    @override
    def command(self, unit: str, account: str, server_binary: str, data_path: str) -> StringCommand:
        data = QuoteString(data_path)
        return StringCommand(
            "echo installed=$(test -x",
            QuoteString(server_binary),
            "&& echo yes);",
            "echo active=$(systemctl is-active",
            QuoteString(unit),
            "2>/dev/null);",
            "echo uid=$(id -u",
            QuoteString(account),
            "2>/dev/null);",
            "echo gid=$(id -g",
            QuoteString(account),
            "2>/dev/null);",
            "echo host_key=$(cat",
            HOST_KEY,
            "2>/dev/null);",
            "echo pg_version=$(cat",
            QuoteString(f"{data_path}/PG_VERSION"),
            "2>/dev/null);",
            "test -d",
            data,
            "&& find",
            data,
            "-mindepth 1 -maxdepth 1 -type d -printf 'directory=%f\\n';",
            "echo end=1",
        )

    @override
    def process(self, output: list[str]) -> dict[str, Any]:
        found: dict[str, Any] = {"directories": []}
        for line in output:
            key, _, value = line.partition("=")
            if key == "directory":
                found["directories"].append(value)
            else:
                found[key] = value.strip()
        return {
            "installed": found.get("installed") == "yes",
            "active": found.get("active", ""),
            "uid": found.get("uid", ""),
            "gid": found.get("gid", ""),
            "host_key": found.get("host_key", ""),
            "pg_version": found.get("pg_version", ""),
            "directories": sorted(found["directories"]),
        }
