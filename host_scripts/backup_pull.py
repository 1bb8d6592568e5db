#!/usr/bin/python3
"""Pull the database hosts' snapshots into the backup host's pool with syncoid (dbzfs).

Copied to the backup host as /usr/local/lib/dbzfs/backup_pull.py and run as root by
dbzfs-backup-pull.service (dbzfs-backup-pull.timer); roles/backup.py writes its --config:

    python3 /usr/local/lib/dbzfs/backup_pull.py --config /etc/dbzfs/backup/sources.json
        [--only HOST ...] [--dry-run]

For each source host and each of its datasets (role "data", "log"), into
<target>/<cluster>/<host>/<role>:

1. the source's snapshots are listed over ssh (as the config's user, who may only `zfs send`).
   Only the ones db_snapshot.py takes count (`autosnap_*`): with none, the host takes no snapshots
   in its present role (they are taken on a replica) and the dataset is skipped, not failed. An
   ssh failure fails every dataset of that host; the other hosts still run;
2. the copies already here are listed. When they share no snapshot with the source (the source
   dataset was re-created: a replica re-seeded, a compression rewrite; or the source pruned every
   snapshot the copies have), or they hold none and no receive to resume (every copy pruned here: a
   restored source's only snapshot, of a kind this host keeps none of), syncoid would refuse, and
   `--force-delete` would destroy the backup's history: the copies are renamed to <role>-until-<UTC
   stamp> instead, kept as they are, and the pull starts again with a full send. When the copies do
   share one with the source but also hold snapshots after it that the source no longer has (a
   rollback there, or their pruning there while the pulls failed longer than its retention), the
   pull would have to roll them back: it fails instead, saying which and how to keep or drop them;
3. syncoid pulls: raw sends with the properties (`zfs send -w -p`: the blocks as compressed on
   the source, each snapshot's dbzfs:gtid / dbzfs:lsn with it), only what is newer than the
   newest snapshot in common, resumable, received unmounted and never mountable, never rolling
   the copies back (`--no-rollback`: a rollback would destroy copies newer than the one in common).

Each line of output says what became of one dataset; the metrics (node_exporter's textfile
collector, written atomically) hold, per source and dataset pulled, whether the pull succeeded,
the number of copies and the newest one's creation time; skipped datasets have no series, so a
host that takes no snapshots raises no alert. --only and --dry-run runs leave the metrics file
alone (they do not pull every source); --dry-run still runs the listings (read-only) and prints
the commands that would change anything.

Exit status: 0 when every pull attempted succeeded, 1 when one failed, 2 for a bad config.
Python 3.11 standard library only (Debian 12's python3); the pure functions are unit-tested and
every command goes through an injectable runner.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

PREFIX = "autosnap_"  # db_snapshot.py's names, as sanoid's
ROLES = ("data", "log")
CONNECT_TIMEOUT = 20
LIST_TIMEOUT = 120
SSH_FAILED = 255  # ssh's own exit status; any other is the remote command's
TIMED_OUT = 124
TAIL_LINES = 5
# syncoid 2.1.0 pastes the key path, the ssh options, user@host and dataset names into shell
# command lines unquoted (or quoted once for a remote shell): only plain characters are accepted.
PLAIN_PATH = re.compile(r"/[A-Za-z0-9_./-]+")
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
PLAIN_DATASET = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*(/[A-Za-z0-9_][A-Za-z0-9_.:-]*)*")
A_PATH = "an absolute path (letters, digits, _ . - /)"
A_DATASET = "a dataset name (letters, digits, _ . : - /)"

METRICS = {
    "dbzfs_backup_pull_success": "1 when the last pull of the source's dataset succeeded, else 0.",
    "dbzfs_backup_newest_copy_timestamp_seconds": "Creation time (Unix) of the newest snapshot of the "
    "source's dataset held by the backup host.",
    "dbzfs_backup_copies": "Snapshots of the source's dataset held by the backup host.",
    "dbzfs_backup_last_run_timestamp_seconds": "Unix time of the last run of dbzfs-backup-pull.",
    "dbzfs_backup_run_success": "1 when every pull of the last run of dbzfs-backup-pull succeeded, else 0.",
}


class ConfigError(ValueError):
    pass


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[..., Result]  # (argv, timeout=seconds or None) -> Result; never raises


@dataclass(frozen=True)
class Source:
    host: str
    address: str
    cluster: str
    engine: str
    datasets: Mapping[str, str]  # role -> dataset on the source


@dataclass(frozen=True)
class Config:
    target: str
    user: str
    ssh_key: str
    known_hosts: str
    metrics: str | None
    sources: Sequence[Source]


@dataclass(frozen=True)
class Snapshot:
    name: str  # after the @
    guid: str
    creation: int


@dataclass(frozen=True)
class Outcome:
    host: str
    role: str
    status: str  # one of the STATUS keys
    detail: str = ""
    copies: Sequence[Snapshot] | None = None  # on the backup host after the pull; None: unknown


STATUS = {"pulled": "pulled", "current": "up to date", "none": "no snapshots", "dry": "dry run"}
FAILED = "failed"


# --- the config ----------------------------------------------------------------------------------


def load_config(text: str) -> Config:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError("not a JSON object")
    metrics = raw.get("metrics")
    if metrics is not None:
        metrics = _checked(raw, "metrics", PLAIN_PATH, A_PATH)
    sources = raw.get("sources")
    if not isinstance(sources, list):
        raise ConfigError("'sources': missing or not a list")
    config = Config(
        target=_checked(raw, "target", PLAIN_DATASET, A_DATASET),
        user=_checked(raw, "user", PLAIN_NAME, "an account name (letters, digits, _ . -)"),
        ssh_key=_checked(raw, "ssh_key", PLAIN_PATH, A_PATH),
        known_hosts=_checked(raw, "known_hosts", PLAIN_PATH, A_PATH),
        metrics=metrics,
        sources=[_source(item, f"'sources'[{i}]") for i, item in enumerate(sources)],
    )
    hosts = [s.host for s in config.sources]
    for host in hosts:
        if hosts.count(host) > 1:
            raise ConfigError(f"'sources': host {host!r} listed twice")
    return config


def _checked(raw: Mapping[str, Any], key: str, pattern: re.Pattern[str], what: str, where: str = "") -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        found = "missing" if value is None else repr(value)
        raise ConfigError(f"{where}'{key}': {found}, expected {what}")
    return value


def _source(item: object, where: str) -> Source:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: not a JSON object")
    host = _checked(item, "host", PLAIN_NAME, "a host name (letters, digits, _ . -)", f"{where} ")
    where = f"{where} ({host}) "
    datasets = item.get("datasets")
    if not isinstance(datasets, dict) or not datasets:
        raise ConfigError(f"{where}'datasets': missing or empty, expected {{role: dataset}}")
    for role in datasets:
        if role not in ROLES:
            raise ConfigError(f"{where}'datasets': unknown role {role!r}, expected {' or '.join(ROLES)}")
    return Source(
        host=host,
        # no IPv6 literal: syncoid 2.1.0 splits user@host:dataset at the first colon
        address=_checked(item, "address", PLAIN_NAME, "an IPv4 address or a host name (no IPv6)", where),
        cluster=_checked(item, "cluster", PLAIN_NAME, "a cluster name (letters, digits, _ . -)", where),
        engine=_checked(item, "engine", PLAIN_NAME, "an engine name (letters, digits, _ . -)", where),
        datasets={
            role: _checked(datasets, role, PLAIN_DATASET, A_DATASET, f"{where}'datasets' ")
            for role in ROLES
            if role in datasets
        },
    )


def selected(sources: Sequence[Source], only: Sequence[str]) -> list[Source]:
    unknown = sorted(set(only) - {s.host for s in sources})
    if unknown:
        raise ConfigError(f"--only {', '.join(unknown)}: not in 'sources'")
    return [s for s in sources if not only or s.host in only]


# --- commands (pure) -----------------------------------------------------------------------------


def ssh_options(config: Config) -> list[str]:
    return [
        "BatchMode=yes",
        "StrictHostKeyChecking=accept-new",  # known_hosts keeps each host's key as first seen
        f"UserKnownHostsFile={config.known_hosts}",
        f"ConnectTimeout={CONNECT_TIMEOUT}",
    ]


def login(config: Config, source: Source) -> str:
    return f"{config.user}@{source.address}"


def list_command(dataset: str) -> list[str]:
    """Oldest first; snapshots created in the same second in the order they were taken (zfs list
    breaks ties between snapshots of a dataset by createtxg)."""
    fields = ["-o", "name,guid,creation", "-s", "creation"]
    return ["zfs", "list", "-H", "-p", "-t", "snapshot", *fields, "-d", "1", dataset]


def source_list_command(config: Config, source: Source, dataset: str) -> list[str]:
    options = [arg for option in ssh_options(config) for arg in ("-o", option)]
    return ["ssh", "-i", config.ssh_key, *options, login(config, source), *list_command(dataset)]


def syncoid_command(config: Config, source: Source, dataset: str, target: str) -> list[str]:
    return [
        "syncoid",
        "--no-sync-snap",  # the source's own snapshots only: its account may not snapshot
        "--no-privilege-elevation",  # no sudo there: `zfs allow send` is enough
        "--no-rollback",
        # Raw (the blocks as compressed on the source) with the properties: a snapshot's
        # dbzfs:gtid / dbzfs:lsn travel with it. Received unmounted, never mountable, and not at
        # the source's mountpoint (the copies inherit mountpoint=none).
        "--sendoptions=w p",
        "--recvoptions=u o canmount=off x mountpoint",
        "--compress=none",  # raw sends are compressed already
        "--sshkey",
        config.ssh_key,
        *(f"--sshoption={option}" for option in ssh_options(config)),
        f"{login(config, source)}:{dataset}",
        target,
    ]


def target_dataset(config: Config, source: Source, role: str) -> str:
    return f"{config.target}/{source.cluster}/{source.host}/{role}"


def create_parent_command(target: str) -> list[str]:
    # -p: <cluster> too if missing (mountpoint none, inherited); the -o is for the last one only
    return ["zfs", "create", "-p", "-o", "canmount=off", target.rsplit("/", 1)[0]]


def set_aside_name(target: str, now: datetime) -> str:
    return f"{target}-until-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}"


def rename_command(target: str, new_name: str) -> list[str]:
    return ["zfs", "rename", target, new_name]


# --- what the listings say (pure) ----------------------------------------------------------------


def written_command(target: str) -> list[str]:
    return ["zfs", "get", "-H", "-p", "-o", "value", "written", target]


def resume_token_command(target: str) -> list[str]:
    return ["zfs", "get", "-H", "-o", "value", "receive_resume_token", target]


def rollback_command(target: str, snapshot: str) -> list[str]:
    """Back to the newest snapshot: without -r it destroys nothing, it drops the head's blocks."""
    return ["zfs", "rollback", f"{target}@{snapshot}"]


