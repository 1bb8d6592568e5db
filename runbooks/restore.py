"""Restore a database host from the backup host: as a replica that rejoins its group, or as a
stand-alone copy at a moment in the past, for inspection. PostgreSQL from its pgBackRest
repository (day2/restore.py); MariaDB from its ZFS copies of the group, with the streamed
binlogs replayed up to the moment (day2/restore_mariadb.py).

    pyinfra INVENTORY runbooks/restore.py --data target=HOST --data mode=replica --dry     # the plan
    pyinfra INVENTORY runbooks/restore.py --data target=HOST --data mode=replica           # do it
    pyinfra INVENTORY runbooks/restore.py --data target=HOST --data mode=standalone \\
        --data time='2026-12-05 06:10:00+00'                         # point-in-time recovery
    (optional: --data backup=NAME, a stand-alone copy of that backup (default the newest):
     PostgreSQL a pgBackRest label, MariaDB a copy's snapshot name (autosnap_...);
     --data wipe=HOST, the target's name again: replace a data directory that holds a database)

It refuses, before any host is changed, when a pre-check fails (day2/restore.py and
day2/restore_mariadb.py say which and why); it never restores over its group's live primary.
"""

from day2 import restore, restore_run
from validation import preflight

preflight.validate_inventory(parameters=restore.PARAMETERS)
restore_run.run()
