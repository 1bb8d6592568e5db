"""Operations of the snapshots role (roles/snapshots.py)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Generator, Iterable, Sequence

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
    + succeeded: the line of it a successful run writes (pgBackRest's metrics have their own)
    """
    if succeeded in (host.get_fact(FileContents, path=marker) or []):
        host.noop(f"{unit} has run on this host ({marker})")
        return
    yield from _started(unit)


COPIES_METRIC = re.compile(r'^dbzfs_backup_copies\{source="([^"]*)",dataset="([^"]*)"\} (\d+)$')


def copies_held(lines: Iterable[str]) -> dict[tuple[str, str], int]:
    """(source host, dataset role) -> copies the backup host holds, from the metrics file of the
    pull's last run (host_scripts/backup_pull.py); a dataset it skipped (no snapshot) has none."""
    held = {}
    for line in lines:
        match = COPIES_METRIC.match(line.strip())
        if match:
            held[(match.group(1), match.group(2))] = int(match.group(3))
    return held


@operation()
def first_pull(
    unit: str, marker: str, succeeded: str, expected: Sequence[tuple[str, str]] = ()
) -> Generator[StringCommand, None, None]:
    """
    The backup host's pull at the converge, after the database hosts' first snapshots (the deploy
    orders it after them): what they hold is copied now, not at the timer's next run. Nothing
    once the pull's last run succeeded (`marker`, the metrics file each run writes) and holds a
    copy of every dataset in `expected`. A run that found nothing to pull does not count (a run
    before the sources took their first snapshots: issue 45), and a database host that joins the
    fleet gets its first copies at the converge that adds it. A run in progress (the timer's) is
    waited for first: it may have listed the sources before their snapshots, and a start while it
    runs would only wait for it. After the run, every dataset in `expected` must have copies.

    + unit: the oneshot service (dbzfs-backup-pull.service)
    + marker: the metrics file each run writes
    + succeeded: the line of it a run that pulled every source writes
    + expected: (source host, dataset role) pairs the backup host must hold copies of: the data
      and log datasets of each database host that takes snapshots in its declared role
    """
    lines = host.get_fact(FileContents, path=marker) or []
    held = copies_held(lines)
    if succeeded in lines and all(held.get(pair) for pair in expected):
        host.noop(f"{unit}'s last run succeeded with copies of {len(expected)} dataset(s) ({marker})")
        return
    state = f"systemctl show -p ActiveState --value {shlex.quote(unit)}"
    yield StringCommand(f'while [ "$({state})" = activating ]; do sleep 2; done;', *_started(unit))
    for source, role in expected:
        line = f'dbzfs_backup_copies{{source="{source}",dataset="{role}"}} [1-9]'
        yield StringCommand(
            "grep -q --",
            QuoteString(f"^{line}"),
            QuoteString(marker),
            "|| { echo",
            QuoteString(f"{unit} ran, and {marker} shows no copy of the {role} dataset of {source}"),
            ">&2; exit 1; }",
        )


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
