"""inventories/lab.py with db1's firewall_admin_networks naming a network this machine's sessions
do not come from (192.0.2.0/24, TEST-NET-1: no packet is ever sent there): a converge must refuse
it before any change, since the new rules would shut its own SSH session out."""

import runpy
from pathlib import Path

LAB = runpy.run_path(str(Path(__file__).resolve().parents[3] / "inventories" / "lab.py"))

mariadb = [
    (name, {**data, "firewall_admin_networks": ["192.0.2.0/24"]} if name == "db1" else data)
    for name, data in LAB["mariadb"]
]
postgresql = LAB["postgresql"]
monitoring = LAB["monitoring"]
