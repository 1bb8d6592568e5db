"""
Rewrite datasets so that every block carries the compression the data declares
(day2/compression_rewrite.py, runbooks/rewrite_compression.py).

Each live dataset is copied, on the same pool, into `<dataset>-rewrite`: `zfs send` without `-c`
hands `zfs recv` the blocks uncompressed, and the copy writes them with its own compression. A full
copy is made while the server runs, then an incremental one from a snapshot taken with the server
stopped, and the copy is marked `@dbzfs-rewritten`; operations/seeding.py's put_in_place then
swaps it in. Each operation reads the datasets as they are and does only what is left, so a run cut
anywhere is finished by running the runbook again.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from facts.zfs import ZfsDatasetProperties
from model.zfs_properties import BLOCKS_COMPRESSION, format_value, same_value

FULL = "dbzfs-rewrite-full"
FINAL = "dbzfs-rewrite-final"
DONE = "dbzfs-rewritten"


def copy_name(live: str) -> str:
    return f"{live}-rewrite"


def aside_name(live: str) -> str:
    return f"{live}-before-rewrite"


def _names(live: str) -> list[str]:
    copy = copy_name(live)
    return [live, copy, *(f"{d}@{s}" for d in (live, copy) for s in (FULL, FINAL, DONE))]


def _pending(wanted: Mapping[str, str], found: Mapping) -> list[str]:
    """The live datasets whose blocks are not recorded as written with the wanted compression (a
    rewritten copy carries the record, and becomes the live dataset when swapped in)."""
    return [
        d
        for d, compression in wanted.items()
        if not same_value(
            "compression", compression, found.get(d, {}).get(BLOCKS_COMPRESSION, {}).get("value")
        )
    ]


def _pipe(
    source: str, target: str, incremental_from: str | None, properties: Mapping[str, str]
) -> StringCommand:
    send = ["zfs send -L"]
    if incremental_from:
        send += ["-i", QuoteString(incremental_from)]
    recv = ["zfs recv -u"]
    for prop, value in properties.items():
        recv += ["-o", QuoteString(f"{prop}={format_value(value)}")]
    return StringCommand(
        "set -o pipefail;",
        *send,
        QuoteString(source),
        "|",
        *recv,
        QuoteString(target),
        _shell_executable="bash",
    )


@operation()
def full_copy(datasets: Mapping[str, Mapping[str, str]]) -> Generator[StringCommand, None, None]:
    """
    One snapshot of all the live datasets (atomic across them, taken while the server runs) and a
    full copy of each into `<dataset>-rewrite`, received with the given properties.

    + datasets: live dataset -> the properties its copy is received with (the declared ones and
      BLOCKS_COMPRESSION, the compression wanted)
    """
    names = [n for d in datasets for n in _names(d)]
    found = host.get_fact(ZfsDatasetProperties, datasets=names)
    pending = _pending({d: str(p[BLOCKS_COMPRESSION]) for d, p in datasets.items()}, found)
    if not pending:
        host.noop(f"rewritten: {', '.join(datasets)}")
        return
    if any(f"{d}@{FULL}" not in found for d in pending):
        # A snapshot of some but not all: cut between commands; take them together again.
        for d in pending:
            copy = copy_name(d)
            if copy in found:
                yield StringCommand("zfs destroy -r", QuoteString(copy))
            if f"{d}@{FULL}" in found:
                yield StringCommand("zfs destroy", QuoteString(f"{d}@{FULL}"))
        yield StringCommand("zfs snapshot", *[QuoteString(f"{d}@{FULL}") for d in pending])
        found = {}
    for d in pending:
        copy = copy_name(d)
        if f"{copy}@{FULL}" in found:
            continue
        if copy in found:  # a receive that was cut
            yield StringCommand("zfs destroy -r", QuoteString(copy))
        yield _pipe(f"{d}@{FULL}", copy, None, datasets[d])


@operation()
def final_copy(datasets: Mapping[str, str]) -> Generator[StringCommand, None, None]:
    """
    With the server stopped: a snapshot of the live datasets taken now (an older @FINAL may
    predate writes, so it is taken again), sent into each copy incrementally from @FULL, and the
    copy marked @DONE.

    + datasets: live dataset -> the compression wanted
    """
    names = [n for d in datasets for n in _names(d)]
    found = host.get_fact(ZfsDatasetProperties, datasets=names)
    pending = _pending(datasets, found)
    if not pending:
        host.noop(f"rewritten: {', '.join(datasets)}")
        return
    for d in pending:
        copy = copy_name(d)
        if f"{d}@{FINAL}" in found:
            yield StringCommand("zfs destroy", QuoteString(f"{d}@{FINAL}"))
        if f"{copy}@{FINAL}" in found or f"{copy}@{DONE}" in found:
            # A run cut after the copy received @FINAL: destroying those snapshots alone would leave
            # the copy holding @FINAL's blocks above @FULL, and the next incremental receive would
            # refuse it as "modified since most recent snapshot". The copy is ours: back to @FULL.
            yield StringCommand("zfs rollback -r", QuoteString(f"{copy}@{FULL}"))
    yield StringCommand("zfs snapshot", *[QuoteString(f"{d}@{FINAL}") for d in pending])
    for d in pending:
        copy = copy_name(d)
        yield _pipe(f"{d}@{FINAL}", copy, f"{d}@{FULL}", {})
        yield StringCommand("zfs snapshot", QuoteString(f"{copy}@{DONE}"))


@operation()
def cleaned_up(datasets: Mapping[str, str]) -> Generator[StringCommand, None, None]:
    """The datasets swapped out and every snapshot the rewrite took, destroyed once the rewritten
    datasets are in place and the server runs on them.

    + datasets: live dataset -> the compression wanted
    """
    names = [n for d in datasets for n in (*_names(d), aside_name(d))]
    found = host.get_fact(ZfsDatasetProperties, datasets=names)
    if _pending(datasets, found):
        host.noop("not rewritten yet: nothing is destroyed")
        return
    leftovers = [n for d in datasets for n in (aside_name(d), f"{d}@{FULL}", f"{d}@{FINAL}", f"{d}@{DONE}")]
    existing = [n for n in leftovers if n in found]
    if not existing:
        host.noop("nothing left of the rewrite")
    for name in existing:
        yield StringCommand("zfs destroy -r" if "@" not in name else "zfs destroy", QuoteString(name))
