"""The shell scripts the benchmark runs on its VM, one per step, as text. Pure: bench/run.py sends
them over ssh (`bash -s`, the script on stdin) and parses what they print with bench/measure.py.

Every script starts with `set -euo pipefail`: a step that fails stops the benchmark with the
command's own error, never a figure taken from a half-built variant.

    packages()                      both engines, sysbench, mdadm; the servers stopped, not enabled
    teardown(drives)                servers stopped, pool / array gone, every drive discarded
    zfs_storage(variant, pool, drives, module_params)
    md_storage(variant, drives)
    server_config(variant, text)    the variant's my.cnf / postgresql.conf and its directories
    new_database(engine, dirs)      an empty server initialised on the variant's storage
    start(engine) / stop(engine)
    cold_caches(variant, pool)      what the load reads comes from the drives: pool exported and
                                    imported (the ARC), page cache dropped
    readings(engine)                /proc/diskstats, /proc/stat and the engine's write counters
    flushed(engine, pool)           every dirty page written back, the pool / filesystem synced
    save_golden / restore_golden    the loaded data set, kept on the root disk between variants
    saved_key(engine)               the key save_golden wrote last (run.py's golden_key: what
                                    the data set was loaded with; an interrupted run's is reused)
    snapshot_start / rollback_start ZFS variants: the restored data set snapshotted, and rolled
                                    back to for the variant's next workload (instead of a rebuild)
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from bench import measure
from bench.variants import Variant
from lab import definition
from model import releases
from roles.render import PG_CLUSTER

# The bench VM boots the lab's image, so it runs the lab's release (lab.yaml image.suite) and that
# release's servers.
RELEASE = releases.get(definition.load().release)
PG_VERSION = RELEASE.postgresql

HEADER = "set -euo pipefail\nexport DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8\n"
MD_DEVICE = "/dev/md/bench"
GOLDEN_DIR = "/var/tmp/dbzfs-bench-golden"
MARIADB_CONFIG = "/etc/mysql/mariadb.conf.d/90-dbzfs.cnf"
PG_CONFIG_DIR = f"/etc/postgresql/{PG_VERSION}/{PG_CLUSTER}"
PG_BIN = f"/usr/lib/postgresql/{PG_VERSION}/bin"
UNITS = {"mariadb": "mariadb.service", "postgresql": f"postgresql@{PG_VERSION}-{PG_CLUSTER}.service"}
OWNERS = {"mariadb": "mysql", "postgresql": "postgres"}
PACKAGES = ("mariadb-server", "mariadb-client", f"postgresql-{PG_VERSION}", "sysbench", "mdadm", "zstd")
SEPARATOR = "==== dbzfs-bench ===="  # between the parts of readings()' output


def q(value: object) -> str:
    return shlex.quote(str(value))


def script(*lines: str) -> str:
    return HEADER + "\n".join(lines) + "\n"


def packages() -> str:
    """Both engines' servers, the load generators and mdadm, from Debian's archive (through the
    lab's apt cache). No default cluster or datadir is used: each variant initialises its own."""
    return script(
        "mkdir -p /etc/postgresql-common/createcluster.d",
        "echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/dbzfs-bench.conf",
        # mdadm's postinst would scan for arrays and mail about them: nothing to scan, no mail
        "echo 'mdadm mdadm/initrdstart string none' | debconf-set-selections",
        "echo 'mdadm mdadm/autocheck boolean false' | debconf-set-selections",
        "echo 'mdadm mdadm/start_daemon boolean false' | debconf-set-selections",
        "if ! dpkg -s " + " ".join(PACKAGES) + " >/dev/null 2>&1; then",
        "  apt-get update -q",
        "  apt-get install -y -q --no-install-recommends " + " ".join(PACKAGES),
        "fi",
        f"systemctl disable --now {' '.join(UNITS.values())} mariadb.service 2>/dev/null || true",
        "systemctl disable --now mdmonitor.service mdcheck_start.timer mdcheck_continue.timer "
        "mdmonitor-oneshot.timer 2>/dev/null || true",
        "rm -rf /var/lib/mysql/* /var/lib/postgresql/*/main",
        "mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld",
    )


def drive_names(drives: Sequence[str]) -> str:
    """Prints each drive's kernel name (nvme3n1), in the order given: what /proc/diskstats counts."""
    return script(f'for d in {" ".join(q(d) for d in drives)}; do basename "$(readlink -f "$d")"; done')


def teardown(drives: Sequence[str]) -> str:
    """Whatever the last variant built, gone: both servers stopped, pools destroyed, the md array
    stopped, and every drive discarded (the qemu drives read back zeros, as new), so each variant
    starts from the same drives."""
    return script(
        f"systemctl stop {' '.join(UNITS.values())} 2>/dev/null || true",
        'for pool in $(zpool list -H -o name 2>/dev/null); do zpool destroy -f "$pool"; done',
        "if mountpoint -q /datastore; then umount /datastore; fi",
        "for md in /dev/md/* /dev/md[0-9]*; do",
        '  [ -b "$md" ] && mdadm --stop "$md" >/dev/null',
        "done || true",
        f"for d in {' '.join(q(d) for d in drives)}; do",
        '  mdadm --zero-superblock --force "$d" 2>/dev/null || true',
        '  wipefs -a -q "$d"',
        '  blkdiscard -f "$d"',
        "done",
        "rm -rf /datastore",
        "udevadm settle",
    )


def mirror_vdevs(drives: Sequence[str], width: int, spares: int) -> list[str]:
    """`zpool create`'s vdev arguments: mirrors of `width` over the drives, the last `spares`
    drives as spares."""
    members = list(drives[: len(drives) - spares]) if spares else list(drives)
    if width < 2 or len(members) % width:
        raise ValueError(f"{len(members)} drives do not make mirrors of {width}")
    vdevs = []
    for i in range(0, len(members), width):
        vdevs += ["mirror", *members[i : i + width]]
    if spares:
        vdevs += ["spare", *drives[len(drives) - spares :]]
    return vdevs


def module_params_lines(params: Mapping[str, object]) -> list[str]:
    """The ZFS module parameters set live (/sys/module/zfs/parameters)."""
    return [f"echo {q(value)} > /sys/module/zfs/parameters/{name}" for name, value in params.items()]


def zfs_storage(
    variant: Variant, pool: str, drives: Sequence[str], module_params: Mapping[str, object]
) -> str:
    """The variant's pool: its mirrors, only the pool properties it names, then its datasets
    (parents first) with only their properties, and the module parameters it runs with."""
    create = ["zpool", "create"]
    for prop, value in variant.pool["properties"].items():
        create += ["-o", f"{prop}={value}"]
    create += [pool, *mirror_vdevs(drives, variant.pool["mirror_width"], variant.pool["spares"])]
    lines = module_params_lines(module_params)
    lines.append(" ".join(q(a) for a in create))
    for dataset, props in variant.datasets.items():
        command = ["zfs", "create"]
        for prop, value in props.items():
            command += ["-o", f"{prop}={value}"]
        lines.append(" ".join(q(a) for a in [*command, f"{pool}/{dataset}"]))
    return script(*lines)


def md_storage(variant: Variant, drives: Sequence[str]) -> str:
    """Linux md RAID10 over the same drives and ext4 with mkfs's defaults, mounted where the pool's
    top dataset would be. `--assume-clean`: the discarded drives read zeros, so both copies of
    every block already agree, and no resync writes behind the load. ext4's inode tables and
    journal are written by mkfs, not by a lazy-init thread behind the first runs."""
    pool = variant.pool
    spares = pool["spares"]
    members = list(drives[: len(drives) - spares]) if spares else list(drives)
    create = [
        "mdadm",
        "--create",
        MD_DEVICE,
        "--run",
        "--assume-clean",
        "--metadata=1.2",
        f"--level={pool['level']}",
        f"--layout={pool['layout']}",
        f"--raid-devices={len(members)}",
    ]
    if spares:
        create += [f"--spare-devices={spares}"]
    create += [*members, *drives[len(members) :]]
    mount = pool["mount"]
    return script(
        " ".join(q(a) for a in create),
        "udevadm settle",
        f"mkfs.{q(pool['filesystem'])} -q -E lazy_itable_init=0,lazy_journal_init=0 {MD_DEVICE}",
        f"mkdir -p {q(mount['mountpoint'])}",
        f"mount -o {q(mount['options'])} {MD_DEVICE} {q(mount['mountpoint'])}",
    )


def engine_dirs(engine: str, directories: Mapping[str, str]) -> dict[str, str]:
    """The directories the server writes, under the variant's data and log directories (the
    paths the rendered config names: roles.render's)."""
    data, log = directories["data"], directories["log"]
    if engine == "mariadb":
        return {"data": data, "redo": f"{log}/redo", "binlog": f"{log}/binlog", "relay": f"{log}/relay"}
    return {
        "data": f"{data}/{PG_VERSION}/{PG_CLUSTER}",
        "wal": f"{log}/{PG_VERSION}/{PG_CLUSTER}",
    }


def server_config(variant: Variant, config: str) -> str:
    """The variant's config file in place, and its (empty) directories owned by the server."""
    engine = variant.engine
    dirs = engine_dirs(engine, variant.directories)
    path = MARIADB_CONFIG if engine == "mariadb" else f"{PG_CONFIG_DIR}/postgresql.conf"
    owner = OWNERS[engine]
    lines = [
        f"mkdir -p {q(path.rsplit('/', 1)[0])}",
        f"cat > {q(path)} <<'DBZFS_BENCH_CONFIG'\n{config.rstrip()}\nDBZFS_BENCH_CONFIG",
        *(f"install -d -m 0700 -o {owner} -g {owner} {q(d)}" for d in dirs.values()),
        *(f"chown {owner}:{owner} {q(variant.directories[k])}" for k in ("data", "log")),
    ]
    return script(*lines)


def new_database(engine: str, directories: Mapping[str, str]) -> str:
    """An empty server in the variant's directories: mariadb-install-db, or initdb as deploy.py's
    pg_createcluster runs it (--data-checksums, the WAL in the log directory)."""
    dirs = engine_dirs(engine, directories)
    if engine == "mariadb":
        return script(
            "mariadb-install-db --user=mysql --skip-test-db --auth-root-authentication-method=socket "
            f"--datadir={q(dirs['data'])} >/dev/null",
        )
    return script(
        f"[ -f {PG_CONFIG_DIR}/pg_hba.conf ] || {{ mkdir -p {PG_CONFIG_DIR}; "
        f"printf 'local all postgres peer\\nlocal all all peer\\nhost all all 127.0.0.1/32 trust\\n' "
        f"> {PG_CONFIG_DIR}/pg_hba.conf; : > {PG_CONFIG_DIR}/pg_ident.conf; "
        f"echo auto > {PG_CONFIG_DIR}/start.conf; "
        f"chown -R postgres:postgres {PG_CONFIG_DIR}; }}",
        f"runuser -u postgres -- {PG_BIN}/initdb -D {q(dirs['data'])} --waldir={q(dirs['wal'])} "
        "--data-checksums --locale=C.UTF-8 --encoding=UTF8 -A peer >/dev/null",
        # initdb writes a postgresql.conf of its own in the data directory: the server reads the
        # one in /etc (config_file on the command line of postgresql-common's unit)
    )


def start(engine: str) -> str:
    lines = [f"systemctl start {UNITS[engine]}"]
    if engine == "postgresql":
        lines.append("for i in $(seq 120); do runuser -u postgres -- pg_isready -q && exit 0; sleep 1; done")
        lines.append("echo 'PostgreSQL did not answer within 120 s' >&2; exit 1")
    return script(*lines)


def stop(engine: str) -> str:
    return script(f"systemctl stop {UNITS[engine]}")


def sql(engine: str, statement: str, database: str | None = None) -> str:
    """A client command that runs `statement` as the server's administrator (unix socket)."""
    if engine == "mariadb":
        return f"mariadb -NB {q(database) + ' ' if database else ''}-e {q(statement)}"
    db = f"-d {q(database)} " if database else ""
    return f"runuser -u postgres -- psql -X -A -t -v ON_ERROR_STOP=1 {db}-c {q(statement)}"


def counters_command(engine: str) -> str:
    command = measure.COUNTER_QUERIES[engine]
    line = " ".join(q(a) for a in command)
    return line if engine == "mariadb" else f"runuser -u postgres -- {line}"


def cold_caches(variant: Variant, pool: str) -> str:
    """The data read during the load comes from the drives: the pool exported and imported (an
    empty ARC for it) or the filesystem unmounted and mounted, then the page cache dropped."""
    if variant.storage == "zfs":
        lines = [f"zpool export {q(pool)}", f"zpool import -d /dev/disk/by-id {q(pool)}"]
    else:
        mount = variant.pool["mount"]
        lines = [
            f"umount {q(mount['mountpoint'])}",
            f"mount -o {q(mount['options'])} {MD_DEVICE} {q(mount['mountpoint'])}",
        ]
    return script(*lines, "sync", "echo 3 > /proc/sys/vm/drop_caches")


def readings(engine: str) -> str:
    """/proc/diskstats, /proc/stat and the engine's counters, separated by SEPARATOR."""
    return script(
        "cat /proc/diskstats",
        f"echo {q(SEPARATOR)}",
        "cat /proc/stat",
        f"echo {q(SEPARATOR)}",
        counters_command(engine),
    )


def split_readings(text: str) -> tuple[str, str, str]:
    parts = text.split(SEPARATOR + "\n")
    if len(parts) != 3:
        raise ValueError(f"readings: expected 3 parts, got {len(parts)}")
    return parts[0], parts[1], parts[2]


def flushed(engine: str, storage: str, pool: str, timeout: int = 1800) -> str:
    """Every page the load dirtied written back (InnoDB flushed to no dirty page, or a PostgreSQL
    CHECKPOINT), then the pool or the filesystem synced: the bytes written afterwards include the
    pages' write-back and the torn-page protection that goes with it."""
    if engine == "mariadb":
        dirty = sql(engine, "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'") + " | cut -f2"
        lines = [
            "pct=$(" + sql(engine, "SELECT @@innodb_max_dirty_pages_pct") + ")",
            "lwm=$(" + sql(engine, "SELECT @@innodb_max_dirty_pages_pct_lwm") + ")",
            sql(engine, "SET GLOBAL innodb_max_dirty_pages_pct_lwm = 0, innodb_max_dirty_pages_pct = 0"),
            # Done once the count reached 0: pages InnoDB dirties afterwards in the background
            # (purge, persistent statistics) are not the load's (checked again after the settings
            # were restored, the race failed a quick run at f716c7e).
            "clean=0",
            f"for i in $(seq {int(timeout)}); do",
            f'  [ "$({dirty})" = 0 ] && {{ clean=1; break; }}; sleep 1',
            "done",
            'mariadb -NB -e "SET GLOBAL innodb_max_dirty_pages_pct = $pct, '
            'innodb_max_dirty_pages_pct_lwm = $lwm"',
            '[ "$clean" = 1 ] || '
            f"{{ echo 'InnoDB still has dirty pages after {int(timeout)} s' >&2; exit 1; }}",
        ]
    else:
        lines = [sql(engine, "CHECKPOINT")]
    lines.append("sync")
    if storage == "zfs":
        lines.append(f"zpool sync {q(pool)}")
    return script(*lines)


def save_golden(engine: str, directories: Mapping[str, str], key: str) -> str:
    """The loaded data set (server stopped) copied to the root disk, to start every run from;
    `key` (what it was loaded with) written last, so only a complete copy is ever reused."""
    dirs = engine_dirs(engine, directories)
    return script(
        f"rm -rf {GOLDEN_DIR}/{engine} && mkdir -p {GOLDEN_DIR}/{engine}",
        *(
            f"tar -C {q(path)} -cf {GOLDEN_DIR}/{engine}/{name}.tar ."
            for name, path in dirs.items()
            if name in ("data", "redo", "binlog", "wal")
        ),
        "sync",
        f"printf '%s\\n' {q(key)} > {GOLDEN_DIR}/{engine}/key",
    )


def saved_key(engine: str) -> str:
    """Prints the key of the data set saved for `engine`, nothing when there is none."""
    return script(f"cat {GOLDEN_DIR}/{engine}/key 2>/dev/null || true")


def snapshot_start(pool: str) -> str:
    """Every dataset of the pool snapshotted as restored, before the first workload's run."""
    return script(f"zfs snapshot -r {q(pool)}@start")


def rollback_start(pool: str) -> str:
    """Every dataset of the pool back to its @start snapshot (the server stopped): the data set as
    restored, for the next workload, without rebuilding the pool and copying it in again."""
    return script(
        f"for ds in $(zfs list -H -o name -t filesystem -r {q(pool)}); do",
        '  zfs rollback "$ds@start"',
        "done",
    )


def restore_golden(engine: str, directories: Mapping[str, str]) -> str:
    """The saved data set into the variant's (empty) directories, then synced: its writes are
    done before any reading is taken."""
    dirs = engine_dirs(engine, directories)
    return script(
        *(
            f"tar -C {q(path)} --same-owner -xpf {GOLDEN_DIR}/{engine}/{name}.tar"
            for name, path in dirs.items()
            if name in ("data", "redo", "binlog", "wal")
        ),
        "sync",
    )


# --- the loads -------------------------------------------------------------------------------------

MARIADB_SOCKET = "/run/mysqld/mysqld.sock"
PGBENCH_DATABASE = "bench"
PGBENCH_LOG = "/var/tmp/dbzfs-pgbench/log"


def _sysbench(test: str, tables: int, rows: int, seed: int) -> list[str]:
    return [
        "sysbench",
        test,
        "--db-driver=mysql",
        f"--mysql-socket={MARIADB_SOCKET}",
        "--mysql-user=root",
        "--mysql-db=sbtest",
        f"--tables={int(tables)}",
        f"--table-size={int(rows)}",
        f"--rand-seed={int(seed)}",
    ]


def sysbench_prepare(tables: int, rows: int, seed: int) -> str:
    command = [*_sysbench("oltp_read_write", tables, rows, seed), "prepare"]
    return script(" ".join(q(a) for a in command) + " >/dev/null")


def sysbench_run(workload: str, tables: int, rows: int, events: int, threads: int, seed: int) -> str:
    """A fixed number of transactions (`--events`, no time limit), p95 latency in the report."""
    command = [
        *_sysbench(workload, tables, rows, seed),
        f"--threads={int(threads)}",
        f"--events={int(events)}",
        "--time=0",
        "--percentile=95",
        "run",
    ]
    return script(" ".join(q(a) for a in command))


def pgbench_init(scale: int) -> str:
    return script(
        f"runuser -u postgres -- createdb {PGBENCH_DATABASE}",
        f"runuser -u postgres -- pgbench -i -q -s {int(scale)} {PGBENCH_DATABASE} 2>&1 | tail -1",
    )


def pgbench_run(transactions: int, clients: int, seed: int) -> str:
    """TPC-B-like, `transactions` in all over `clients` clients (`-t` is per client), no vacuum
    before (`-n`: every run starts from the same restored data), a per-transaction log for the
    p95; prints the report, SEPARATOR, then each log file followed by SEPARATOR."""
    per_client = max(1, transactions // clients)
    log_dir = PGBENCH_LOG.rsplit("/", 1)[0]
    return script(
        f"rm -rf {log_dir} && install -d -o postgres -g postgres {log_dir}",
        f"cd {log_dir} && runuser -u postgres -- pgbench -n -c {int(clients)} -j 1 -t {per_client} "
        f"--random-seed={int(seed)} -l --log-prefix={PGBENCH_LOG} {PGBENCH_DATABASE}",
        f"echo {q(SEPARATOR)}",
        f'for f in {PGBENCH_LOG}.*; do cat "$f"; echo {q(SEPARATOR)}; done',
    )


def split_pgbench(text: str) -> tuple[str, list[str]]:
    """pgbench_run's output: the report, and the log files' contents."""
    parts = text.split(SEPARATOR + "\n")
    if len(parts) < 3:
        raise ValueError("pgbench_run printed no log file")
    return parts[0], parts[1:-1]


def sql_load(engine: str, path: str, pool: str) -> str:
    """Feed the SQL file to a new database and sync the pool; prints the seconds it took."""
    if engine == "mariadb":
        load = [sql(engine, "CREATE DATABASE ca"), f"mariadb ca < {q(path)}"]
    else:
        load = [
            "runuser -u postgres -- createdb events",
            f"runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -d events -f {q(path)} >/dev/null",
        ]
    return script(
        "t0=$EPOCHREALTIME",
        *load,
        f"zpool sync {q(pool)}",
        "awk -v t0=$t0 -v t1=$EPOCHREALTIME 'BEGIN {printf \"%.3f\\n\", t1 - t0}'",
    )


def compression_readings(dataset: str, pool: str) -> str:
    return script(f"zpool sync {q(pool)}", f"zfs get -H -p compressratio,logicalused,used {q(dataset)}")
