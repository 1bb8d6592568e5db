"""The transfer of datasets from one host to another with `zfs send | ssh | zfs recv`, written once
for the two runbooks that do it: a seed (day2/seeding.py: a member of the group sends its
snapshots to the replica) and a MariaDB restore (day2/restore_mariadb.py: the backup host sends
a copy to the host restored). The operations are in operations/seeding.py.

The sequence, each part a function that adds its steps (every host of the run passes every
step, a no-op where it does not apply: roles/engine.step):
 1. `one_time_key` (made here, kept in memory only) and `keys_in_place`: the key authorized on
    the receiver for the receive wrapper only (with an expiry-time, from the sender's replication
    address), its private half and the receiver's pinned host key in the sender's tmpfs;
 2. the runbook's own snapshots and sends;
 3. `received_in_place`: the received datasets renamed into place (the live ones aside), the
    declared properties applied (operations.zfs.dataset, as roles/zfs.py), mounted and owned;
 4. the runbook's own start of the server (`start_mariadb` for a MariaDB replica);
 5. `keys_removed` on both hosts, the runbook's own cleanup, then `asides_destroyed` (the datasets
    renamed aside destroyed with `wipe`, else kept for the operator), the last step.
`Report` removes the one-time key from a host that fails a step (it runs no further step, its
cleanup included).
"""

from __future__ import annotations

import math
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyinfra import logger
from pyinfra.api import HiddenValue
from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files

from day2 import kit
from model import secrets
from model.hostdata import HostConfig
from model.zfs_properties import BLOCKS_COMPRESSION, blocks_record
from operations import (
    common,
    mariadb as mariadb_ops,
    mariadb_restore,
    mariadb_topology,
    seeding as ops,
    zfs as zfs_ops,
)
from roles import engine, mariadb, render
from roles.zfs import SERVICE_USERS

KEY_HOURS = 48  # the key line's expiry-time: a backstop should the cleanup never run
SPACE_MARGIN = 0.10  # over what the sent datasets reference: the catch-up, metadata
MIB = 1024**2
GIB = 1024**3
# Directories of a MariaDB datadir that are no database of its own.
MARIADB_SYSTEM_DIRECTORIES = frozenset({"mysql", "performance_schema", "sys", "lost+found"})


@dataclass(frozen=True)
class Dataset:
    """One of the datasets a transfer replaces: its name on the sender and on the receiver."""

    relative: str  # the receiver's zfs_datasets key
    source: str
    live: str

    @property
    def seed(self) -> str:
        return f"{self.live}-seed"

    @property
    def aside(self) -> str:
        return f"{self.live}-replaced"


@dataclass(frozen=True)
class Ends:
    """The two hosts of a transfer, as this host's deploy sees them."""

    me: str  # this host
    sender: HostConfig
    receiver: HostConfig
    sender_label: str  # "the source", "the backup host"
    receiver_label: str  # "the replica", "the target"

    @property
    def sends(self) -> bool:
        return self.me == self.sender.name

    @property
    def receives(self) -> bool:
        return self.me == self.receiver.name

    @property
    def not_sender(self) -> str:
        return f"not {self.sender_label} ({self.sender.name})"

    @property
    def not_receiver(self) -> str:
        return f"not {self.receiver_label} ({self.receiver.name})"


# --- pure ---------------------------------------------------------------------------------------------


def gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"


def space_needed(referenced: int, held: int) -> int:
    """Bytes the receiver's pool must have free: what the sent datasets reference (a compressed
    send writes them as stored) plus SPACE_MARGIN, less what partial receives already hold."""
    return max(0, math.ceil(referenced * (1 + SPACE_MARGIN)) - held)


def database_held(engine_name: str, server: dict) -> str:
    """What database the receiver's data directory holds ("" for none; SeedHostState)."""
    if engine_name == "postgresql":
        return f"a PostgreSQL {server['pg_version']} cluster" if server["pg_version"] else ""
    own = [d for d in server["directories"] if d not in MARIADB_SYSTEM_DIRECTORIES and not d.startswith("#")]
    return f"schemas of its own ({', '.join(own)})" if own else ""


def received_blocks_compression(datasets: tuple[Dataset, ...], source_zfs: dict[str, dict]) -> dict[str, str]:
    """{receiver dataset key: the compression its received blocks carry}: our sends (-c, or -w)
    keep the sender's blocks as they are, so the receiver records what the sender recorded, and
    a later change of compression is rewritten there too (day2.compression_rewrite). A sender
    without the record leaves the receiver without one."""
    recorded = {
        d.relative: blocks_record(source_zfs.get(d.source, {}).get(BLOCKS_COMPRESSION, {}).get("value"))
        for d in datasets
    }
    return {relative: value for relative, value in recorded.items() if value is not None}


