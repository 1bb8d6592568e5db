"""Converge database hosts on ZFS: `pyinfra INVENTORY deploy.py` (add --dry --diff to preview).

The inventory's data is validated first; a problem anywhere stops the run before any operation.
"""

from roles import preflight, zfs

preflight.validate_inventory()

zfs.storage()
