"""Converge database hosts on ZFS: `pyinfra INVENTORY deploy.py` (add --dry --diff to preview).

The inventory's data is validated first, then each host's Debian release with its data's
debian_release, then the live replication topology (a
converge never fights a switchover or failover the inventory does not show yet); a problem anywhere
stops the run before any operation. A host with role = "backup" gets the backup role instead of an
engine's (roles/backup.py).
"""

from pyinfra import host

from operations import runtime
from roles import backup, binlogs, mariadb, pgbackrest, postgresql, release, snapshots, topology, zfs
from validation import preflight

with runtime.refusals_exit_2():  # a refusal (bad data, a live state it must not act on) exits 2
    preflight.validate_inventory()
    release.check()  # every host runs its data's Debian release (debian_release)
    topology.check()

    if host.data.role == backup.ROLE:
        backup.software()
        backup.storage()
        pgbackrest.repository()
        binlogs.streams()
    else:
        role = {"mariadb": mariadb, "postgresql": postgresql}[host.data.engine]
        # Packages before the pool: every package's postinst reloads systemd, and once a pool of 24
        # drives exists each reload re-reads twice as many units (a partition or two per drive, each
        # with its by-id, by-path, by-partuuid... device units).
        zfs.software()
        role.software()
        zfs.storage()
        backup.access()
        if host.data.engine == "postgresql":
            pgbackrest.client()
        role.server()
        snapshots.schedule()
    # Last: the first pull needs the database hosts' access and their first snapshots.
    backup.schedule()
    # After the servers archive: the stanzas and their first backups.
    pgbackrest.schedule()
