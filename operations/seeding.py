"""
Operations that seed a replica from ZFS snapshots of another member of its replication group
(runbooks/seed.py, day2/seeding.py): a consistent snapshot of the source's data and log
datasets, `zfs send | ssh | zfs recv` host to host into new datasets beside the replica's live
ones, the received datasets put in place, and the server started as a replica.

The source reaches the replica with a one-time key whose line in root's authorized_keys only
runs the receive wrapper (templates/seed-receive.sh.j2): `zfs recv -s -u` into a seed dataset,
or reading its receive_resume_token. The replica's host key is pinned on the source. Every
receive is resumable (`-s`): a cut send resumes from the token, in the same run (ATTEMPTS) or in
the next one, as long as the source's snapshot exists.

Every operation decides from facts read when it runs, so an operation re-run after a cut picks up
where the last one stopped; while pyinfra only plans (``state.is_executing`` False: --dry, change
detection) the state an earlier step will change is assumed changed, and the plan is yielded.
"""

from __future__ import annotations

import shlex
from collections.abc import Generator, Sequence

from pyinfra import host, inventory, state
from pyinfra.api import FileUploadCommand, HiddenValue, OperationError, QuoteString, StringCommand, operation
from pyinfra.facts.files import FileContents

from facts.mariadb import MariadbReplicaStatus, sql_string
from facts.postgresql import PostgresqlCluster, PostgresqlLiveRole
from facts.units import UnitState
from facts.zfs import ZfsDatasetProperties
from operations.common import PRIVATE_DIR, private_upload, reveal
from operations.mariadb import change_master_sql, run_secret_sql
from operations.postgresql import unit as pg_unit
from operations.postgresql_topology import CONTROLDATA, standby_settings
from operations.zfs import unmount_command

WRAPPER = "/usr/local/sbin/dbzfs-seed-receive"
AUTHORIZED_KEYS = "/root/.ssh/authorized_keys"
KEY_NAME = "seed-key"
KNOWN_HOSTS_NAME = "seed-known-hosts"
KEY = f"{PRIVATE_DIR}/{KEY_NAME}"
KNOWN_HOSTS = f"{PRIVATE_DIR}/{KNOWN_HOSTS_NAME}"
SEND_LOG = f"{PRIVATE_DIR}/seed-send.log"
GTID_PROPERTY = "dbzfs:gtid"
CONFIGURED_PROPERTY = "dbzfs:replication-configured"  # on the seed snapshot, once replication is set up
EMPTY_GTID = "empty"  # the position of a primary that wrote nothing: the property is never ""
REPORT = "dbzfs-seed:"  # prefix of the output lines day2.seeding.Report reads
ATTEMPTS = 3  # sends per dataset and run; each one after the first resumes from the token
RETRY_PAUSE = 5  # seconds between two attempts
RUNNING = ("active", "activating", "reloading", "deactivating")


def q(text: str) -> str:
    return shlex.quote(text)


def holds_command(snapshot: str, tag: str) -> str:
    """A shell test: whether `snapshot` has a `zfs hold` named `tag`."""
    return f"zfs holds -H {q(snapshot)} | cut -f2 | grep -qxF {q(tag)}"


def hold_command(snapshot: str, tag: str) -> str:
    """`zfs hold` named `tag` on `snapshot` unless it has it: sanoid's prune of it fails (and
    sanoid goes on) until it is released."""
    return f"{holds_command(snapshot, tag)} || zfs hold {q(tag)} {q(snapshot)}"


def release_command(snapshot: str, tag: str) -> str:
    """The hold of hold_command released; none left, or no such snapshot, is fine."""
    return f"! {holds_command(snapshot, tag)} 2>/dev/null || zfs release {q(tag)} {q(snapshot)}"


# --- the SSH path -------------------------------------------------------------------------------


def authorized_key_line(public_key: str, source_address: str, expires: str) -> str:
    """root's authorized_keys line on the replica: only from the source's replication address,
    no forwarding or terminal (`restrict`), nothing but the receive wrapper, and not after
    `expires` (YYYYMMDDHHMMZ: a backstop should the cleanup never run)."""
    return (
        f'from="{source_address}",restrict,expiry-time="{expires}",command="{WRAPPER}" {public_key.strip()}'
    )


