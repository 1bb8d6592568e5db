"""Restore a database host from the backup host: as a replica that rejoins its group, or as a
stand-alone copy at a moment in the past, for inspection. PostgreSQL from its pgBackRest
repository (day2/restore.py); MariaDB from its ZFS copies of the group, with the streamed
binlogs replayed up to the moment (day2/restore_mariadb.py).

    pyinfra INVENTORY runbooks/restore.py --data host=HOST --data mode=replica --dry     # the plan
    pyinfra INVENTORY runbooks/restore.py --data host=HOST --data mode=replica           # do it
    pyinfra INVENTORY runbooks/restore.py --data host=HOST --data mode=standalone \\
        --data time='2026-12-05 06:10:00+00'                         # point-in-time recovery
    (optional: --data backup=NAME, a stand-alone copy of that backup (default the newest):
     PostgreSQL a pgBackRest label, MariaDB a copy's snapshot name (autosnap_...);
     --data wipe=yes: replace a data directory that holds a database)

It refuses, before any host is changed, when a pre-check fails (day2/restore.py and
day2/restore_mariadb.py say which and why), and any --data key but its own (day2/kit.py): a
misspelt time is not the end of the newest backup. It never restores over its group's live
primary.
"""

from day2 import kit, restore, restore_run
from operations import runtime

with runtime.refusals_exit_2():  # a refusal exits 2, a failure 1
    restore_run.run(kit.start(restore.RUNBOOK))
