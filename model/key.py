"""What a host data key is (model/keys.py defines every one): its kinds of value, its definition,
the sections of the reference (docs/keys.md). Pure."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# The kinds of value a key holds (validation's type pass reads them).
STRING, INTEGER, NUMBER, BOOLEAN, LIST, MAPPING = "string", "integer", "number", "boolean", "list", "mapping"
KINDS = (STRING, INTEGER, NUMBER, BOOLEAN, LIST, MAPPING)


@dataclass(frozen=True)
class Key:
    """One host data key. `default` is handed out as a copy (defaults(), default()). `choices`:
    the key's only values; a value outside them is reported as `invalid`, with `choice_fix` as
    the fix ("{choices}": the list, "{quoted}": the values quoted and comma-separated)."""

    name: str
    kind: str
    default: object
    example: str  # as validation's messages quote it: "e.g. <example>"
    doc: str  # one line: what it does
    owner: str = ""  # the module that reads it (roles.zfs, roles.pgbackrest, day2.rolling, ...)
    section: str = ""  # one of SECTIONS
    nullable: bool = False  # None is a value of its own (not "the default")
    choices: tuple[str, ...] = ()
    invalid: str = "not one of its values"
    choice_fix: str = "use one of {choices}"
    required: str = ""  # when a host must set it
    notes: str = ""  # more on what it does, for the reference
    attr: str = ""  # where HostConfig holds it, when not under its own name

    @property
    def field(self) -> str:
        return self.attr or self.name

    def choice_problem(self, value: object) -> tuple[str, str] | None:
        """(message, fix) when the key has choices and `value` is none of them."""
        if not self.choices or value in self.choices:
            return None
        quoted = ", ".join(repr(v) for v in self.choices)
        return self.invalid, self.choice_fix.format(choices=list(self.choices), quoted=quoted)


SECTIONS = {
    "host": ("What the host runs", "Set per host in the inventory."),
    "drives": ("Drives", ""),
    "zfs_install": ("ZFS install", ""),
    "pool": ("Pool", ""),
    "datasets": ("Datasets", ""),
    "snapshots": ("Snapshots", "roles/snapshots.py."),
    "backups": (
        "Backups",
        'roles/backup.py. An inventory host with role = "backup" (no engine; its own drives and pool) '
        "pulls every database host's snapshots with syncoid, as raw sends (the copy keeps the blocks' "
        "compression), into <its zpool_name>/backup/<cluster>/<host>/{data,log}. The database hosts hold "
        "no key to it: each lets the backup host's key log in as `dbzfs-backup`, from the backup host's "
        "replication_address only, and `zfs allow`s that account to send (and hold), nothing else; a "
        "database host cannot reach, change or delete the copies. The key: the secret "
        '`backup_ssh_private_key` (an OpenSSH private key\'s text: `ssh-keygen -t ed25519 -N "" -f KEY`, '
        "then the file's content).",
    ),
    "pitr": (
        "Point-in-time recovery",
        "roles/pgbackrest.py. With a backup host, every PostgreSQL host archives its WAL with pgBackRest "
        "(Debian's package) to a repository on the backup host (<its zpool_name>/pgbackrest), which takes "
        "the base backups. pgBackRest logs in both ways as postgres, for its remote protocol only: the "
        "backup host with backup_ssh_private_key, the PostgreSQL hosts with the secret "
        "`pgbackrest_ssh_private_key` (a second key made the same way). Restores: runbooks/restore.py.",
    ),
    "database": ("Database", ""),
    "monitoring": (
        "Monitoring",
        "Every database host runs node_exporter (with the ZFS textfile collector) and its engine's "
        "exporter; they listen on the host's replication_address only. A host of the inventory's "
        "`monitoring` group runs Prometheus, which scrapes every database host and loads the alert rules.",
    ),
    "alerts": ("Alert thresholds", "The pool capacity alert uses zfs_capacity_threshold (Pool)."),
    "firewall": (
        "Firewall",
        "roles/firewall.py. nftables from Debian, a table of its own (`inet dbzfs`): inbound denied "
        "but SSH from firewall_admin_networks, the group's members and the backup host; the database "
        "port from db_client_networks, the group's members and the backup host; the exporters from "
        "the Prometheus hosts. A converge whose own SSH session the new rules would not let in again "
        "is refused before any change.",
    ),
    "tls": (
        "TLS",
        "roles/tls.py. Each host's key is made on the host and never leaves it; its certificate names "
        "the host and its replication_address, signed by the fleet CA on the operator's machine "
        "(DBZFS_CA_DIR, default ~/.config/dbzfs/ca, created on first use, or the operator's own CA "
        "put there). The CA's key never reaches a host.",
    ),
}

# Shared by snapshot_retention and backup_retention: sanoid's kinds.
_KINDS_NOTE = (
    "Kinds: sanoid's names, frequently (every 15 minutes), hourly, daily, weekly, monthly, yearly; "
    "0 or absent: none of that kind."
)


def section(section: str, owner: str, *keys: Key) -> tuple[Key, ...]:
    """A section's keys; `owner` reads those that name no owner of their own."""
    return tuple(dataclasses.replace(k, section=section, owner=k.owner or owner) for k in keys)
