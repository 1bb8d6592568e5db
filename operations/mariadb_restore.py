"""
Operations of the restore runbook for MariaDB (day2/restore_mariadb.py): the backup host's
binlogs snapshotted and sent with the copy, mounted read-only on the target, the restored server
started on its own, and the binlogs replayed over it up to a moment. The one-time key, the sends
and putting the copy in place are seeding's (operations/seeding.py).

As seeding's, every operation decides from facts read when it runs, so a run cut anywhere resumes
where it stopped; under --dry (``state.is_executing`` False) the plan is yielded.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import UTC, datetime

from pyinfra import host, inventory, state
from pyinfra.api import OperationError, QuoteString, StringCommand, operation

from facts.mariadb import MariadbLiveRole
from facts.zfs import ZfsDatasetProperties
from operations.seeding import (
    EMPTY_GTID,
    GTID_PROPERTY,
    hold_command,
    q,
    release_command,
    replication_state_files,
)

REPORT = "dbzfs-restore:"  # prefix of the output lines day2.restore_mariadb.Report reads
RESTORE_PROPERTY = "dbzfs:restore"  # on the copy's snapshot in place: which restore put it there
REPLAYED_PROPERTY = "dbzfs:replayed"  # on it too: "started", then the moment the replay reached
STARTED = "started"


def stop_datetime(moment: datetime) -> str:
    """mariadb-binlog's --stop-datetime, read in the process's time zone (run with TZ=UTC):
    whole seconds, so the events of the moment's own second are not replayed."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def binlog_files(directory: str) -> str:
    """Shell words for the binlog files in `directory`, oldest first by their number (not the
    .index, nor anything else)."""
    return (
        f"$(cd {q(directory)} && ls -1 | grep -E '^[A-Za-z0-9_.-]+\\.[0-9]{{6,}}$'"
        " | awk -F. '{print $NF \"\\t\" $0}' | sort -n | cut -f2-"
        f" | sed 's|^|{directory}/|')"
    )


def replay_command(directory: str, gtid: str, moment: datetime, resume: bool = False) -> str:
    """The binlogs in `directory` decoded from the copy's position `gtid` (after it) up to
    `moment`, into the local server as root. `resume`: from the server's own position instead, a
    replay cut in an earlier run (gtid_strict_mode refuses a transaction applied twice)."""
    if resume:
        start = "--start-position=\"$(mariadb -NBe 'SELECT @@global.gtid_binlog_pos')\""
    elif gtid == EMPTY_GTID:
        start = ""  # the copy holds no transaction: every binlog from the first
    else:
        start = f"--start-position={q(gtid)}"
    decode = " ".join(
        w for w in ["TZ=UTC mariadb-binlog", start, f"--stop-datetime={q(stop_datetime(moment))}"] if w
    )
    return f'set -o pipefail; files={binlog_files(directory)}; [ -n "$files" ] || ' + (
        f"{{ echo {q(f'no binlog file in {directory}')} >&2; exit 1; }}; {decode} $files | mariadb"
    )


def reached_command(directory: str, gtid: str, moment: datetime) -> str:
    """Print the last transaction the replay applied (its GTID and its time, UTC) as a REPORT
    line: the same decode, its event headers only."""
    start = "" if gtid == EMPTY_GTID else f"--start-position={q(gtid)}"
    decode = " ".join(
        w for w in ["TZ=UTC mariadb-binlog", start, f"--stop-datetime={q(stop_datetime(moment))}"] if w
    )
    return (
        f"set -o pipefail; files={binlog_files(directory)}; {decode} $files"
        # an event header: #YYMMDD HH:MM:SS server id ... <tab>GTID D-S-N trans
        " | awk '/^#[0-9][0-9][0-9][0-9][0-9][0-9] / && /[ \t]GTID [0-9]/ {"
        ' for (i = 1; i <= NF; i++) if ($i == "GTID") g = $(i + 1); d = $1; t = $2 }'
        f' END {{ if (g == "") {{ print "{REPORT} reached no transaction after the copy"; exit }}'
        ' split(t, hms, ":");'
        f' printf "{REPORT} reached GTID %s at 20%s-%s-%s %02d:%s:%s UTC\\n", g,'
        " substr(d, 2, 2), substr(d, 4, 2), substr(d, 6, 2), hms[1], hms[2], hms[3] }'"
    )


@operation()
def binlogs_snapshot(
    dataset: str, snapshot: str, target: str, received: str
) -> Generator[StringCommand, None, None]:
    """
    The backup host's binlogs dataset snapshotted, so that what is sent is one consistent tree
    while the streams go on writing; once only (a re-run sends the same). None once the target
    holds it (`received`: its dataset@snapshot).
    """
    if state.is_executing and received in inventory.get_host(target).get_fact(
        ZfsDatasetProperties, datasets=[received]
    ):
        host.noop(f"{target} holds {received}")
        return
    name = f"{dataset}@{snapshot}"
    if name in host.get_fact(ZfsDatasetProperties, datasets=[name]):
        host.noop(f"{name} exists")
        return
    yield StringCommand("zfs snapshot", QuoteString(name))


