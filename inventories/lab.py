"""The local lab's VMs (lab/lab.yaml) as a pyinfra inventory: `pyinfra inventories/lab.py deploy.py`.

Connection data points at the qemu lab (`python -m lab up`): ssh on 127.0.0.1:<ssh_port> as root
with the lab's own key (.lab/id_ed25519). Importable without the lab running. Groups: `mariadb`
and `postgresql`, as in inventories/prod.py, and `monitoring` (the VMs whose lab.yaml entry lists
it: Prometheus runs there).
"""

import ipaddress
import sys
from pathlib import Path

_repo = Path(__file__).resolve().parent.parent
if str(_repo) not in sys.path:
    sys.path.insert(0, str(_repo))

from lab.definition import SSH_KEY, VM, load  # noqa: E402


def _host(vm: VM) -> tuple[str, dict]:
    return vm.name, {
        "ssh_hostname": "127.0.0.1",
        "ssh_port": vm.ssh_port,
        "ssh_user": "root",
        "ssh_key": str(SSH_KEY),
        "ssh_strict_host_key_checking": "off",
        "ssh_known_hosts_file": "/dev/null",
        # An emulated guest busy booting or importing its pool after a power loss can take longer
        # than paramiko's 15 s to send its SSH banner: wait, and try again, rather than drop it.
        "ssh_paramiko_connect_kwargs": {"banner_timeout": 60, "auth_timeout": 60},
        "ssh_connect_retries": 2,
        **vm.host_data,
        **LAB_DATA,
    }


# The lab's own settings over group_data/all.py: alerts fire within seconds of a fault (the e2e
# tests inject faults and wait for them). Under TCG the monitoring is what a guest does when it is
# idle, and it slows every other guest: measured on a converged lab, node_exporter used 2.3 s of
# CPU per scrape (15% of a vCPU at 15 s) and a run of the ZFS textfile collector 2.2 s. So the lab
# scrapes every 30 s and runs the collector at the default 60 s; alerts fire a minute later.
# node_exporter without the collectors that cost the most under TCG and that no alert reads:
# systemd (every unit over D-Bus: 9 s of a scrape, dbus-daemon and PID 1 busy with it), hwmon and
# nvme (emulated drives: no sensors, no health log worth reading), netclass. Measured on db2 at
# idle: node_exporter 26% of its vCPU, the guest 17-22% of a host core each, with them all on.
LAB_DATA = {
    # qemu boots a lab VM with its image's kernel: a release upgrade reaches the new one by kexec
    "reboot_method": "kexec",
    "prometheus_scrape_interval": "30s",
    "node_exporter_disabled_collectors": ["systemd", "hwmon", "nvme", "netclass"],
    "alert_for": {
        "TargetDown": "30s",
        "TargetMissing": "30s",
        "DatabaseDown": "10s",
        "ZpoolNotOnline": "10s",
        "ZpoolCapacityHigh": "10s",
        "ZpoolDeviceErrors": "10s",
        "ZpoolDataErrors": "10s",
        "ZpoolSpareInUse": "10s",
        "ZpoolScrubFoundErrors": "10s",
        "ZpoolScrubOverdue": "10s",
        "ArcMetadataHitRatioLow": "10s",
        "MariaDBReplicationStopped": "10s",
        "MariaDBReplicaLagging": "10s",
        "PostgresStandbyNotStreaming": "10s",
        "PostgresReplicationSlotWALHigh": "10s",
        "ZfsSnapshotTooOld": "10s",
        "ZfsMetricsCollectorFailing": "30s",
        "BackupCopyTooOld": "10s",
        "BackupPullFailing": "30s",
    },
}


# The PostgreSQL hosts hold an application database and its user, as a real fleet's do, reachable
# from the lab's private network: the switchover test's client writes through it with libpq's
# multi-host `target_session_attrs=read-write`, as an application follows a moved primary. Its
# password is the lab's throwaway secret `lab_app_password` (lab/control.py).
def _network(vm: VM) -> str:
    return str(ipaddress.ip_interface(f"{vm.private_address}/{vm.private_prefix}").network)


LAB_POSTGRESQL_DATA = {
    "databases": [{"name": "app"}],
    "db_users": [{"name": "app", "password_secret": "lab_app_password", "owner": True}],
}


# Let's Encrypt's pool on the MariaDB hosts: 11 two-way mirrors and 2 hot spares of 24 drives
# (the PostgreSQL hosts keep 12 mirrors, group_data's default).
LAB_MARIADB_DATA = {"zpool_spares": 2}

_lab = load()


def _mariadb_host(vm: VM) -> tuple[str, dict]:
    name, data = _host(vm)
    return name, {**data, **LAB_MARIADB_DATA}


def _backup_host(vm: VM) -> tuple[str, dict]:
    """A backup VM of lab.yaml's backup_vms (role "backup", no engine): connection data, its
    host_data and the lab's settings, like the database VMs'. Not a group here: the lab that `up`,
    `converge` and this inventory run has no backup host; inventories/lab_backup.py adds it."""
    if vm.role != "backup":
        raise ValueError(f"{vm.name} is not a backup VM (lab/lab.yaml backup_vms)")
    return _host(vm)


mariadb = [_mariadb_host(vm) for vm in _lab.vms.values() if vm.engine == "mariadb"]
postgresql = [
    (name, {**data, **LAB_POSTGRESQL_DATA, "db_client_networks": [_network(_lab.vms[name])]})
    for name, data in (_host(vm) for vm in _lab.vms.values() if vm.engine == "postgresql")
]
monitoring = [vm.name for vm in _lab.vms.values() if "monitoring" in vm.groups]
