"""The monitoring role: node_exporter (with the ZFS textfile collector) and the engine's exporter on
every database host; node_exporter and the ZFS collector alone on every backup host (role
"backup", no engine: roles/backup.py, whose pull writes its own metrics to the same textfile
directory); and Prometheus with the alert rules on the hosts of the inventory's `monitoring`
group (group_data/monitoring.py sets `prometheus_server` for them), scraping them all.

The exporters come from Debian. Their command lines are ours, in a systemd drop-in written before
the package is installed, so the first start already listens on the host's replication address
only (never on every interface) and reads no /etc/default file. They log in to the database
without a password: the `prometheus` system account the packages create is a database account
identified by its Unix user (MariaDB unix_socket, PostgreSQL peer), with only the monitoring
privileges, so there is no monitoring password to store, rotate or leak.
"""

from __future__ import annotations

from pathlib import Path

from pyinfra import inventory
from pyinfra.api import deploy

import engines
from model.hostdata import HostConfig
from operations import common, mariadb as mariadb_ops, postgresql as pg_ops, units
from roles import monitoring_rules, render

NODE_EXPORTER = "prometheus-node-exporter"
ENGINE_EXPORTER = engines.by_engine("exporter_package")
PROMETHEUS = "prometheus"
# The system account Debian's exporter packages run as; also its database account.
ACCOUNT = render.MONITORING_USER
# MariaDB: what mysqld_exporter's default collectors read (status, variables, replica status,
# information_schema InnoDB tables), nothing more.
MARIADB_PRIVILEGES = "PROCESS,BINLOG MONITOR,SLAVE MONITOR"
MARIADB_SOCKET = "/run/mysqld/mysqld.sock"
PG_SOCKET_DIR = "/run/postgresql"

TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
COLLECTOR_SOURCE = Path(__file__).resolve().parent.parent / "host_scripts" / "zfs_metrics.py"
COLLECTOR = "/usr/local/lib/dbzfs/zfs_metrics.py"
COLLECTOR_UNIT = "dbzfs-zfs-metrics"
PROMETHEUS_CONFIG = "/etc/prometheus/dbzfs.yml"
PROMETHEUS_RULES = "/etc/prometheus/dbzfs-alerts.yml"
PROMETHEUS_DATA = "/var/lib/prometheus/metrics2"
PROMTOOL = "/usr/bin/promtool"


# mysqld_exporter 0.15+ (Debian 13's 0.17) reads its connection from a my.cnf only: the prometheus
# account through the server's socket (unix_socket authentication: no password anywhere).
MYSQLD_EXPORTER_CNF = "/etc/prometheus/dbzfs-mysqld-exporter.cnf"
MYSQLD_EXPORTER_CNF_TEXT = (
    "# Managed by dbzfs (roles/monitoring.py): mysqld_exporter logs in as the prometheus account\n"
    "# through MariaDB's socket (unix_socket authentication, no password).\n"
    f"[client]\nuser = {ACCOUNT}\nsocket = {MARIADB_SOCKET}\n"
)


def reads_my_cnf(cfg: HostConfig) -> bool:
    """Whether the host's mysqld_exporter takes its connection from a my.cnf (0.15 and later)."""
    return tuple(map(int, cfg.release.mysqld_exporter.split("."))) >= (0, 15)


def drop_in_path(package: str) -> str:
    return f"/etc/systemd/system/{package}.service.d/dbzfs.conf"


def listen_address(cfg: HostConfig) -> str:
    """Where this host's exporters and Prometheus listen: its replication (management) address,
    or loopback when it has none (nothing outside the host can scrape it then)."""
    return cfg.replication_address or "127.0.0.1"


def engine_exporter(cfg: HostConfig) -> str | None:
    """The package of this host's engine exporter; None on a host without an engine (a backup
    host)."""
    return ENGINE_EXPORTER.get(cfg.engine)


def packages(cfg: HostConfig) -> list[str]:
    """Debian packages this host's monitoring needs, installed with the engine's (or the backup
    host's) in one apt run."""
    exporter = engine_exporter(cfg)
    names = [NODE_EXPORTER, exporter] if exporter else [NODE_EXPORTER]
    return [*names, PROMETHEUS] if cfg.prometheus_server else names