def known_hosts_line(address: str, host_key: str) -> str:
    """The replica's ed25519 host key, pinned for its replication address."""
    kind, key = host_key.split()[:2]
    return f"{address} {kind} {key}\n"


def ssh_command(address: str, bind_address: str) -> str:
    """ssh to the replica as root with the one-time key and the pinned host key only: no config
    file, no agent, no other identity, never a question or an unknown host key. It leaves from
    the source's replication address, the one the key line accepts."""
    options = [
        "IdentitiesOnly=yes",
        "BatchMode=yes",
        "StrictHostKeyChecking=yes",
        f"UserKnownHostsFile={KNOWN_HOSTS}",
        "GlobalKnownHostsFile=/dev/null",
        "HostKeyAlgorithms=ssh-ed25519",
        "ConnectTimeout=15",
        "ServerAliveInterval=15",
        "ServerAliveCountMax=4",
        "Compression=no",  # the stream is compressed already (zfs send -c)
        "Ciphers=aes128-gcm@openssh.com,chacha20-poly1305@openssh.com",
    ]
    words = ["ssh", "-F", "/dev/null", "-i", KEY]
    for option in options:
        words += ["-o", option]
    return " ".join([*words, "-b", q(bind_address), q(f"root@{address}")])


def authorized_keys_without(marker: str, line: str | None = None) -> StringCommand:
    """Rewrite root's authorized_keys without the lines holding `marker` (and with `line`)."""
    add = f"printf '%s\\n' {q(line)};" if line else ""
    return StringCommand(
        "set -e; install -d -m 700 /root/.ssh;",
        f"tmp=$(mktemp {AUTHORIZED_KEYS}.XXXXXX);",
        f'{{ grep -v -F {q(marker)} {AUTHORIZED_KEYS} 2>/dev/null || true; {add} }} > "$tmp";',
        f'chmod 600 "$tmp"; mv -f "$tmp" {AUTHORIZED_KEYS}',
    )


def source_key_files_removed() -> StringCommand:
    return StringCommand("rm", "-f", KEY, KNOWN_HOSTS, SEND_LOG)


@operation()
def server_stopped(unit: str) -> Generator[StringCommand, None, None]:
    """Stop a systemd unit that runs (a stopped one is left alone)."""
    live = host.get_fact(UnitState, unit=unit)
    if live["active"] not in RUNNING:
        host.noop(f"{unit} is {live['active'] or 'not known'}")
        return
    yield StringCommand("systemctl", "stop", QuoteString(unit))


@operation()
def authorized_key(line: str, marker: str) -> Generator[StringCommand, None, None]:
    """
    root's authorized_keys holds `line` and no other line with `marker` (a key an earlier run
    left behind).

    + line: from `authorized_key_line`
    + marker: the key's comment prefix, e.g. ``dbzfs-seed:db2:``
    """
    lines = host.get_fact(FileContents, path=AUTHORIZED_KEYS) or []
    marked = [existing for existing in lines if marker in existing]
    if marked == [line]:
        host.noop("the one-time key is authorized")
        return
    yield authorized_keys_without(marker, line)


@operation()
def authorized_key_removed(marker: str) -> Generator[StringCommand, None, None]:
    """root's authorized_keys without any line holding `marker`."""
    lines = host.get_fact(FileContents, path=AUTHORIZED_KEYS) or []
    if not any(marker in existing for existing in lines):
        host.noop("no one-time key is authorized")
        return
    yield authorized_keys_without(marker)


@operation()
def source_key(
    private_key: HiddenValue | str, known_hosts: str
) -> Generator[StringCommand | FileUploadCommand, None, None]:
    """
    The one-time private key (mode 0600) and the replica's pinned host key, in the root-only
    tmpfs directory: never on a disk, gone at the next boot at the latest.
    """
    commands, path = private_upload(reveal(private_key), KEY_NAME)
    yield from commands
    yield StringCommand("chmod", "600", path)
    commands, _ = private_upload(known_hosts, KNOWN_HOSTS_NAME)
    yield from commands[1:]  # the directory is there


