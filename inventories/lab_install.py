"""The lab's bare VMs (lab/lab.yaml `bare_vms`) as a pyinfra inventory: fresh Debian servers of the
lab's release with no ZFS and no kernel headers, for `pyinfra inventories/lab_install.py deploy.py`,
which then installs everything from nothing (`./dbzfs test-install` boots them and does that).

Connection data as in inventories/lab.py; groups `mariadb` and `postgresql` likewise.
"""

import sys
from pathlib import Path

_repo = Path(__file__).resolve().parent.parent
if str(_repo) not in sys.path:
    sys.path.insert(0, str(_repo))

from inventories.lab import _host  # noqa: E402
from lab.definition import load  # noqa: E402

_lab = load()
mariadb = [_host(vm) for vm in _lab.bare.values() if vm.engine == "mariadb"]
postgresql = [_host(vm) for vm in _lab.bare.values() if vm.engine == "postgresql"]
