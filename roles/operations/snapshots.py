"""Operations of the snapshots role (roles/snapshots.py)."""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from roles.facts.zfs import ZfsSnapshots

AUTOSNAP = "autosnap_"


@operation()
def first_taken(dataset: str, unit: str) -> Generator[StringCommand, None, None]:
    """
    The host's first snapshot, taken by the unit that takes them from then on (its timer's runs
    take the later ones): a backup exists from the converge on, not from the next quarter hour.
    Nothing once the dataset holds one of its snapshots.

    + dataset: the data dataset (DATASET, full name)
    + unit: the oneshot service that takes them (dbzfs-snapshot.service)
    """
    taken = [
        s
        for s in host.get_fact(ZfsSnapshots, dataset=dataset)
        if s["name"].split("@", 1)[1].startswith(AUTOSNAP)
    ]
    if taken:
        host.noop(f"{dataset} has {len(taken)} snapshot(s), the newest {taken[-1]['name'].split('@', 1)[1]}")
        return
    # A oneshot's start returns when its run ends, and fails when the run fails.
    yield StringCommand(
        "systemctl start", QuoteString(unit), "&& journalctl -o cat -n 3 -u", QuoteString(unit)
    )