@operation()
def source_key_removed() -> Generator[StringCommand, None, None]:
    """The one-time key, the pinned host key and the send log gone from the source."""
    yield source_key_files_removed()


# --- snapshots ----------------------------------------------------------------------------------


def mariadb_snapshot_script(datasets: Sequence[str], snapshot: str) -> str:
    """One client session: commits blocked (BACKUP STAGE BLOCK_COMMIT), the GTID position read,
    one atomic `zfs snapshot` of every dataset from inside the session (the client's `system`),
    commits released. The position is stored on the snapshots as GTID_PROPERTY."""
    names = [f"{dataset}@{snapshot}" for dataset in datasets]
    snapshots = " ".join(q(name) for name in names)
    session = [
        "SET SESSION lock_wait_timeout = 60;",  # not the default year behind a long DDL
        "BACKUP STAGE START;",
        "BACKUP STAGE BLOCK_COMMIT;",
        "SELECT @@global.gtid_binlog_pos;",
        f"system zfs snapshot {snapshots}",
        "BACKUP STAGE END;",
    ]
    return " ".join(
        [
            "set -o pipefail;",
            "gtid=$(printf '%s\\n'",
            *[q(line) for line in session],
            "| mariadb -NB) ||",
            "{ echo 'the BACKUP STAGE session failed (see above)' >&2; exit 1; };",
            'case $gtid in *[!0-9,-]*) echo "unexpected GTID position: $gtid" >&2; exit 1;; esac;',
            f"zfs list -H -o name {snapshots} >/dev/null ||",
            "{ echo 'zfs snapshot failed inside the BACKUP STAGE session (see above)' >&2; exit 1; };",
            f'zfs set "{GTID_PROPERTY}=${{gtid:-{EMPTY_GTID}}}" {snapshots};',
            f'echo "{REPORT} snapshot {names[0]} at GTID $gtid"',
        ]
    )


def _replica_failed(replica: str) -> None:
    """Stop the operation when the replica failed an earlier step: nothing to do here for it."""
    if state.is_executing and any(h.name == replica for h in getattr(state, "failed_hosts", ())):
        raise OperationError(f"{replica} failed an earlier step: nothing is done here for it")


def _replica_holds(replica: str, snapshot: str) -> bool:
    """Whether the replica holds `snapshot` (its live data dataset's last seed snapshot: the
    seed is in place)."""
    _replica_failed(replica)
    return snapshot in inventory.get_host(replica).get_fact(ZfsDatasetProperties, datasets=[snapshot])


@operation()
def snapshot(
    engine_name: str, datasets: Sequence[str], snapshot: str, replica: str, seeded: str
) -> Generator[StringCommand, None, None]:
    """
    A consistent snapshot of the source's data and log datasets, taken once: PostgreSQL's with one
    `zfs snapshot` of both (atomic across them: what a crash would leave, which the server
    recovers from with its WAL); MariaDB's under BACKUP STAGE BLOCK_COMMIT with its GTID position
    (see `mariadb_snapshot_script`). None once the replica holds the seed in place.

    + engine_name: mariadb | postgresql
    + datasets: the data and log datasets
    + snapshot: the snapshot's name (after the @)
    + replica, seeded: the replica's inventory name and its live data dataset's last seed
      snapshot (DATASET@NAME)
    """
    if _replica_holds(replica, seeded):
        host.noop(f"{replica} holds the seed in place ({seeded})")
        return
    names = [f"{dataset}@{snapshot}" for dataset in datasets]
    found = host.get_fact(ZfsDatasetProperties, datasets=names)
    held = [name for name in names if name in found]
    positioned = all(GTID_PROPERTY in found.get(name, {}) for name in names)
    if len(held) == len(names) and (engine_name != "mariadb" or positioned):
        gtid = found[names[0]].get(GTID_PROPERTY, {}).get("value")
        host.noop(f"{names[0]} exists" + (f" at GTID {gtid}" if gtid else ""))
        return
    if held:
        # A snapshot without its GTID (the session failed after it) or without its sibling was
        # never sent (a send follows only a complete snapshot): take it again.
        for name in held:  # zfs destroy takes one name
            yield StringCommand("zfs", "destroy", QuoteString(name))
    if engine_name == "mariadb":
        yield StringCommand(mariadb_snapshot_script(datasets, snapshot), _shell_executable="bash")
    else:
        yield StringCommand(
            "zfs snapshot",
            *[QuoteString(name) for name in names],
            "&& echo",
            QuoteString(f"{REPORT} snapshot {names[0]}"),
        )