@operation()
def binlogs_mounted(dataset: str, mountpoint: str) -> Generator[StringCommand, None, None]:
    """The received binlogs read-only, mounted at `mountpoint` (received unmounted)."""
    props = host.get_fact(ZfsDatasetProperties, datasets=[dataset]).get(dataset)
    if props is None and state.is_executing:
        raise OperationError(f"{dataset} was not received")
    props = props or {}
    value = {k: props.get(k, {}).get("value") for k in ("readonly", "mountpoint", "mounted")}
    if value == {"readonly": "on", "mountpoint": mountpoint, "mounted": "yes"}:
        host.noop(f"{dataset} is mounted read-only at {mountpoint}")
        return
    if value["readonly"] != "on" or value["mountpoint"] != mountpoint:
        yield StringCommand(
            "zfs set readonly=on", QuoteString(f"mountpoint={mountpoint}"), QuoteString(dataset)
        )
    # Setting the mountpoint may mount it already.
    yield StringCommand(
        "zfs get -H -o value mounted",
        QuoteString(dataset),
        "| grep -qx yes || zfs mount",
        QuoteString(dataset),
    )


@operation()
def dataset_destroyed(dataset: str) -> Generator[StringCommand, None, None]:
    """A temporary dataset gone, with its snapshots."""
    if dataset not in host.get_fact(ZfsDatasetProperties, datasets=[dataset]):
        host.noop(f"{dataset} does not exist")
        return
    yield StringCommand("zfs destroy -r", QuoteString(dataset))


@operation()
def marked(snapshot: str, value: str) -> Generator[StringCommand, None, None]:
    """RESTORE_PROPERTY=`value` on the copy's snapshot in place: a re-run with the same parameters
    resumes this restore, another restore of the same copy is refused (day2.restore_mariadb)."""
    props = host.get_fact(ZfsDatasetProperties, datasets=[snapshot]).get(snapshot, {})
    if props.get(RESTORE_PROPERTY, {}).get("value") == value:
        host.noop(f"{snapshot} is marked {value!r}")
        return
    yield StringCommand("zfs set", QuoteString(f"{RESTORE_PROPERTY}={value}"), QuoteString(snapshot))


@operation()
def standalone(
    datadir: str, relay_log: str, seeded: str, service: str = "mariadb.service"
) -> Generator[StringCommand, None, None]:
    """
    The restored datadir started on its own: what made the copy's server a replica removed first
    (master.info, the relay logs: it would replicate from its primary at once, to now), then
    ``RESET SLAVE ALL``. Its role file sets read_only ON, so the fence lets it start; root still
    writes (the replay). Nothing when it runs and replicates from no one.

    + seeded: the live data dataset's copy snapshot (DATASET@NAME): it marks the copy in place
    """
    in_place = seeded in host.get_fact(ZfsDatasetProperties, datasets=[seeded])
    live = host.get_fact(MariadbLiveRole)
    if state.is_executing:
        if not in_place:
            raise OperationError(f"{seeded} does not exist: the copy is not in place")
        if live is not None:
            if not live.get("Master_Host"):
                host.noop("runs on its own, replicating from no one")
                return
            raise OperationError(
                f"{host.name}: the restored server replicates from {live['Master_Host']}; "
                "STOP SLAVE; RESET SLAVE ALL by hand after looking why, and re-run"
            )
    yield replication_state_files(datadir, relay_log)
    yield StringCommand("systemctl start", QuoteString(service))
    yield StringCommand("mariadb -e", QuoteString("STOP SLAVE; RESET SLAVE ALL"))


@operation()
def replayed(directory: str, seeded: str, moment: datetime) -> Generator[StringCommand, None, None]:
    """
    The binlogs in `directory` replayed over the restored server as root, from the copy's GTID
    position (GTID_PROPERTY on `seeded`) up to `moment` (``TZ=UTC mariadb-binlog
    --start-position=GTID --stop-datetime=... FILES | mariadb``); then the last transaction
    applied and its time printed (REPORT). REPLAYED_PROPERTY on `seeded` records it: "started"
    before (a cut replay resumes from the server's own position), the moment reached after
    (nothing is replayed again).
    """
    props = host.get_fact(ZfsDatasetProperties, datasets=[seeded]).get(seeded)
    if props is None and state.is_executing:
        raise OperationError(f"{seeded} does not exist: the copy is not in place")
    props = props or {}
    done = props.get(REPLAYED_PROPERTY, {}).get("value")
    if done and done != STARTED:
        host.noop(f"replayed in an earlier run: {done}")
        return
    gtid = props.get(GTID_PROPERTY, {}).get("value")
    if gtid is None:
        if state.is_executing:
            raise OperationError(f"{seeded} holds no GTID position ({GTID_PROPERTY})")
        gtid = "<the copy's GTID>"
    yield StringCommand("zfs set", QuoteString(f"{REPLAYED_PROPERTY}={STARTED}"), QuoteString(seeded))
    yield StringCommand(
        replay_command(directory, gtid, moment, resume=done == STARTED), _shell_executable="bash"
    )
    yield StringCommand(
        f'out=$({reached_command(directory, gtid, moment)}) && echo "$out" &&',
        f'zfs set "{REPLAYED_PROPERTY}=${{out#{REPORT} }}"',
        QuoteString(seeded),
        _shell_executable="bash",
    )


@operation(is_idempotent=False)
def held(snapshots: list[str], tag: str) -> Generator[StringCommand, None, None]:
    """
    A `zfs hold` named `tag` on each of the copy's snapshots while they are sent: the backup
    host's sanoid cannot prune a copy half-way through a restore (its destroy fails, it goes on).
    """
    for snapshot in snapshots:
        yield StringCommand(hold_command(snapshot, tag))


@operation(is_idempotent=False)
def released(snapshots: list[str], tag: str) -> Generator[StringCommand, None, None]:
    """The holds of `held` released (the retention prunes the copies again); none left is fine."""
    for snapshot in snapshots:
        yield StringCommand(release_command(snapshot, tag))