def sent(lines: list[str]) -> tuple[int, float, int]:
    """(bytes, seconds, datasets) from a send operation's REPORT lines."""
    total, ms, count = 0, 0, 0
    for line in lines:
        words = line.split()
        if line.startswith(f"{ops.REPORT} sent ") and len(words) == 8:
            total, ms, count = total + int(words[3]), ms + int(words[6]), count + 1
    return total, ms / 1000, count


def position(lines: list[str]) -> str | None:
    for line in lines:
        if line.startswith(f"{ops.REPORT} position "):
            return line.split(" position ", 1)[1]
    return None


def describe_send(what: str, lines: list[str]) -> str:
    size, seconds, count = sent(lines)
    if not count:
        return f"    {what}: nothing sent in this run (received in an earlier one)"
    return f"    {what}: {size} bytes ({size / MIB:.1f} MiB) in {seconds:.1f} s, {count} dataset(s)"


# --- the one-time key -----------------------------------------------------------------------------


def one_time_key(comment: str) -> tuple[HiddenValue, str]:
    """A new ed25519 key pair (private, public), made with ssh-keygen in a temporary directory
    that is removed before this returns: the keys live in this process's memory only."""
    with tempfile.TemporaryDirectory(prefix="dbzfs-seed-") as tmp:
        path = Path(tmp) / "key"
        try:
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                check=True,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except FileNotFoundError:
            raise PyinfraError("ssh-keygen is not installed here (Debian: openssh-client)") from None
        except subprocess.CalledProcessError as exc:
            raise PyinfraError(f"ssh-keygen failed: {exc.stderr.strip()}") from None
        return HiddenValue(path.read_text()), path.with_name("key.pub").read_text().strip()


def expiry(now: datetime, hours: int = KEY_HOURS) -> str:
    """An authorized_keys expiry-time, UTC."""
    return (now.astimezone(UTC) + timedelta(hours=hours)).strftime("%Y%m%d%H%MZ")


# --- the steps ----------------------------------------------------------------------------------------


def keys_in_place(
    ends: Ends, wrapper: str, marker: str, private_key: object, public_key: str, host_key: str
) -> None:
    """Part 1: the one-time key authorized on the receiver for the wrapper only; on the sender
    in tmpfs, with the receiver's pinned host key."""
    s, r = ends.sender, ends.receiver
    engine.step(
        ends.receives,
        ends.not_receiver,
        common.config_file,
        name=f"{ops.WRAPPER} (the one-time key's forced command)",
        path=ops.WRAPPER,
        content=wrapper,
        mode="755",
    )
    engine.step(
        ends.receives,
        ends.not_receiver,
        ops.authorized_key,
        name=f"One-time key from {s.name} ({s.replication_address}) authorized for {ops.WRAPPER}",
        line=ops.authorized_key_line(public_key, s.replication_address, expiry(datetime.now(UTC))),
        marker=marker,
    )
    engine.step(
        ends.sends,
        ends.not_sender,
        ops.source_key,
        name=f"One-time key and {r.name}'s pinned host key in {common.PRIVATE_DIR}",
        private_key=private_key,
        known_hosts=ops.known_hosts_line(r.replication_address, host_key),
    )


def received_in_place(
    ends: Ends,
    datasets: tuple[Dataset, ...],
    snapshot: str,
    what: str,
    position_from: dict | None,
    blocks: dict[str, str],
    mark: dict | None = None,
    hold: str | None = None,
) -> None:
    """Part 3: the received datasets in place of the live ones (renamed aside), the declared
    properties with the compression their blocks carry, mounted and owned. `mark`: a restore's
    (operations.seeding.put_in_place), then recorded on the snapshot in place. `hold`: a tag the
    received snapshots are held by from before they take the live names (the caller releases)."""
    r = ends.receiver
    lives = [d.live for d in datasets]
    engine.step(
        ends.receives,
        ends.not_receiver,
        ops.put_in_place,
        name=f"{', '.join(lives)}: {what} in place, the old datasets renamed aside",
        datasets=[{"live": d.live, "seed": d.seed, "aside": d.aside} for d in datasets],
        snapshot=snapshot,
        position_from=position_from,
        **({"mark": mark} if mark else {}),
        **({"hold": hold} if hold else {}),
    )
    if mark:
        engine.step(
            ends.receives,
            ends.not_receiver,
            mariadb_restore.marked,
            name=f"{mark['snapshot']}: {mark['value']}",
            snapshot=mark["snapshot"],
            value=mark["value"],
        )
    for d in datasets:
        engine.step(
            ends.receives,
            ends.not_receiver,
            zfs_ops.dataset,
            name=f"Dataset {d.live}",
            dataset_name=d.live,
            properties={
                **r.datasets[d.relative],
                **({BLOCKS_COMPRESSION: blocks[d.relative]} if d.relative in blocks else {}),
            },
        )
    engine.step(
        ends.receives, ends.not_receiver, ops.mounted, name=f"Mounted: {', '.join(lives)}", datasets=lives
    )
    account = SERVICE_USERS[r.engine]
    for d in datasets:
        engine.step(
            ends.receives,
            ends.not_receiver,
            files.directory,
            name=f"Owner of {r.mountpoint(d.relative)}",
            path=r.mountpoint(d.relative),
            user=account["user"],
            group=account["user"],
            mode=account["mode"],
        )