# --- send and receive ---------------------------------------------------------------------------


def send_script(
    source_dataset: str,
    seed: str,
    snapshot: str,
    base: str | None,
    raw: bool,
    address: str,
    bind_address: str,
    attempts: int = ATTEMPTS,
) -> str:
    """Send `source_dataset@snapshot` (incremental from `base`) into `seed` on the replica, through
    the wrapper. Each attempt asks the replica for the seed's receive_resume_token first and
    resumes from it (`zfs send -t`); the bytes that went into the pipe (dd's count) and the time
    are printed as a REPORT line."""
    full = f"{source_dataset}@{snapshot}"
    flags = "-w" if raw else "-L -c"
    incremental = f"-i {q(f'{source_dataset}@{base}')} " if base else ""
    failed = (
        f"{full} was not received into {seed} on {address} after {attempts} attempts; re-run the "
        f"runbook: it resumes from the receive_resume_token (if {full} is gone, run zfs recv -A {seed} "
        "on the replica first)"
    )
    return " ".join(
        [
            "set -o pipefail; trap '' PIPE;",  # a cut pipe is an error to retry, not a kill
            f'r() {{ {ssh_command(address, bind_address)} "$@"; }};',
            f"log={SEND_LOG}; bytes=0; done=no; start=$(date +%s%N);",
            f"for attempt in $(seq {int(attempts)}); do",
            f"token=$(r zfs get -H -o value receive_resume_token {q(seed)} </dev/null) ||",
            f"{{ echo {q(f'cannot ask {address} over ssh for the state of {seed}')} >&2; exit 1; }};",
            "case $token in",
            f"''|-) set -- zfs send {flags} {incremental}{q(full)};;",
            f"*[!0-9A-Za-z-]*) echo {q(f'unexpected resume token from {address}')} >&2; exit 1;;",
            '*) set -- zfs send -t "$token";;',
            "esac;",
            f'"$@" | dd bs=1M 2>"$log" | r zfs recv -s -u {q(seed)} && done=yes;',
            "n=$(sed -n 's/^\\([0-9][0-9]*\\) bytes.*/\\1/p' \"$log\" | tail -n 1);",
            "bytes=$((bytes + ${n:-0}));",
            "[ $done = yes ] && break;",
            f'echo "the send of {full} was cut (attempt $attempt of {int(attempts)})" >&2;',
            f"sleep {int(RETRY_PAUSE)};",
            "done;",
            'rm -f "$log";',
            f"[ $done = yes ] || {{ echo {q(failed)} >&2; exit 1; }};",
            f'echo "{REPORT} sent {full} $bytes bytes in $(( ($(date +%s%N) - start) / 1000000 )) ms"',
        ]
    )


def _live_counts(found: dict, mark: dict[str, str] | None) -> bool:
    """Whether a live dataset holding the snapshot sent means it is in place: always for a seed
    (its snapshot names are its own); for a restore only when `mark` says so ({"snapshot",
    "property", "value"}: the copy's name is a sanoid snapshot the target may hold from before)."""
    if mark is None:
        return True
    return found.get(mark["snapshot"], {}).get(mark["property"], {}).get("value") == mark["value"]