def units_text(cfg: HostConfig) -> dict[str, str]:
    """path -> text of every systemd file the role writes on this host."""
    m = cfg.monitoring
    address = listen_address(cfg)
    why = "listen on the replication address only; the command line is ours, not /etc/default's"
    files = {
        drop_in_path(NODE_EXPORTER): render.render(
            "exporter-drop-in.conf.j2",
            {
                "why": why,
                "after": [],
                "environment": {},
                "command": [
                    f"/usr/bin/{NODE_EXPORTER}",
                    f"--web.listen-address={address}:{m.node_exporter_port}",
                    f"--collector.textfile.directory={TEXTFILE_DIR}",
                    *(f"--no-collector.{name}" for name in m.node_exporter_disabled_collectors),
                ],
            },
        ),
    }
    package = engine_exporter(cfg)
    if package:
        files[drop_in_path(package)] = _engine_exporter_drop_in(cfg, package, address, why)
    if cfg.engine == "mariadb" and reads_my_cnf(cfg):
        files[MYSQLD_EXPORTER_CNF] = MYSQLD_EXPORTER_CNF_TEXT
    files[f"/etc/systemd/system/{COLLECTOR_UNIT}.service"] = render.render(
        "zfs-metrics.service.j2",
        {"collector": COLLECTOR, "output": f"{TEXTFILE_DIR}/dbzfs_zfs.prom"},
    )
    files[f"/etc/systemd/system/{COLLECTOR_UNIT}.timer"] = render.render(
        "zfs-metrics.timer.j2", {"interval": m.zfs_metrics_interval}
    )
    if cfg.prometheus_server:
        files[drop_in_path(PROMETHEUS)] = render.render(
            "exporter-drop-in.conf.j2",
            {
                "why": "our config and rules, listening on the replication address only",
                "after": [],
                "environment": {},
                "command": [
                    f"/usr/bin/{PROMETHEUS}",
                    f"--config.file={PROMETHEUS_CONFIG}",
                    f"--storage.tsdb.path={PROMETHEUS_DATA}",
                    f"--storage.tsdb.retention.time={m.retention}",
                    f"--web.listen-address={address}:{m.prometheus_port}",
                ],
            },
        )
    return files


def _engine_exporter_drop_in(cfg: HostConfig, package: str, address: str, why: str) -> str:
    m = cfg.monitoring
    if cfg.engine == "mariadb":
        exporter = {
            "after": ["mariadb.service"],
            "environment": {"DATA_SOURCE_NAME": f"{ACCOUNT}@unix({MARIADB_SOCKET})/"},
            "options": [],
            "port": m.mysqld_exporter_port,
        }
        if reads_my_cnf(cfg):
            exporter["environment"] = {}
            exporter["options"] = [f"--config.my-cnf={MYSQLD_EXPORTER_CNF}"]
    else:
        exporter = {
            "after": [engines.of(cfg).service],
            "environment": {
                "DATA_SOURCE_NAME": f"user={ACCOUNT} host={PG_SOCKET_DIR} dbname=postgres sslmode=disable"
            },
            "options": [],
            "port": m.postgres_exporter_port,
        }
    return render.render(
        "exporter-drop-in.conf.j2",
        {
            "why": why + "; it logs in as the prometheus Unix user, without a password",
            "after": exporter["after"],
            "environment": exporter["environment"],
            "command": [
                f"/usr/bin/{package}",
                f"--web.listen-address={address}:{exporter['port']}",
                *exporter["options"],
            ],
        },
    )


def is_monitored(cfg: HostConfig) -> bool:
    """Whether Prometheus scrapes this host: a database host or a backup host."""
    return cfg.engine in ENGINE_EXPORTER or cfg.is_backup_host


def target_labels(cfg: HostConfig) -> dict[str, str]:
    """The labels of a host's targets, the ones the alert rules select on: `instance` is the
    inventory name; a database host's `engine` and `cluster`; a backup host's `role`."""
    if cfg.engine in ENGINE_EXPORTER:
        return {"instance": cfg.name, "engine": cfg.engine, "cluster": cfg.cluster}
    return {"instance": cfg.name, "role": "backup"}


