"""Restore a PostgreSQL host from the backup host's pgBackRest repository: as a replica that
rejoins its group, or as a stand-alone copy at a moment in the past, for inspection.

    pyinfra INVENTORY runbooks/restore.py --data target=HOST --data mode=replica --dry     # the plan
    pyinfra INVENTORY runbooks/restore.py --data target=HOST --data mode=replica           # do it
    pyinfra INVENTORY runbooks/restore.py --data target=HOST --data mode=standalone \\
        --data time='2026-12-05 06:10:00+00'                         # point-in-time recovery
    (optional: --data backup=LABEL, a stand-alone copy of that backup (default the newest);
     --data wipe=HOST, the target's name again: replace a data directory that holds a database)

It refuses, before any host is changed, when a pre-check fails (roles/restore.py says which and
why); it never restores over its group's live primary. MariaDB: seed a host from a member of its
group (runbooks/seed.py).
"""

from roles import preflight, restore

preflight.validate_inventory(parameters=restore.PARAMETERS)
restore.run()