@operation()
def send(
    datasets: Sequence[dict[str, str]],
    snapshot: str,
    replica: str,
    address: str,
    bind_address: str,
    base: str | None = None,
    mark: dict[str, str] | None = None,
) -> Generator[StringCommand, None, None]:
    """
    Send each source dataset's snapshot into its seed dataset on the replica (full, or
    incremental from `base`), compressed as stored (`-c`), raw (`-w`) when encrypted. A dataset
    the replica holds the snapshot of already (as its seed, or in place) is skipped.

    + datasets: {"source": on this host, "seed": on the replica, "live": what the seed becomes}
    + snapshot, base: snapshot names (after the @)
    + replica: its inventory name (its datasets are read from there); address: its replication
      address; bind_address: this host's
    + mark: a live dataset's snapshot counts as sent only with this mark (see _live_counts)
    """
    on_replica = [f"{d[key]}@{snapshot}" for d in datasets for key in ("seed", "live")]
    on_replica += [mark["snapshot"]] if mark else []
    _replica_failed(replica)
    held = inventory.get_host(replica).get_fact(ZfsDatasetProperties, datasets=on_replica)
    if not _live_counts(held, mark):
        held = {
            name: props
            for name, props in held.items()
            if name in [f"{d['seed']}@{snapshot}" for d in datasets]
        }
    sources = host.get_fact(
        ZfsDatasetProperties,
        datasets=[name for d in datasets for name in (d["source"], f"{d['source']}@{snapshot}")],
    )
    pending = [d for d in datasets if not any(f"{d[key]}@{snapshot}" in held for key in ("seed", "live"))]
    if not pending:
        host.noop(f"{replica} holds @{snapshot} of {', '.join(d['live'] for d in datasets)}")
        return
    for d in pending:
        source = d["source"]
        if state.is_executing and f"{source}@{snapshot}" not in sources:
            raise OperationError(f"{source}@{snapshot} does not exist: nothing to send")
        encryption = sources.get(source, {}).get("encryption", {}).get("value", "off")
        raw = encryption not in ("off", "-", "")
        script = send_script(source, d["seed"], snapshot, base, raw, address, bind_address)
        yield StringCommand(script, _shell_executable="bash")


# --- the replica's datasets ---------------------------------------------------------------------


# Properties a stream made with -p or -R could set on what is received, that would expose the
# host once the seed is mounted. Our sends carry no property and no child dataset.
EXPOSING = ("mountpoint", "canmount", "setuid", "exec", "devices", "sharenfs", "sharesmb")


def _received_problems(seed: str, snapshot: str, found: dict) -> list[str]:
    """Why a seed dataset cannot be put in place: not received completely, or not what our
    sends make (children, EXPOSING properties from the stream)."""
    props = found.get(seed)
    if props is None or f"{seed}@{snapshot}" not in found:
        return [f"{seed}@{snapshot} was not received"]
    problems = []
    if props.get("receive_resume_token", {}).get("value", "-") != "-":
        problems.append(f"{seed} holds a partial receive")
    received = sorted(p for p in EXPOSING if props.get(p, {}).get("source") == "received")
    if received:
        problems.append(f"{seed} carries received properties ({', '.join(received)})")
    children = sorted(n for n in found if n.startswith(f"{seed}/"))
    if children:
        problems.append(f"{seed} has children ({', '.join(children)})")
    return problems


