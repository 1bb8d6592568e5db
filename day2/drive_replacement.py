"""Replacing a pool's drive (runbooks/replace_drive.py): the new drive, blank and in its bay,
takes the old one's place in its mirror (`zpool replace`), ZFS resilvers onto it, and a hot spare
that stood in for the old drive goes back to AVAIL when the resilver is done.

Pre-checks, before the host is changed (all at once): `on` is a host of the inventory and takes
part in the run, `old` and `new` are given (by-id paths, or their names under /dev/disk/by-id);
then the operation's own (operations/zpool.py replace): the pool is imported, `old` is one
of its drives and not a spare, `new` exists, is a whole NVMe namespace, is unused and holds no
partition table, filesystem or ZFS label (unless `--data wipe=yes`). With autoreplace on and ZED
running, a new drive put in the failed one's bay is taken in without this runbook; it is for
autoreplace off, another bay, or a drive that is still working.
"""

from __future__ import annotations

import time

from pyinfra import host, inventory, logger
from pyinfra.api import BaseStateCallback
from pyinfra.api.exceptions import PyinfraError
from pyinfra.operations import server

from day2 import switchover
from facts.drives import BY_ID
from model.problems import Problem, format_problems
from operations import zpool
from roles import engine

PARAMETERS = ("on", "old", "new", "wipe")
YES = ("yes", "true", "1", "on")


def by_id(value: object) -> str:
    text = str(value).strip()
    return text if text.startswith("/") else f"{BY_ID}/{text}"


def problems(
    on: object, old: object, new: object, wipe: object, hosts: list[str], active: set[str]
) -> list[Problem]:
    """What is wrong with the runbook's --data, every problem at once."""
    found = []
    if not on:
        found.append(Problem(None, "on", None, "missing", "name the host: --data on=HOST"))
    elif on not in hosts:
        found.append(Problem(None, "on", on, "not a host of the inventory", f"one of {', '.join(hosts)}"))
    elif on not in active:
        why = "takes no part in this run (--limit, or unreachable)"
        found.append(Problem(on, "on", on, why, "include it"))
    for key, value in (("old", old), ("new", new)):
        if not value:
            fix = f"--data {key}=/dev/disk/by-id/NAME (zpool status -P; ls -l /dev/disk/by-id)"
            found.append(Problem(on or None, key, None, "missing", fix))
        elif str(value).startswith("/") and not str(value).startswith(BY_ID + "/"):
            fix = f"the drive's name under {BY_ID} (stable across reboots and bays)"
            found.append(Problem(on or None, key, value, f"not a {BY_ID} path", fix))
    if old and new and by_id(old) == by_id(new):
        found.append(Problem(on or None, "new", new, "is the old drive", "give the drive that replaces it"))
    if wipe and str(wipe).lower() not in YES + ("no", "false", "0", "off"):
        fix = "--data wipe=yes to wipe the new drive"
        found.append(Problem(on or None, "wipe", wipe, "not yes or no", fix))
    return found


class Report(BaseStateCallback):
    """The resilver's time and what to do next, once the last operation is done."""

    def __init__(self, start_hash: str, last_hash: str, name: str, pool: str, old: str, new: str):
        self.start_hash, self.last_hash = start_hash, last_hash
        self.name, self.pool, self.old, self.new = name, pool, old, new
        self.started: float | None = None

    def operation_start(self, state, op_hash) -> None:  # noqa: ANN001 - pyinfra's callback signature
        if op_hash == self.start_hash:
            self.started = time.monotonic()

    def operation_end(self, state, op_hash) -> None:  # noqa: ANN001 - pyinfra's callback signature
        if op_hash == self.last_hash and self.started is not None:
            took = time.monotonic() - self.started
            logger.info(
                f"==> {self.name}: {self.new} in pool {self.pool} in place of {self.old}, "
                f"resilvered ({took:.0f} s); a hot spare that stood in is AVAIL again.\n"
                "    A host that lists its drives (drives = [...]) needs the new name there; "
                "one with a drive_pattern needs nothing."
            )


def run() -> None:
    on, old, new, wipe = (host.data.get(key) for key in PARAMETERS)
    hosts = [h.name for h in inventory]
    active = {h.name for h in inventory.get_active_hosts()}
    found = problems(on, old, new, wipe, hosts, active)
    if found:
        raise PyinfraError("\n" + format_problems(found, what="before the drive replacement"))
    if host.name != on:
        return
    cfg = engine.host_config()
    old, new = by_id(old), by_id(new)
    replace = zpool.replace(
        name=f"Replace {old} by {new} in pool {cfg.pool.name}",
        pool_name=cfg.pool.name,
        old=old,
        new=new,
        wipe=str(wipe or "").lower() in YES,
    )
    wait = server.shell(
        name=f"Wait for pool {cfg.pool.name}'s resilver",
        commands=[f"zpool wait -t resilver {cfg.pool.name}", f"zpool status {cfg.pool.name}"],
    )
    switchover.report_once(Report(replace._hash, wait._hash, cfg.name, cfg.pool.name, old, new))
