"""A rolling converge, planned and judged: deploy.py one host at a time, each replication group's
replicas before its primary, and health gates between hosts (day2/rolling_run.py runs it).

A primary (roll_primary = "switchover", the default, in a group with replicas) is not converged
where it is: once its replicas are, it is switched over to one of them (runbooks/switchover.py),
converged as that replica's replica, with the inventory its roles then have (`swapped_hosts`,
`swapped_inventory_text`), and switched back, so the fleet ends as the inventory says. Its writes
are refused for the two switchovers' seconds instead of for its restart or its compression rewrite.

Pure: the plan from the inventory's data, the commands each gate runs on a host and the verdict
from their output. A gate's verdict is (passed, detail); the runner retries a failing gate until
its timeout, then stops the roll at that host.

Gates, after a host's converge:

- `server`: its database server answers a query;
- `replication`: a replica replicates from its primary and has applied what it received (MariaDB:
  both threads running, Seconds_Behind_Master within max_lag; PostgreSQL: its WAL receiver
  streaming and everything received replayed); a primary: every replica of its group does;
- `pool`: the pool is ONLINE and below its capacity threshold (zfs_capacity_threshold);
- `checks`: the host's testinfra checks (tests/infra) pass.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from day2 import kit
from model.hostdata import HostConfig
from model.zfs_properties import BLOCKS_COMPRESSION, blocks_record, same_value

GATES = ("server", "replication", "pool", "checks")


@dataclass(frozen=True)
class Step:
    """One host of the roll, with the group it belongs to and its declared role."""

    host: str
    engine: str
    cluster: str
    role: str
    primary: str | None  # a replica's primary
    # A primary rolled through a switchover: the replica it moves to while it is converged.
    switch_to: str | None = None

    @property
    def group(self) -> str:
        """The replication group's name: its cluster (named after the engine unless set)."""
        return self.engine if self.cluster == self.engine else f"{self.engine}/{self.cluster}"


def plan(hosts: Mapping[str, Mapping], only: set[str] | None = None) -> list[Step]:
    """The order of the roll: groups in inventory order, in each its replicas (inventory order)
    then its primary. `only`: host names to roll (the others of their groups are left as they
    are); every name in it must be in the inventory."""
    configs = [HostConfig.from_data(name, data) for name, data in hosts.items()]
    unknown = sorted((only or set()) - {c.name for c in configs})
    if unknown:
        raise ValueError(f"not in the inventory: {', '.join(unknown)}")
    groups: dict[tuple[str, str], list[HostConfig]] = {}
    for c in configs:
        groups.setdefault((c.engine, c.cluster), []).append(c)
    steps = []
    for members in groups.values():
        replicas = [m for m in members if m.role == "replica"]
        ordered = replicas + [m for m in members if m.role != "replica"]
        for m in ordered:
            if only is None or m.name in only:
                switch_to = None
                if m.role == "primary" and m.roll_primary == "switchover":
                    switch_to = switchover_target(m.name, replicas, only)
                steps.append(
                    Step(
                        m.name,
                        m.engine,
                        m.cluster,
                        m.role,
                        m.primary if m.role == "replica" else None,
                        switch_to,
                    )
                )
    return steps


def switchover_target(primary: str, replicas: Sequence[HostConfig], only: set[str] | None) -> str | None:
    """The replica a primary moves to while it is converged: its first replica this roll
    converges before it, else its first replica (--limit left them all out); None without one."""
    own = [r.name for r in replicas if r.primary == primary]
    rolled = [name for name in own if only is None or name in only]
    return (rolled or own or [None])[0]


def roles_after(members: Sequence[str], new_primary: str) -> dict[str, dict]:
    """The group's role data once `new_primary` is its primary (as day2.switchover.new_roles)."""
    return {
        name: {"role": "primary", "primary": None}
        if name == new_primary
        else {"role": "replica", "primary": new_primary}
        for name in members
    }


def swapped_hosts(hosts: Mapping[str, Mapping], primary: str, new_primary: str) -> dict[str, dict]:
    """The inventory's host data while `new_primary` is the primary of `primary`'s group: its
    members with `roles_after`, every other host as it is."""
    roles = roles_after([primary, *replicas_of(hosts, primary)], new_primary)
    return {name: {**data, **roles.get(name, {})} for name, data in hosts.items()}


