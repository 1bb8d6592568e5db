"""Converge database hosts on ZFS: `pyinfra INVENTORY deploy.py` (add --dry --diff to preview).

The inventory's data is validated first; a problem anywhere stops the run before any operation.
"""

from pyinfra import host

from roles import mariadb, postgresql, preflight, zfs

preflight.validate_inventory()

zfs.storage()

if host.data.engine == "mariadb":
    mariadb.server()
elif host.data.engine == "postgresql":
    postgresql.server()