def parse_snapshots(text: str, dataset: str) -> list[Snapshot]:
    """The dataset's snapshots, from `zfs list -H -p -t snapshot -o name,guid,creation`."""
    snapshots = []
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 3 or not fields[1].isdigit() or not fields[2].isdigit():
            continue
        ds, _, name = fields[0].partition("@")
        if ds == dataset and name:
            snapshots.append(Snapshot(name, fields[1], int(fields[2])))
    return snapshots


def autosnaps(snapshots: Iterable[Snapshot]) -> list[Snapshot]:
    return [s for s in snapshots if s.name.startswith(PREFIX)]


def shares_a_snapshot(source: Iterable[Snapshot], copies: Iterable[Snapshot]) -> bool:
    """Whether syncoid can pull incrementally: it looks for a snapshot of the same name and guid on
    both sides (getmatchingsnapshot)."""
    return bool({(s.name, s.guid) for s in source} & {(c.name, c.guid) for c in copies})


def must_set_aside(source: Sequence[Snapshot], copies: Sequence[Snapshot] | None) -> bool:
    """Copies that share nothing with the source. A target with no snapshot at all is left to
    syncoid: it is an interrupted first receive, which syncoid resumes."""
    return bool(copies) and not shares_a_snapshot(source, copies or ())


def gone_from_source(source: Iterable[Snapshot], copies: Sequence[Snapshot]) -> list[Snapshot]:
    """The copies after the newest one the source still has (in the listing's order): the source
    no longer has them (rolled back, or they were pruned there while the pulls failed). An
    incremental receive refuses a target with snapshots after its base unless allowed to roll
    them back (syncoid without --no-rollback), which would destroy these copies."""
    on_source = {(s.name, s.guid) for s in source}
    shared = [i for i, c in enumerate(copies) if (c.name, c.guid) in on_source]
    return list(copies[shared[-1] + 1 :]) if shared else []


