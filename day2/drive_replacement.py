"""Replacing a pool's drive (runbooks/replace_drive.py): the new drive, blank and in its bay,
takes the old one's place in its mirror (`zpool replace`), ZFS resilvers onto it, and a hot spare
that stood in for the old drive goes back to AVAIL when the resilver is done.

Pre-checks, before the host is changed (all at once): `host` is a host of the inventory and takes
part in the run (day2/kit.py), `old` and `new` are given (by-id paths, or their names under /dev/disk/by-id);
then the operation's own (operations/zpool.py replace): the pool is imported, `old` is one
of its drives and not a spare, `new` exists, is a whole NVMe namespace, is unused and holds no
partition table, filesystem or ZFS label (unless `--data wipe=yes`). With autoreplace on and ZED
running, a new drive put in the failed one's bay is taken in without this runbook; it is for
autoreplace off, another bay, or a drive that is still working.
"""

from __future__ import annotations

import time

from pyinfra import host, inventory, logger
from pyinfra.operations import server

from day2 import kit
from facts.drives import BY_ID
from model.problems import Problem
from operations import zpool
from roles import engine

RUNBOOK = kit.Runbook(
    "runbooks/replace_drive.py",
    "the drive replacement",
    (
        kit.Parameter(
            "host",
            "the host whose pool's drive is replaced",
            required=True,
            example="HOST",
            host=True,
            formerly=("on",),
        ),
        kit.Parameter(
            "old",
            "the drive to replace, by id (zpool status -P)",
            required=True,
            example="/dev/disk/by-id/NAME",
            parse=kit.text,
        ),
        kit.Parameter(
            "new",
            "the drive that replaces it, by id",
            required=True,
            example="/dev/disk/by-id/NAME",
            parse=kit.text,
        ),
        kit.Parameter(
            "wipe",
            "yes: the new drive may hold data, wipe it",
            default=False,
            parse=kit.yes_no,
            example="yes",
        ),
    ),
)


def by_id(value: object) -> str:
    text = str(value).strip()
    return text if text.startswith("/") else f"{BY_ID}/{text}"


def problems(
    on: object, old: object, new: object, wipe: object, hosts: list[str], active: set[str]
) -> list[Problem]:
    """What is wrong with the runbook's arguments, every problem at once (`on`: the host)."""
    found = []
    if not on:
        found.append(Problem(None, "host", None, "missing", "name the host: --data host=HOST"))
    elif on not in hosts:
        found.append(Problem(None, "host", on, "not a host of the inventory", f"one of {', '.join(hosts)}"))
    else:
        found += kit.left_out([str(on)], active, fix=f"include {on}", host=str(on))
    for key, value in (("old", old), ("new", new)):
        if not value:
            fix = f"--data {key}=/dev/disk/by-id/NAME (zpool status -P; ls -l /dev/disk/by-id)"
            found.append(Problem(on or None, key, None, "missing", fix))
        elif str(value).startswith("/") and not str(value).startswith(BY_ID + "/"):
            fix = f"the drive's name under {BY_ID} (stable across reboots and bays)"
            found.append(Problem(on or None, key, value, f"not a {BY_ID} path", fix))
    if old and new and by_id(old) == by_id(new):
        found.append(Problem(on or None, "new", new, "is the old drive", "give the drive that replaces it"))
    if wipe and str(wipe).lower() not in kit.YES + kit.NO:
        fix = "--data wipe=yes to wipe the new drive"
        found.append(Problem(on or None, "wipe", wipe, "not yes or no", fix))
    return found


class Report(kit.Report):
    """The resilver's time and what to do next, once the last step is done (steps "replace",
    "wait")."""

    def __init__(self, steps: dict, name: str, pool: str, old: str, new: str):
        super().__init__(steps)
        self.name, self.pool, self.old, self.new = name, pool, old, new
        self.replacing: float | None = None

    def step_started(self, state_: object, step: str) -> None:
        if step == "replace":
            self.replacing = time.monotonic()

    def step_ended(self, state_: object, step: str) -> None:
        if step == "wait" and self.replacing is not None:
            took = time.monotonic() - self.replacing
            logger.info(
                f"==> {self.name}: {self.new} in pool {self.pool} in place of {self.old}, "
                f"resilvered ({took:.0f} s); a hot spare that stood in is AVAIL again.\n"
                "    A host that lists its drives (drives = [...]) needs the new name there; "
                "one with a drive_pattern needs nothing."
            )


def run(args: dict) -> None:
    """The replacement on its host; nothing on the others. `args`: kit.start(RUNBOOK)."""
    on, old, new, wipe = (args.get(key) for key in RUNBOOK.names())
    hosts = [h.name for h in inventory]
    kit.refuse(problems(on, old, new, wipe, hosts, kit.active()), RUNBOOK.what)
    if host.name != on:
        return
    cfg = engine.host_config()
    old, new = by_id(old), by_id(new)
    replace = zpool.replace(
        name=f"Replace {old} by {new} in pool {cfg.pool.name}",
        pool_name=cfg.pool.name,
        old=old,
        new=new,
        wipe=wipe is True or str(wipe or "").lower() in kit.YES,
    )
    wait = server.shell(
        name=f"Wait for pool {cfg.pool.name}'s resilver",
        commands=[f"zpool wait -t resilver {cfg.pool.name}", f"zpool status {cfg.pool.name}"],
    )
    report = Report({"replace": replace, "wait": wait}, cfg.name, cfg.pool.name, old, new)
    kit.report_once("drive replacement report", report)
