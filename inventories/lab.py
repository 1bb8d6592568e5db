"""The local lab's VMs (lab/lab.yaml) as a pyinfra inventory: `pyinfra inventories/lab.py deploy.py`.

Connection data points at the qemu lab (`python -m lab up`): ssh on 127.0.0.1:<ssh_port> as root
with the lab's own key (.lab/id_ed25519). Importable without the lab running. Groups: `mariadb`
and `postgresql`, as in inventories/prod.py.
"""

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
        **vm.host_data,
    }


_lab = load()
mariadb = [_host(vm) for vm in _lab.vms.values() if vm.engine == "mariadb"]
postgresql = [_host(vm) for vm in _lab.vms.values() if vm.engine == "postgresql"]