def new_copies(before: Iterable[Snapshot], after: Iterable[Snapshot]) -> int:
    known = {s.guid for s in before}
    return sum(1 for s in after if s.guid not in known)


def newest(snapshots: Iterable[Snapshot]) -> Snapshot | None:
    return max(snapshots, key=lambda s: s.creation, default=None)


def failure_tail(result: Result) -> str:
    """The end of what a command said on failure. syncoid prints some of its errors (no matching
    snapshot) to stdout, the commands it runs print theirs to stderr: both are kept."""
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()][-TAIL_LINES:]
    lines += [
        line.strip() for line in result.stdout.splitlines() if line.startswith(("CRITICAL", "ERROR", "WARN"))
    ][-TAIL_LINES:]
    return " | ".join(lines) or f"exit status {result.returncode}"


# --- pulling -------------------------------------------------------------------------------------


def run(argv: Sequence[str], timeout: float | None = LIST_TIMEOUT) -> Result:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Result(TIMED_OUT, "", f"{argv[0]} timed out after {timeout:.0f} s")
    except OSError as exc:
        return Result(127, "", f"{argv[0]}: {exc}")
    return Result(done.returncode, done.stdout, done.stderr)


class SourceUnreachable(RuntimeError):
    """ssh to the source failed: every dataset of that source fails."""


