"""Take a replica back to its release upgrade's rollback point: its data and system as they were
just before the upgrade, booted into the old release, rejoined to its group.

    pyinfra INVENTORY runbooks/upgrade_rollback.py --data host=HOST

Run with the host's data at the old release (debian_release "12", no postgresql_version); the host
runs the new one. It refuses, before any change, the group's primary (its writes since the
snapshot would be lost), a PostgreSQL standby whose primary runs the new major version, a host
without both snapshots, and any --data key but its own (day2/upgrade_rollback.py says why).
"""

from day2 import kit, upgrade_rollback
from operations import runtime

with runtime.refusals_exit_2():  # a refusal exits 2, a failure 1
    upgrade_rollback.run(kit.start(upgrade_rollback.RUNBOOK))