@operation()
def put_in_place(
    datasets: Sequence[dict[str, str]],
    snapshot: str,
    position_from: dict[str, str] | None = None,
    mark: dict[str, str] | None = None,
    hold: str | None = None,
) -> Generator[StringCommand, None, None]:
    """
    The received seed datasets take the live ones' names: each live dataset is unmounted (waiting
    out a passing hold, see unmount_command), its mountpoint set to none and renamed aside, its
    seed renamed into its place (still unmounted: the declared properties and the mount come
    next). A live dataset that holds @`snapshot` is the seed already.

    + datasets: {"live": ..., "seed": ..., "aside": ...} each
    + snapshot: the last snapshot received (after the @)
    + position_from: {"host": source, "snapshot": its data dataset's snapshot, "onto": the live
      data dataset}: its GTID_PROPERTY is copied onto the received snapshot, so that the replica
      keeps its position whatever happens to the source's snapshots
    + mark: a live dataset holding @`snapshot` is in place only with this mark (see _live_counts)
    + hold: a `zfs hold` tag put on each seed@`snapshot` before it takes the live name (released
      by the caller once done): the snapshot may be named as sanoid names its own (a restored
      copy), and the target's sanoid prunes by name what its retention does not keep, even one
      that was listed before the rename (CI at c18f420: the copy's `frequently` snapshot pruned
      between the rename and the mark)
    """
    names = [d[key] for d in datasets for key in ("live", "aside")]
    names += [f"{d['live']}@{snapshot}" for d in datasets]
    found = host.get_fact(ZfsDatasetProperties, datasets=names)
    found.update(host.get_fact(ZfsDatasetProperties, datasets=[d["seed"] for d in datasets], recursive=True))
    in_place = _live_counts(found, mark)
    done = []
    for d in datasets:
        live, seed, aside = d["live"], d["seed"], d["aside"]
        if in_place and f"{live}@{snapshot}" in found:
            done.append(live)
            continue
        problems = _received_problems(seed, snapshot, found)
        if problems and state.is_executing:
            raise OperationError(
                "; ".join(problems) + ": the send did not complete; re-run the runbook (it resumes)"
            )
        if live in found and aside in found:
            raise OperationError(f"{aside} exists: {live} cannot be renamed aside; destroy it or rename it")
        if hold:
            yield StringCommand(hold_command(f"{seed}@{snapshot}", hold))
        if live in found:
            yield unmount_command(live)
            yield StringCommand("zfs set mountpoint=none", QuoteString(live))
            yield StringCommand("zfs rename", QuoteString(live), QuoteString(aside))
        yield StringCommand("zfs rename", QuoteString(seed), QuoteString(live))
    if mark and not in_place:
        # with the renames: a run cut after them finds the copy in place
        yield StringCommand(
            "zfs set", QuoteString(f"{mark['property']}={mark['value']}"), QuoteString(mark["snapshot"])
        )
    if position_from:
        # what was found at a live@snapshot not in place is the old dataset's
        yield from _copy_position(position_from, snapshot, found if in_place else {})
    if len(done) == len(datasets) and not position_from:
        host.noop(f"{', '.join(done)} hold @{snapshot}: the seed is in place")


def _copy_position(
    position_from: dict[str, str], snapshot: str, found: dict
) -> Generator[StringCommand, None, None]:
    onto = f"{position_from['onto']}@{snapshot}"
    if GTID_PROPERTY in found.get(onto, {}):
        host.noop(f"{onto} holds its GTID position")
        return
    source = inventory.get_host(position_from["host"]).get_fact(
        ZfsDatasetProperties, datasets=[position_from["snapshot"]]
    )
    gtid = source.get(position_from["snapshot"], {}).get(GTID_PROPERTY, {}).get("value")
    if gtid is None:
        if state.is_executing:
            raise OperationError(
                f"{position_from['snapshot']} on {position_from['host']} holds no GTID position"
            )
        gtid = "<the GTID of the catch-up snapshot>"
    yield StringCommand("zfs set", QuoteString(f"{GTID_PROPERTY}={gtid}"), QuoteString(onto))


@operation()
def mounted(datasets: Sequence[str]) -> Generator[StringCommand, None, None]:
    """Mount each dataset that is not mounted (where its mountpoint property says)."""
    found = host.get_fact(ZfsDatasetProperties, datasets=list(datasets))
    unmounted = [d for d in datasets if found.get(d, {}).get("mounted", {}).get("value") != "yes"]
    if not unmounted:
        host.noop(f"mounted: {', '.join(datasets)}")
    for dataset in unmounted:
        yield StringCommand("zfs mount", QuoteString(dataset))