class PullFailed(RuntimeError):
    """This dataset fails."""


class StepFailed(PullFailed):
    """A command failed."""

    def __init__(self, what: str, result: Result) -> None:
        super().__init__(f"{what} failed: {failure_tail(result)}")


class Puller:
    """One run: the config, the runner, the time, and whether to change anything."""

    def __init__(self, config: Config, runner: Runner, now: datetime, dry_run: bool = False) -> None:
        self.config = config
        self.runner = runner
        self.now = now
        self.dry_run = dry_run

    def source(self, source: Source) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for role, dataset in source.datasets.items():
            try:
                outcomes.append(self.dataset(source, role, dataset))
            except SourceUnreachable as exc:
                left = list(source.datasets)[len(outcomes) :]
                outcomes += [
                    Outcome(source.host, r, FAILED, str(exc), self.copies_if_any(source, r)) for r in left
                ]
                break
        return outcomes

    def dataset(self, source: Source, role: str, dataset: str) -> Outcome:
        notes: list[str] = []
        try:
            return self.pull(source, role, dataset, notes)
        except PullFailed as exc:
            return Outcome(
                source.host, role, FAILED, _joined([*notes, str(exc)]), self.copies_if_any(source, role)
            )

    def pull(self, source: Source, role: str, dataset: str, notes: list[str]) -> Outcome:
        """Pulls one dataset; what it did to the copies goes into `notes` as it goes."""
        target = target_dataset(self.config, source, role)
        on_source = self.source_snapshots(source, dataset)
        if not autosnaps(on_source):
            return Outcome(source.host, role, "none", f"{dataset} has no {PREFIX}* snapshot, skipped")
        before = self.copies(target)
        if before is None:
            self.change(create_parent_command(target), "creating its parent")
        elif must_set_aside(on_source, before) or (before == [] and not self.resumable(target)):
            # Without a snapshot and a receive to resume, the copies were all pruned here (a
            # source restored or re-seeded holds one snapshot at first, of a kind this host may
            # keep none of): its head is what is left, and syncoid refuses it.
            why = "shared no snapshot with" if before else "had no snapshot left of"
            aside = set_aside_name(target, self.now)
            self.change(rename_command(target, aside), f"renaming {target}")
            notes.append(f"full send: the copies {why} {dataset}, set aside as {aside}")
            before = None
        elif gone := gone_from_source(on_source, before):
            raise PullFailed(diverged_message(target, before, gone))
        if before and self.head_written(target):
            # Never mounted, so only a pruned snapshot leaves blocks in the head: sanoid destroyed
            # the newest copy (a kind this host keeps none of), and a receive would refuse.
            self.change(rollback_command(target, before[-1].name), f"rolling {target} back")
            notes.append(f"rolled back to {before[-1].name}, the newest copy (a newer one was pruned)")
        self.change(syncoid_command(self.config, source, dataset, target), "syncoid", timeout=None)
        if self.dry_run:
            return Outcome(source.host, role, "dry", _joined(notes))
        after = self.copies(target) or []
        count = new_copies(before or (), after)
        if not count:
            return Outcome(source.host, role, "current", _joined(notes), after)
        notes.insert(0, f"{count} new snapshot{'s' * (count != 1)}")
        return Outcome(source.host, role, "pulled", _joined(notes), after)

    def source_snapshots(self, source: Source, dataset: str) -> list[Snapshot]:
        listed = self.runner(source_list_command(self.config, source, dataset), timeout=LIST_TIMEOUT)
        if listed.returncode in (SSH_FAILED, TIMED_OUT):
            raise SourceUnreachable(f"ssh to {login(self.config, source)} failed: {failure_tail(listed)}")
        if listed.returncode != 0:
            raise StepFailed(f"listing the snapshots of {dataset} on {source.host}", listed)
        return parse_snapshots(listed.stdout, dataset)

    def copies(self, target: str) -> list[Snapshot] | None:
        """The target's snapshots; None when the target does not exist."""
        listed = self.runner(list_command(target), timeout=LIST_TIMEOUT)
        if listed.returncode == 0:
            return parse_snapshots(listed.stdout, target)
        if "dataset does not exist" in listed.stderr:
            return None
        raise StepFailed(f"listing the snapshots of {target}", listed)

    def resumable(self, target: str) -> bool:
        """Whether an interrupted receive into the target can be resumed (syncoid does)."""
        got = self.runner(resume_token_command(target), timeout=LIST_TIMEOUT)
        if got.returncode != 0:
            raise StepFailed(f"reading the receive_resume_token of {target}", got)
        return got.stdout.strip() not in ("", "-")

    def head_written(self, target: str) -> bool:
        """Whether the copy's head differs from its newest snapshot (zfs receive refuses then)."""
        got = self.runner(written_command(target), timeout=LIST_TIMEOUT)
        if got.returncode != 0 or not got.stdout.strip().isdigit():
            raise StepFailed(f"reading what was written to {target}", got)
        return int(got.stdout.strip()) > 0

    def copies_if_any(self, source: Source, role: str) -> list[Snapshot] | None:
        """After a failure, for the metrics: the copies are still watched while the pulls fail."""
        try:
            return self.copies(target_dataset(self.config, source, role))
        except StepFailed:
            return None

    def change(self, argv: list[str], what: str, timeout: float | None = LIST_TIMEOUT) -> None:
        if self.dry_run:
            print(f"backup_pull: dry run: {shlex.join(argv)}", flush=True)
            return
        done = self.runner(argv, timeout=timeout)
        if done.returncode != 0:
            raise StepFailed(what, done)