def swapped_inventory_text(inventory: str, primary: str, new_primary: str, members: Sequence[str]) -> str:
    """A pyinfra inventory file: `inventory` (an absolute path) with the roles `swapped_hosts`
    gives, written where the roll keeps its state while the primary is switched over."""
    return kit.overridden_inventory_text(
        inventory,
        roles_after(members, new_primary),
        f"day2/rolling_run.py: {inventory} while {new_primary} stands in for\n{primary} as the primary "
        f"(runbooks/switchover.py), {primary} converged as its replica.",
    )


REFUSED = re.compile(r"writes were refused for ([0-9.]+) s")


def refused_seconds(output: str) -> float | None:
    """How long runbooks/switchover.py's report says writes were refused."""
    found = REFUSED.findall(ANSI.sub("", output))
    return float(found[-1]) if found else None


def replicas_of(steps_or_hosts: Mapping[str, Mapping], primary: str) -> list[str]:
    """The inventory's replicas of `primary`, in inventory order."""
    return [
        name
        for name, data in steps_or_hosts.items()
        if data.get("role") == "replica" and data.get("primary") == primary
    ]


# --- gate commands (run as root on the host) --------------------------------------------------

PSQL = "cd / && runuser -u postgres -- psql -XAtq -v ON_ERROR_STOP=1 -c"


def server_command(engine: str) -> str:
    if engine == "mariadb":
        return "mariadb -N -e 'SELECT 1'"
    return f"{PSQL} 'SELECT 1'"


def replica_command(engine: str) -> str:
    if engine == "mariadb":
        return "mariadb -E -e 'SHOW SLAVE STATUS'"
    return (
        f"{PSQL} \"SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), 'none'), "
        # >=, not =: a restarted standby streams from the start of its last segment, so what it
        # received stays behind what it replayed (from its own pg_wal) until the primary writes.
        'pg_is_in_recovery(), pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()" -F " "'
    )


def lag_command(engine: str, standby: str, slot: str) -> str:
    """How far a replica is behind while its datasets are rewritten. PostgreSQL, run on its
    primary: bytes of WAL the standby has not replayed (pg_stat_replication while it streams,
    else what its slot holds). MariaDB, run on the replica: SHOW SLAVE STATUS."""
    if engine == "mariadb":
        return replica_command(engine)
    for name in (standby, slot):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"not a host or slot name: {name!r}")
    return (
        f'{PSQL} "SELECT coalesce((SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) '
        f"FROM pg_stat_replication WHERE application_name = '{standby}' LIMIT 1), "
        "(SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) FROM pg_replication_slots "
        f"WHERE slot_name = '{slot}'))::bigint\""
    )


def lag_value(engine: str, rc: int, output: str) -> float | None:
    """`lag_command`'s answer: bytes (PostgreSQL) or seconds (MariaDB); None when the server
    did not say (a stopped replica, no slot)."""
    if rc != 0:
        return None
    if engine == "mariadb":
        for line in output.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Seconds_Behind_Master":
                return float(value) if value.strip().isdigit() else None
        return None
    value = output.strip()
    return float(value) if re.fullmatch(r"-?\d+", value) else None


def lag_summary(engine: str, samples: Sequence[float | None]) -> dict:
    """The largest lag seen and how many samples the server did not answer (stopped)."""
    known = [v for v in samples if v is not None]
    return {
        "unit": "s" if engine == "mariadb" else "bytes",
        "max": max(known) if known else None,
        "samples": len(samples),
        "unanswered": len(samples) - len(known),
    }


def lag_line(lag: Mapping) -> str:
    if lag["max"] is None:
        most = "unknown"
    elif lag["unit"] == "bytes":
        size = mib(lag["max"]) if lag["max"] >= 1024**2 else f"{lag['max'] / 1024:.0f} KiB"
        most = f"at most {size} of WAL behind"
    else:
        most = f"at most {lag['max']:.0f} s behind"
    return f"replication lag during it: {most} ({lag['samples']} samples, {lag['unanswered']} unanswered)"