@operation()
def snapshots_destroyed(
    datasets: Sequence[str], snapshots: Sequence[str], needed_unless: dict[str, str] | None = None
) -> Generator[StringCommand, None, None]:
    """
    The seed snapshots gone. With `needed_unless` ({"host": replica, "snapshot": its live data
    dataset's last seed snapshot}) they are kept while the replica does not hold that snapshot in
    place: a re-run resumes from them.
    """
    if needed_unless and state.is_executing:
        held = inventory.get_host(needed_unless["host"]).get_fact(
            ZfsDatasetProperties, datasets=[needed_unless["snapshot"]]
        )
        if needed_unless["snapshot"] not in held:
            host.noop(
                f"kept: {needed_unless['host']} has not put the seed in place; a re-run resumes from them"
            )
            return
    names = [f"{dataset}@{snapshot}" for dataset in datasets for snapshot in snapshots]
    found = host.get_fact(ZfsDatasetProperties, datasets=names)
    existing = [name for name in names if name in found]
    if not existing:
        host.noop("no seed snapshot left")
    for name in existing:
        yield StringCommand("zfs destroy", QuoteString(name))


@operation()
def replaced_destroyed(datasets: Sequence[str], wipe: bool) -> Generator[StringCommand, None, None]:
    """The datasets renamed aside destroyed (with their snapshots) when the run was told to wipe
    the replica; otherwise kept for the operator."""
    found = host.get_fact(ZfsDatasetProperties, datasets=list(datasets))
    existing = [d for d in datasets if d in found]
    if not existing:
        host.noop("nothing was renamed aside")
        return
    if not wipe:
        host.noop(f"kept for the operator (no --data wipe): {', '.join(existing)}")
        return
    for dataset in existing:
        yield StringCommand("zfs destroy -r", QuoteString(dataset))


# --- the replica's server -----------------------------------------------------------------------


@operation()
def postgresql_standby(
    version: int | str,
    cluster_name: str,
    data_directory: str,
    seeded: str,
    primary_address: str,
    conninfo: str,
    slot: str,
) -> Generator[StringCommand, None, None]:
    """
    Start the received data directory as a standby of the primary: what pg_basebackup leaves out
    removed (postmaster.pid, the source's replication slots), standby.signal and the connection
    settings written, the Debian cluster registered when /etc/postgresql/VERSION/CLUSTER is
    missing, the server started. Prints the redo location recovery starts from (REPORT).

    + seeded: the live data dataset's last seed snapshot (DATASET@NAME): it marks the seed in place
    + conninfo, slot: primary_conninfo (operations.postgresql_topology.conninfo) and slot
    """
    in_place = seeded in host.get_fact(ZfsDatasetProperties, datasets=[seeded])
    live = host.get_fact(PostgresqlLiveRole)
    if state.is_executing:
        if not in_place:
            raise OperationError(f"{seeded} does not exist: the seed is not in place")
        if live is not None:
            if live["in_recovery"] and live["sender"] == primary_address:
                host.noop(f"a standby of {primary_address}, started from the seed")
                return
            raise OperationError(
                f"{host.name}: PostgreSQL runs, not as a standby of {primary_address}; stop it and re-run"
            )
    cluster = host.get_fact(
        PostgresqlCluster, version=version, cluster=cluster_name, data_directory=data_directory
    )
    data = QuoteString(data_directory)
    yield StringCommand(
        f'echo "{REPORT} position redo LSN $(LC_ALL=C',
        CONTROLDATA.format(version=version),
        "-D",
        data,
        "| sed -n 's/^Latest checkpoint.s REDO location: *//p')\"",
    )
    replslot = QuoteString(f"{data_directory}/pg_replslot")
    yield StringCommand(
        "rm -f",
        QuoteString(f"{data_directory}/postmaster.pid"),
        "&& { [ ! -d",
        replslot,
        "] || find",
        replslot,
        "-mindepth 1 -delete; }",
    )
    yield standby_settings(data_directory, conninfo, slot)
    if not cluster["config"]:
        # As operations.postgresql.standby: pg_createcluster moves these files to /etc.
        yield StringCommand(
            "runuser -u postgres -- touch",
            *[
                QuoteString(f"{data_directory}/{f}")
                for f in ("postgresql.conf", "pg_hba.conf", "pg_ident.conf")
            ],
        )
        yield StringCommand("pg_createcluster -d", data, str(version), QuoteString(cluster_name))
    yield StringCommand("systemctl start", pg_unit(version, cluster_name))


