"""What is deployed is what is tested: every file a lab host got from templates/ (and the systemd
drop-ins and units, the ZFS metrics collector, sanoid's config and the snapshot script,
Prometheus' config and alert rules, the firewall's rules) is byte for byte what roles/render.py,
roles/monitoring.py, roles/snapshots.py and roles/firewall.py render offline for that host, the
code path the unit tests check with the real servers."""

import base64

import pytest

from model.hostdata import HostConfig
from roles import fencing, firewall, mariadb, monitoring, monitoring_rules, postgresql, render, snapshots
from validation import load_inventory_isolated

pytestmark = pytest.mark.e2e

ON_HOST = {
    "zfs.conf.j2": "/etc/modprobe.d/zfs.conf",
    "zed.rc.j2": "/etc/zfs/zed.d/zed.rc",
    "my.cnf.j2": mariadb.CONFIG,
    "mariadb-role.cnf.j2": mariadb.ROLE_CONFIG,
    "postgresql.conf.j2": "{config_dir}/postgresql.conf",  # the host's cluster's (its release's)
    "pg_hba.conf.j2": "{config_dir}/pg_hba.conf",
    "fence-check.sh.j2": render.FENCE_CHECK,
}


def offline_files(inventory) -> dict[str, dict[str, str]]:
    """host -> {path on the host: text}, rendered from the inventory's data alone (the declared
    `hardware`, no host contacted)."""
    data = load_inventory_isolated(str(inventory))
    configs = {name: HostConfig.from_data(name, d) for name, d in data.items()}
    result = {}
    for name, cfg in configs.items():
        peers = [c for c in configs.values() if c.engine == cfg.engine and c.cluster == cfg.cluster]
        where = {"config_dir": render.pg_config_dir(cfg) if cfg.engine == "postgresql" else ""}
        files = {
            ON_HOST[t].format(**where): text
            for t, text in render.render_host(cfg, cfg.sizing(), peers).items()
        }
        if cfg.engine == "mariadb":
            files[mariadb.DROP_IN] = mariadb.systemd_drop_in(cfg)
            files[fencing.dropin_path(mariadb.SERVICE)] = render.fence_dropin()
        else:
            files[postgresql.cluster(cfg).dropin] = postgresql.dropin_text(cfg)
            files[fencing.dropin_path(postgresql.cluster(cfg).unit)] = render.fence_dropin()
        files.update(monitoring.units_text(cfg))
        files[monitoring.COLLECTOR] = monitoring.COLLECTOR_SOURCE.read_text()
        files.update(snapshots.files_text(cfg, peers))
        files[snapshots.SCRIPT] = snapshots.SCRIPT_SOURCE.read_text()
        if cfg.prometheus_server:
            hosts = list(configs.values())
            files[monitoring.PROMETHEUS_RULES] = monitoring_rules.rules_yaml(hosts, cfg)
            files[monitoring.PROMETHEUS_CONFIG] = monitoring.prometheus_config(cfg, hosts)
        if cfg.firewall_spec.enabled:
            files[firewall.RULES_FILE] = firewall.ruleset_text(cfg, list(configs.values()))
        result[name] = files
    return result


def test_every_rendered_file_on_the_hosts_is_the_offline_rendering(converged):
    expected = offline_files(converged.inventory)
    assert sorted(expected) == sorted(converged.names)
    for name, files in expected.items():
        for path, text in files.items():
            live = base64.b64decode(converged.check(name, f"base64 -w0 {path}"))
            assert live == text.encode(), f"{name}:{path} differs from render.py's rendering"