def pool_command(pool: str) -> str:
    return f"zpool list -H -o health,capacity {pool}"


# --- verdicts ---------------------------------------------------------------------------------


def server_verdict(rc: int, output: str) -> tuple[bool, str]:
    if rc == 0 and output.strip() == "1":
        return True, "answers"
    return False, f"does not answer (exit {rc}): {output.strip()[-300:] or 'no output'}"


def mariadb_replica_verdict(output: str, primary_address: str | None, max_lag: int) -> tuple[bool, str]:
    status = {}
    for line in output.splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith("***"):
            status[key.strip()] = value.strip()
    if not status:
        return False, "replicates from nobody (SHOW SLAVE STATUS is empty)"
    if primary_address and status.get("Master_Host") != primary_address:
        return False, f"replicates from {status.get('Master_Host')}, not {primary_address}"
    io, sql = status.get("Slave_IO_Running"), status.get("Slave_SQL_Running")
    if io != "Yes" or sql != "Yes":
        error = status.get("Last_IO_Error") or status.get("Last_SQL_Error") or "no error recorded"
        return False, f"replication threads IO {io}, SQL {sql}: {error}"
    lag = status.get("Seconds_Behind_Master")
    if lag in (None, "", "NULL") or int(lag) > max_lag:
        return False, f"{lag} s behind its primary (at most {max_lag})"
    return True, f"replicating, {lag} s behind"


def postgresql_replica_verdict(output: str) -> tuple[bool, str]:
    parts = output.split()
    if len(parts) != 3:
        return False, f"unexpected answer: {output.strip()[-300:] or 'none'}"
    status, in_recovery, replayed = parts
    if in_recovery != "t":
        return False, "not in recovery: it is not a standby"
    if status != "streaming":
        return False, f"WAL receiver {status}, not streaming"
    if replayed != "t":
        return False, "streaming, not everything received replayed yet"
    return True, "streaming, everything received replayed"


def pool_verdict(output: str, threshold: int) -> tuple[bool, str]:
    parts = output.split()
    if len(parts) != 2:
        return False, f"no pool: {output.strip()[-300:] or 'no output'}"
    health, capacity = parts[0], int(parts[1].rstrip("%"))
    if health != "ONLINE":
        return False, f"{health}, not ONLINE"
    if capacity >= threshold:
        return False, f"{capacity}% full, at or over its threshold of {threshold}%"
    return True, f"ONLINE, {capacity}% full"


# --- the compression rewrite's report -----------------------------------------------------------

SIZE_PROPERTIES = ("used", "logicalused", "compressratio", BLOCKS_COMPRESSION)


def sizes_command(datasets: Sequence[str]) -> str:
    names = " ".join(shlex.quote(d) for d in datasets)
    return f"zfs get -H -p -o name,property,value {','.join(SIZE_PROPERTIES)} {names}"


def parse_sizes(output: str) -> dict[str, dict[str, str]]:
    """`sizes_command`'s output -> {dataset: {property: value}}."""
    sizes: dict[str, dict[str, str]] = {}
    for line in output.splitlines():
        fields = line.split("\t")
        if len(fields) == 3:
            sizes.setdefault(fields[0], {})[fields[1]] = fields[2]
    return sizes


def needs_rewrite(sizes: Mapping[str, Mapping[str, str]], wanted: Mapping[str, str]) -> list[str]:
    """Datasets whose blocks are recorded as written with another compression than wanted."""
    return [
        d
        for d, compression in wanted.items()
        if blocks_record(sizes.get(d, {}).get(BLOCKS_COMPRESSION)) is not None
        and not same_value("compression", compression, sizes[d][BLOCKS_COMPRESSION])
    ]


def unrecorded(sizes: Mapping[str, Mapping[str, str]], wanted: Mapping[str, str]) -> list[str]:
    """Datasets that exist without a record of their blocks' compression: never rewritten, so a
    compression change reaches only their new blocks (the roll says so)."""
    return [d for d in wanted if d in sizes and blocks_record(sizes[d].get(BLOCKS_COMPRESSION)) is None]