def replication_state_files(datadir: str, relay_log: str) -> StringCommand:
    """What RESET SLAVE ALL removes, removed from a stopped server's copied files, so that a copy
    of a replica does not start replicating on its own before it is pointed at its position."""
    files = [f"{q(datadir)}/{name}" for name in ("master.info", "relay-log.info", "multi-master.info")]
    files += [f"{q(datadir)}/master-*.info", f"{q(datadir)}/relay-log-*.info", f"{q(relay_log)}.*"]
    return StringCommand("rm", "-f", *files)


@operation()
def mariadb_replica(
    datadir: str,
    relay_log: str,
    seeded: str,
    primary_address: str,
    replication_user: str,
    password: HiddenValue | str,
    port: int = 3306,
    service: str = "mariadb.service",
) -> Generator[StringCommand | FileUploadCommand, None, None]:
    """
    Start the received datadir and replicate from the primary from the GTID position recorded on
    the seed snapshot: ``STOP SLAVE; RESET SLAVE ALL; SET GLOBAL gtid_slave_pos``, ``CHANGE
    MASTER TO ... MASTER_USE_GTID=slave_pos``, ``START SLAVE`` (the password only in an uploaded
    root-only file), then the snapshot is marked (CONFIGURED_PROPERTY). Prints the position
    (REPORT). Once marked, the position is never set again (the server has applied more since):
    a stopped server is only started.

    + datadir, relay_log: the server's paths (roles.render.mariadb_paths)
    + seeded: the live data dataset's last seed snapshot (DATASET@NAME), holding GTID_PROPERTY
    + primary_address, replication_user, password, port: the replication account on the primary
    """
    status = host.get_fact(MariadbReplicaStatus)
    props = host.get_fact(ZfsDatasetProperties, datasets=[seeded]).get(seeded)
    if state.is_executing and props is None:
        raise OperationError(f"{seeded} does not exist: the seed is not in place")
    if props is not None and status and status.get("Master_Host") == primary_address:
        host.noop(f"replicates from {primary_address}, started from the seed")
        return
    if CONFIGURED_PROPERTY in (props or {}):
        if status is not None:
            raise OperationError(
                f"{host.name}: replication was set up from the seed, but the server replicates from "
                f"{status.get('Master_Host') or 'nobody'}; look at it (SHOW SLAVE STATUS)"
            )
        yield StringCommand("systemctl", "start", QuoteString(service))
        return
    gtid = (props or {}).get(GTID_PROPERTY, {}).get("value")
    if gtid is None:
        if state.is_executing:
            raise OperationError(f"{seeded} holds no GTID position ({GTID_PROPERTY})")
        gtid = "<the GTID of the catch-up snapshot>"
    position = "" if gtid == EMPTY_GTID else gtid
    if status is None or not state.is_executing:
        yield replication_state_files(datadir, relay_log)
        yield StringCommand("systemctl", "start", QuoteString(service))
    yield StringCommand("echo", QuoteString(f"{REPORT} position GTID {position}"))
    yield from run_secret_sql(
        "seed-replica.sql",
        "STOP SLAVE;\nRESET SLAVE ALL;\n"
        f"SET GLOBAL gtid_slave_pos = {sql_string(position)};\n"
        + change_master_sql(primary_address, port, replication_user, reveal(password))
        + "START SLAVE;\n",
    )
    yield StringCommand("zfs set", QuoteString(f"{CONFIGURED_PROPERTY}=yes"), QuoteString(seeded))


def key_cleanup(role: str, marker: str) -> list[StringCommand]:
    """What removes the one-time key from a host that stopped before its cleanup step (the
    runbook's failure handler runs them): the source's key files, the replica's key line."""
    return [source_key_files_removed()] if role == "source" else [authorized_keys_without(marker)]