def diverged_message(target: str, copies: Sequence[Snapshot], gone: Sequence[Snapshot]) -> str:
    base = copies[len(copies) - len(gone) - 1].name
    return (
        f"{len(gone)} copies after {base} ({gone[0].name} ... {gone[-1].name}) are no longer on the "
        f"source; pulling would roll them back. Keep them: `zfs rename {target} {target}-until-...`, "
        f"or drop them: `zfs rollback -r {target}@{base}`; then pull again"
    )


def _joined(parts: Iterable[str]) -> str:
    return "; ".join(p for p in parts if p)


# --- the report and the metrics ------------------------------------------------------------------


def report_line(outcome: Outcome) -> str:
    if outcome.status == FAILED:
        return f"{outcome.host} {outcome.role}: FAILED: {outcome.detail}"
    separator = " " if outcome.status == "pulled" else ": "
    text = f"{outcome.host} {outcome.role}: {STATUS[outcome.status]}"
    if outcome.detail:
        text += separator + outcome.detail
    if outcome.copies is not None:
        last = newest(outcome.copies)
        text += f"; {len(outcome.copies)} copies" + (f", newest {last.name}" if last else "")
    return text


def summary(outcomes: Sequence[Outcome]) -> str:
    counts = {label: 0 for label in (*STATUS, FAILED)}
    for outcome in outcomes:
        counts[outcome.status] += 1
    labels = {**STATUS, FAILED: "failed"}
    return ", ".join(f"{counts[key]} {labels[key]}" for key in counts if counts[key] or key == FAILED)


