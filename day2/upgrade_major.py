"""PostgreSQL's major upgrade on a group's primary once the host runs the new release
(runbooks/upgrade_postgresql.py: the "major" step of day2/upgrade.py's plan).

The host's data says debian_release "13" and postgresql_version "15": its 15/main cluster runs on
the binaries Debian kept through the release upgrade, and the release step installed 17 beside
them. Debian's pg_upgradecluster moves the cluster: `--method=link` (pg_upgrade --link: the new
cluster's files are hard links to the old one's, so the upgrade takes seconds whatever the
database's size and needs no space). Link mode forfeits starting the old cluster again once the
new one has started, which is what the rollback needs it for: on ZFS the snapshot taken just
before (`@dbzfs-upgrade-postgresql-15-to-17`, the server stopped) gives that back, which
`--clone` or a copy would have to pay for in time or space instead. The new cluster's data
directory is in the same dataset as the old one's (link mode needs one filesystem), its WAL in
the WAL dataset (createcluster.conf's waldir for the run).

Writes stop from the old cluster's stop to the new one's start (pg_upgradecluster --no-start, the
new cluster started here); the optimizer's statistics are gathered after, with writes flowing
(vacuumdb --analyze-in-stages). Physical
replication needs the same major version on both sides: every standby stops streaming here and is
reseeded from this host next (runbooks/seed.py), the group's mixed window. The old cluster is
dropped once the new one runs (pg_dropcluster: its configuration and its directory of links).
"""

from __future__ import annotations

import dataclasses
import shlex

from pyinfra import host
from pyinfra.operations import server

from day2 import kit
from model import releases
from model.hostdata import HostConfig
from model.problems import Problem
from roles import engine, render

RUNBOOK = kit.Runbook(
    "runbooks/upgrade_postgresql.py",
    "PostgreSQL's major upgrade",
    (
        kit.Parameter(
            "host",
            "the group's primary, on the new release, whose cluster moves to the new major version",
            required=True,
            example="pg1",
            host=True,
        ),
    ),
)
CREATECLUSTER_UPGRADE = "/etc/postgresql-common/createcluster.d/dbzfs-upgrade.conf"


def snapshot_name(old: str, new: str) -> str:
    return f"dbzfs-upgrade-postgresql-{old}-to-{new}"


def script(cfg: HostConfig, old: str, new: str) -> str:
    """The major upgrade, resumable: done when the new cluster runs and the old one is gone."""
    q = shlex.quote
    paths_new = render.postgresql_paths(dataclasses.replace(cfg, postgresql_version=new))
    wal_parent = paths_new["wal_directory"].rsplit("/", 2)[0]  # {wal}/<version>/main -> {wal}
    snap = f"{cfg.dataset_name(cfg.parent_dataset)}@{snapshot_name(old, new)}"
    return (
        "set -eu\n"
        'state() { pg_lsclusters -h | awk -v v="$1" \'$1==v && $2=="main" {print $4}\'; }\n'
        f'if [ -n "$(state {new})" ]; then  # a resumed run: {new}/main exists\n'
        f'  [ "$(state {new})" = online ] || pg_ctlcluster {new} main start\n'
        f'  [ -z "$(state {old})" ] || pg_dropcluster {q(old)} main\n'
        f"  echo 'PostgreSQL {new} runs: done'; exit 0\n"
        "fi\n"
        f"test -x /usr/lib/postgresql/{new}/bin/postgres "
        f"|| {{ echo 'postgresql-{new} is not installed (the release step installs it)' >&2; exit 1; }}\n"
        "t0=$(date +%s.%N)\n"
        f'[ "$(state {old})" != online ] || pg_ctlcluster --mode fast {q(old)} main stop\n'
        f"zfs list -H -o name {q(snap)} >/dev/null 2>&1 || zfs snapshot -r {q(snap)}\n"
        f"mkdir -p {q(wal_parent)}/{new} && chown postgres:postgres {q(wal_parent)}/{new}\n"
        f"echo \"waldir = '{wal_parent}/%v/%c'\" > {CREATECLUSTER_UPGRADE}\n"
        f"trap 'rm -f {CREATECLUSTER_UPGRADE}' EXIT\n"
        # --no-start: started here, so that the writes' stop ends when it accepts them; the
        # statistics are gathered after, with writes flowing
        f"pg_upgradecluster --method=link --no-start {q(old)} main {q(paths_new['data_directory'])}\n"
        f"pg_ctlcluster {new} main start\n"
        "t1=$(date +%s.%N)\n"
        f"pg_dropcluster {q(old)} main\n"
        'echo "writes_stopped_s=$(awk -v a="$t0" -v b="$t1" \'BEGIN {printf "%.1f", b - a}\')"\n'
        "cd / && runuser -u postgres -- vacuumdb --all --analyze-in-stages --quiet\n"
        "pg_lsclusters -h\n"
    )


def run(args: dict) -> None:
    if host.name != args["host"]:
        return
    cfg = engine.host_config()
    before = releases.previous(cfg.release)
    old, new = (before.postgresql if before else None), cfg.release.postgresql
    found = []
    if cfg.engine != "postgresql" or cfg.role != "primary":
        found.append(
            Problem(cfg.name, "role", cfg.role, "not a PostgreSQL primary", "run it on the group's primary")
        )
    if old is None or cfg.server_version not in (old, new):
        found.append(
            Problem(
                cfg.name,
                "postgresql_version",
                cfg.postgresql_version,
                f"{cfg.release.label} moves PostgreSQL {old} to {new} only",
                f'the host\'s data: debian_release "{cfg.release.major}", postgresql_version "{old}"',
            )
        )
    kit.refuse(found, RUNBOOK.what)
    server.shell(
        name=f"{cfg.name}: pg_upgradecluster --method=link {old} -> {new} (writes stop until {new} starts)",
        commands=[script(cfg, old, new)],
    )
