"""Converge database hosts on ZFS: `pyinfra INVENTORY deploy.py` (add --dry --diff to preview).

The inventory's data is validated first, then compared with the live replication topology (a
converge never fights a switchover or failover the inventory does not show yet); a problem anywhere
stops the run before any operation.
"""

from pyinfra import host

from roles import mariadb, postgresql, preflight, topology, zfs

preflight.validate_inventory()
topology.check()

zfs.storage()

if host.data.engine == "mariadb":
    mariadb.server()
elif host.data.engine == "postgresql":
    postgresql.server()