def run_succeeded(outcomes: Iterable[Outcome]) -> bool:
    return all(o.status != FAILED for o in outcomes)


def metrics_text(outcomes: Sequence[Outcome], now: datetime) -> str:
    pulled = [o for o in outcomes if o.status in ("pulled", "current", FAILED)]
    samples: dict[str, list[tuple[str, int]]] = {name: [] for name in METRICS}
    for o in pulled:
        labels = f'{{source="{o.host}",dataset="{o.role}"}}'
        samples["dbzfs_backup_pull_success"].append((labels, int(o.status != FAILED)))
        last = newest(o.copies or ())
        if o.copies is not None:
            samples["dbzfs_backup_copies"].append((labels, len(o.copies)))
        if last:
            samples["dbzfs_backup_newest_copy_timestamp_seconds"].append((labels, last.creation))
    samples["dbzfs_backup_last_run_timestamp_seconds"].append(("", int(now.timestamp())))
    samples["dbzfs_backup_run_success"].append(("", int(run_succeeded(outcomes))))
    return "".join(
        f"# HELP {name} {METRICS[name]}\n# TYPE {name} gauge\n"
        + "".join(f"{name}{labels} {value}\n" for labels, value in samples[name])
        for name in METRICS
    )


def write_metrics(path: str, text: str) -> None:
    """For node_exporter's textfile collector, atomically (a dot file, then renamed)."""
    directory, base = os.path.split(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            os.fchmod(handle.fileno(), 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


# --- the command line ----------------------------------------------------------------------------


def main(argv: list[str] | None = None, runner: Runner = run, now: datetime | None = None) -> int:
    parser = argparse.ArgumentParser(description="Pull the database hosts' snapshots with syncoid.")
    parser.add_argument("--config", required=True, help="the sources, as roles/backup.py writes them")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="HOST",
        help="pull this source only (repeatable); the metrics file is then left alone",
    )
    parser.add_argument("--dry-run", action="store_true", help="list, and print what would be changed")
    args = parser.parse_args(argv)
    try:
        with open(args.config, encoding="utf-8") as handle:
            config = load_config(handle.read())
        sources = selected(config.sources, args.only)
    except (OSError, ConfigError) as exc:
        print(f"backup_pull: {args.config}: {exc}", file=sys.stderr)
        return 2
    now = now or datetime.now(UTC).replace(microsecond=0)
    puller = Puller(config, runner, now, dry_run=args.dry_run)
    outcomes = []
    for source in sources:
        for outcome in puller.source(source):
            print(f"backup_pull: {report_line(outcome)}", flush=True)
            outcomes.append(outcome)
    print(f"backup_pull: {summary(outcomes)}")
    if config.metrics and not args.only and not args.dry_run:
        write_metrics(config.metrics, metrics_text(outcomes, now))
    return 0 if run_succeeded(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
