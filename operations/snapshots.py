"""Operations of the snapshots role (roles/snapshots.py)."""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation
from pyinfra.facts.files import FileContents

from facts.zfs import ZfsSnapshots

AUTOSNAP = "autosnap_"
SUCCEEDED = "dbzfs_snapshots_success 1"  # the line of the job's metrics a successful run writes


@operation()
def first_run(unit: str, marker: str, succeeded: str = SUCCEEDED) -> Generator[StringCommand, None, None]:
    """
    The snapshot job's first run, at the converge that sets it up: on a host whose server is in
    the role that takes them, the first snapshots (a backup from the converge on, not from the
    next quarter hour); elsewhere the job says it takes none. Nothing once a run has succeeded
    here (`marker`, the metrics file each run writes, says so): later runs are the timer's.

    + unit: the oneshot service (dbzfs-snapshot.service)
    + marker: the metrics file each run of it writes
    + succeeded: the line of it a successful run writes (the backup pull's has its own)
    """
    if succeeded in (host.get_fact(FileContents, path=marker) or []):
        host.noop(f"{unit} has run on this host ({marker})")
        return
    yield from _started(unit)


@operation(is_idempotent=False)
def job_run(unit: str) -> Generator[StringCommand, None, None]:
    """
    The snapshot job run now, where it is installed: after a switchover, the host that became a
    replica takes its snapshots at once and the new primary stops (the job asks the server its
    role). Nothing on a host without the job.

    + unit: the oneshot service (dbzfs-snapshot.service)
    """
    yield StringCommand(
        "if systemctl cat", QuoteString(unit), ">/dev/null 2>&1; then", *_started(unit), "; fi"
    )


def _started(unit: str) -> list[StringCommand]:
    # A oneshot's start returns when its run ends, and fails when the run fails.
    return [
        StringCommand("systemctl start", QuoteString(unit), "&& journalctl -o cat -n 3 -u", QuoteString(unit))
    ]


@operation()
def first_taken(dataset: str, unit: str) -> Generator[StringCommand, None, None]:
    """
    Snapshots of datasets that have none of ours (a runbook replaced them), taken by the job now
    rather than at the timer's next run. Nothing once the dataset holds one.

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
    yield from _started(unit)