def _totals(sizes: Mapping[str, Mapping[str, str]], datasets: Sequence[str]) -> dict[str, float]:
    used = sum(int(sizes.get(d, {}).get("used", 0)) for d in datasets)
    logical = sum(int(sizes.get(d, {}).get("logicalused", 0)) for d in datasets)
    return {"used": used, "logicalused": logical, "compressratio": round(logical / used, 2) if used else 0.0}


def rewrite_report(
    before: Mapping[str, Mapping[str, str]], after: Mapping[str, Mapping[str, str]], datasets: Sequence[str]
) -> dict:
    """Per dataset and in total: compression of the blocks, physical (used) and logical size and
    their ratio, before and after."""
    per = {
        d: {
            when: {
                "compression": sizes.get(d, {}).get(BLOCKS_COMPRESSION, "-"),
                **_totals(sizes, [d]),
            }
            for when, sizes in (("before", before), ("after", after))
        }
        for d in datasets
    }
    return {"datasets": per, "before": _totals(before, datasets), "after": _totals(after, datasets)}


def mib(size: float) -> str:
    return f"{size / 1024**2:.1f} MiB"


def rewrite_line(report: Mapping) -> str:
    b, a = report["before"], report["after"]
    change = a["used"] / b["used"] - 1 if b["used"] else 0.0
    more_or_less = "more" if change > 0 else "less"
    return (
        f"{mib(b['used'])} -> {mib(a['used'])} on the pool ({abs(change):.0%} {more_or_less}; logical "
        f"{mib(b['logicalused'])} -> {mib(a['logicalused'])}), compressratio {b['compressratio']:.2f}x -> "
        f"{a['compressratio']:.2f}x"
    )


# --- pyinfra's output -------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def changes_made(output: str) -> int | None:
    """Host-operations a converge changed: the "Success" column of pyinfra's "Grand total" row
    ("-" is none); None without a results table."""
    rows = [line for line in ANSI.sub("", output).splitlines() if line.strip().startswith("Grand total")]
    if not rows:
        return None
    changed = rows[-1].split()[-3]
    return 0 if changed == "-" else int(changed)


def changes_proposed(output: str) -> list[str]:
    """With --dry: the operations of pyinfra's "Detected changes" table that would change the
    host, as "operation: change / conditional change"."""
    lines = ANSI.sub("", output).splitlines()
    headers = [i for i, line in enumerate(lines) if "Operation" in line and "Conditional Change" in line]
    if not headers:
        return []
    header = lines[headers[-1]]
    change_at, conditional_at = header.index("Change"), header.index("Conditional Change")
    rows = []
    for line in lines[headers[-1] + 1 :]:
        if not line.strip():
            break
        change, conditional = line[change_at:conditional_at].strip(), line[conditional_at:].strip()
        if change != "-" or conditional != "-":
            rows.append(f"{line[:change_at].strip()}: {change} / {conditional}")
    return rows


# --- connection -------------------------------------------------------------------------------


def ssh_config_text(hosts: Mapping[str, Mapping], repo: str) -> str:
    """An ssh config naming each inventory host, from the inventory's own connection data (as
    pyinfra connects), so that testinfra's checks reach the hosts the converge reached."""
    lines = ["# Written by day2/rolling_run.py from the inventory's connection data."]
    for name, data in hosts.items():
        lines.append(f"Host {name}")
        lines.append(f"  HostName {data.get('ssh_hostname') or name}")
        if data.get("ssh_port"):
            lines.append(f"  Port {int(data['ssh_port'])}")
        if data.get("ssh_user"):
            lines.append(f"  User {data['ssh_user']}")
        if data.get("ssh_key"):
            key = str(data["ssh_key"])
            lines.append(f"  IdentityFile {key if key.startswith('/') else f'{repo}/{key}'}")
        if str(data.get("ssh_strict_host_key_checking", "")).lower() in ("off", "no", "false"):
            lines.append("  StrictHostKeyChecking no")
        if data.get("ssh_known_hosts_file"):
            lines.append(f"  UserKnownHostsFile {data['ssh_known_hosts_file']}")
    return "\n".join(lines) + "\n"
