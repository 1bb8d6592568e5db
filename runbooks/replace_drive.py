"""Replace a drive of a host's pool by a new one; ZFS resilvers onto it.

    pyinfra INVENTORY runbooks/replace_drive.py --limit HOST --data host=HOST \
        --data old=/dev/disk/by-id/OLD --data new=/dev/disk/by-id/NEW --dry   # the plan
    (the same without --dry: do it; --data wipe=yes: the new drive may hold data, wipe it)

`zpool status -P HOST's-pool` names the old drive (FAULTED, UNAVAIL or REMOVED, or one still
working that is to go); `ls -l /dev/disk/by-id` the new one. It refuses, before anything is
changed, a new drive that is not blank, as pool creation does (day2/drive_replacement.py), and
any --data key but its own (day2/kit.py).
"""

from day2 import drive_replacement, kit
from operations import runtime

with runtime.refusals_exit_2():  # a refusal exits 2, a failure 1
    drive_replacement.run(kit.start(drive_replacement.RUNBOOK))