def scrape_targets(hosts: list[HostConfig]) -> list[dict]:
    """One scrape job per exporter: each monitored host's address and the labels the alert rules
    select on (target_labels). A backup host has node_exporter only. Other hosts are skipped."""
    jobs = {"node": [], "mysqld": [], "postgres": []}
    for h in hosts:
        if not is_monitored(h):
            continue
        labels = target_labels(h)
        address = listen_address(h)
        jobs["node"].append({"address": f"{address}:{h.monitoring.node_exporter_port}", "labels": labels})
        if h.engine == "mariadb":
            jobs["mysqld"].append(
                {"address": f"{address}:{h.monitoring.mysqld_exporter_port}", "labels": labels}
            )
        elif h.engine == "postgresql":
            jobs["postgres"].append(
                {"address": f"{address}:{h.monitoring.postgres_exporter_port}", "labels": labels}
            )
    return [{"name": name, "targets": targets} for name, targets in jobs.items() if targets]


def prometheus_config(cfg: HostConfig, hosts: list[HostConfig]) -> str:
    address = f"{listen_address(cfg)}:{cfg.monitoring.prometheus_port}"
    jobs = [
        {"name": "prometheus", "targets": [{"address": address, "labels": {"instance": cfg.name}}]},
        *scrape_targets(hosts),
    ]
    return render.render(
        "prometheus.yml.j2",
        {
            "host": cfg.name,
            "interval": cfg.monitoring.scrape_interval,
            "rules": PROMETHEUS_RULES,
            "jobs": jobs,
        },
    )


def monitored_hosts() -> list[HostConfig]:
    """Every database host and every backup host of the inventory, in its order, whatever --limit
    selects: Prometheus scrapes them all."""
    configs = [HostConfig.from_data(h.name, h.data) for h in inventory]
    return [c for c in configs if is_monitored(c)]


@deploy("Monitoring units")
def before_install(cfg: HostConfig) -> None:
    """The exporters' (and Prometheus') drop-ins and files, before their packages start them. On a
    backup host too (node_exporter and the ZFS collector only)."""
    common.config_files(
        name="Exporter drop-ins, the ZFS textfile collector and its timer",
        files={**units_text(cfg), COLLECTOR: COLLECTOR_SOURCE.read_text()},
        modes={COLLECTOR: "755"},
    )
    if cfg.prometheus_server:
        hosts = monitored_hosts()
        # Checked by the host's own promtool once Prometheus is installed; the rules first, since
        # the config's check reads the rule files it names.
        common.config_file(
            name=f"{PROMETHEUS_RULES}: alert rules",
            path=PROMETHEUS_RULES,
            content=monitoring_rules.rules_yaml(hosts, cfg),
            check=PROMTOOL + " check rules {path}",
            checker=PROMTOOL,
        )
        common.config_file(
            name=f"{PROMETHEUS_CONFIG}: scrape targets",
            path=PROMETHEUS_CONFIG,
            content=prometheus_config(cfg, hosts),
            check=PROMTOOL + " check config {path}",
            checker=PROMTOOL,
        )


@deploy("Monitoring accounts")
def account(cfg: HostConfig) -> None:
    """The exporter's database account, on the primary (it replicates to the replicas). A host
    without an engine (a backup host) has none."""
    if cfg.engine not in ENGINE_EXPORTER:
        return
    if cfg.engine == "mariadb":
        mariadb_ops.socket_user(
            name=f"{ACCOUNT}@localhost (unix_socket)", user=ACCOUNT, user_host="localhost"
        )
        mariadb_ops.grants(
            name=f"Privileges of {ACCOUNT}@localhost",
            user=ACCOUNT,
            user_host="localhost",
            privileges=MARIADB_PRIVILEGES,
        )
    else:
        pg_ops.monitoring_role(name=f"Role {ACCOUNT} (pg_monitor, peer)", role_name=ACCOUNT)


@deploy("Monitoring running")
def running(cfg: HostConfig) -> None:
    """The exporters (node_exporter alone on a backup host), the collector's timer and Prometheus
    where it runs: started, enabled, restarted when their files changed."""
    services = packages(cfg)
    watched = {f"{package}.service": [drop_in_path(package)] for package in services}
    if cfg.prometheus_server:
        watched[f"{PROMETHEUS}.service"] += [PROMETHEUS_CONFIG, PROMETHEUS_RULES]
    watched[f"{COLLECTOR_UNIT}.timer"] = [f"/etc/systemd/system/{COLLECTOR_UNIT}.timer"]
    units.current(
        name="Exporters, collector timer"
        + (" and Prometheus" if cfg.prometheus_server else "")
        + " running their current config, enabled",
        units=watched,
        loaded=[f"{COLLECTOR_UNIT}.service"],
    )
