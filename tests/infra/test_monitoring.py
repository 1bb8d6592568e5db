"""The monitoring role's result on a live host: the exporters run, listen on the host's replication
address and nowhere else, log in to the database without a password, and the ZFS textfile
collector keeps its metrics fresh (tests/infra/test_prometheus.py checks the Prometheus hosts)."""

import time

from roles import monitoring

# tests/infra/conftest.py: only the database hosts are checked (a backup host runs no engine)
host_roles = ("primary", "replica")

COLLECTOR_OUTPUT = f"{monitoring.TEXTFILE_DIR}/dbzfs_zfs.prom"


def fetch(host, url):
    """An HTTP GET from the host itself (the exporters are not reachable from outside the lab's
    private network)."""
    script = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=30).read().decode())"
    return host.check_output(f"python3 -c {script!r}")


def exporters(cfg):
    m = cfg.monitoring
    engine_exporter = monitoring.ENGINE_EXPORTER[cfg.engine]
    port = m.mysqld_exporter_port if cfg.engine == "mariadb" else m.postgres_exporter_port
    return {monitoring.NODE_EXPORTER: m.node_exporter_port, engine_exporter: port}


def test_exporters_run_and_are_enabled(host, cfg):
    for package in exporters(cfg):
        service = host.service(package)
        assert service.is_running and service.is_enabled, package


def test_exporters_listen_on_the_replication_address_only(host, cfg):
    address = monitoring.listen_address(cfg)
    listening = host.check_output("ss -Htln").split("\n")
    for package, port in exporters(cfg).items():
        sockets = [line.split()[3] for line in listening if line.split()[3].endswith(f":{port}")]
        assert sockets == [f"{address}:{port}"], f"{package} listens on {sockets}"


def test_the_engine_exporter_reaches_the_database(host, cfg):
    package = monitoring.ENGINE_EXPORTER[cfg.engine]
    port = exporters(cfg)[package]
    metrics = fetch(host, f"http://{monitoring.listen_address(cfg)}:{port}/metrics")
    up = "mysql_up 1" if cfg.engine == "mariadb" else "pg_up 1"
    assert up in metrics.splitlines(), f"{package} cannot log in to the database"


def test_no_monitoring_password_exists(host, cfg):
    if cfg.engine == "mariadb":
        plugin = host.check_output(
            "mariadb -NBe \"SELECT plugin FROM mysql.user WHERE User='prometheus' AND Host='localhost'\""
        )
        assert plugin == "unix_socket"
    else:
        password = host.check_output(
            "cd / && runuser -u postgres -- psql -XAtc "
            "\"SELECT rolpassword IS NULL AND NOT rolsuper FROM pg_authid WHERE rolname='prometheus'\""
        )
        assert password == "t"


def test_zfs_metrics_are_fresh(host, cfg):
    timer = host.service(f"{monitoring.COLLECTOR_UNIT}.timer")
    assert timer.is_running and timer.is_enabled
    output = host.file(COLLECTOR_OUTPUT)
    assert output.exists
    age = time.time() - output.mtime.timestamp()
    assert age < 3 * cfg.monitoring.zfs_metrics_interval + 30, f"{COLLECTOR_OUTPUT} is {age:.0f} s old"
    lines = output.content_string.splitlines()
    assert f'dbzfs_zpool_online{{pool="{cfg.pool.name}"}} 1' in lines
    assert "dbzfs_zfs_metrics_success 1" in lines


def test_node_exporter_serves_the_zfs_metrics(host, cfg):
    port = cfg.monitoring.node_exporter_port
    metrics = fetch(host, f"http://{monitoring.listen_address(cfg)}:{port}/metrics").splitlines()
    assert f'dbzfs_zpool_online{{pool="{cfg.pool.name}"}} 1' in metrics
    assert any(line.startswith("node_zfs_arc_") for line in metrics), "no ZFS collector series"