def keys_removed(ends: Ends, marker: str) -> None:
    """Part 5, first: the one-time key gone from both hosts."""
    engine.step(
        ends.receives,
        ends.not_receiver,
        ops.authorized_key_removed,
        name="One-time key removed",
        marker=marker,
    )
    engine.step(
        ends.sends, ends.not_sender, ops.source_key_removed, name="One-time key and pinned host key removed"
    )


def asides_destroyed(ends: Ends, datasets: tuple[Dataset, ...], before: str, wipe: bool) -> OperationMeta:
    """Part 5, last: the receiver's datasets renamed aside, destroyed with wipe, else kept."""
    r = ends.receiver
    return engine.step(
        ends.receives,
        ends.not_receiver,
        ops.replaced_destroyed,
        name=f"{r.name}'s datasets from before {before}: destroyed with --data wipe=yes, else kept",
        datasets=[d.aside for d in datasets],
        wipe=wipe,
    )


def start_mariadb(
    cfg: HostConfig, r: HostConfig, p: HostConfig, seeded: str, what: str = "the seed"
) -> OperationMeta:
    """Part 4 for a MariaDB replica (a seed's, a restore's): `r` starts as a replica of `p` from
    the GTID position on `seeded` and is checked to replicate (a check that never seeds:
    operations.mariadb_topology.replicates_from); returns the start step (its output holds the
    position)."""
    is_replica, not_replica = cfg.name == r.name, f"not the replica ({r.name})"
    paths = render.mariadb_paths(r)
    to_primary = {
        "primary_address": p.replication_address,
        "replication_user": render.REPLICATION_USER["mariadb"],
        "password": engine.secret(secrets.REPLICATION_PASSWORD) if is_replica else None,
        "port": render.MARIADB_PORT,
    }
    if is_replica:
        mariadb.role_config(r)  # read_only in the role file before the server starts
    start = engine.step(
        is_replica,
        not_replica,
        ops.mariadb_replica,
        name=f"{r.name} starts as a replica of {p.name} from {what}'s GTID position",
        datadir=paths["datadir"],
        relay_log=paths["relay_log"],
        seeded=seeded,
        **to_primary,
    )
    engine.step(is_replica, not_replica, mariadb_ops.read_only, name="read_only ON (live)", on=True)
    engine.step(
        is_replica,
        not_replica,
        mariadb_topology.replicates_from,
        name=f"{r.name} replicates from {p.name}",
        primary_address=p.replication_address,
        port=render.MARIADB_PORT,
    )
    return start


class Report(kit.Report):
    """A transfer's report: removes the one-time key from a host of the transfer that fails a
    step (that host runs no further step, its cleanup included)."""

    what = "transfer"  # the runbook's word: "seeding", "restore"

    def __init__(self, sender: HostConfig, receiver: HostConfig, marker: str, steps: dict) -> None:
        super().__init__(steps)
        self.receiver, self.marker = receiver.name, marker
        self.roles = {sender.name: "source", receiver.name: "replica"}
        self.cleaned: set[str] = set()

    def operation_host_error(self, state, host, op_hash, retry_count=0, max_retries=0) -> None:  # noqa: ANN001 - pyinfra's callback signature
        role = self.roles.get(host.name)
        if role is None or host.name in self.cleaned:
            return
        self.cleaned.add(host.name)
        arguments = state.get_op_data_for_host(host, op_hash).global_arguments
        connector = {k: v for k, v in arguments.items() if k in CONNECTOR_ARGUMENT_KEYS}
        done = True
        for command in ops.key_cleanup(role, self.marker):
            try:
                ok, _ = host.run_shell_command(command, print_output=False, **connector)
            except Exception:  # a cleanup must not hide the failure it follows
                ok = False
            done = done and ok
        step = ", ".join(state.get_op_meta(op_hash).names) or "a step"
        removed = (
            "the one-time key was removed from it"
            if done
            else f"the one-time key could NOT be removed from it: {self._by_hand(role)}"
        )
        logger.warning(
            f"==> {self.what} of {self.receiver} stopped on {host.name} at {step!r}; {removed}. "
            f"The snapshots are kept: re-run the same command to resume."
        )

    def _by_hand(self, role: str) -> str:
        if role == "source":
            return f"rm -f {ops.KEY} {ops.KNOWN_HOSTS}"
        return f"remove the line with {self.marker} from {ops.AUTHORIZED_KEYS}"
