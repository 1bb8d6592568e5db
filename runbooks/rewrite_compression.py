"""Rewrite a host's datasets with the compression its data declares (ZFS compresses a block once,
when it writes it: a changed zfs_compression reaches new blocks only).

    pyinfra INVENTORY runbooks/rewrite_compression.py --limit HOST --data host=HOST --dry   # the plan
    (the same without --dry: do it; `./dbzfs roll` runs it after each host's converge)

One host per run. The server runs during the full copy and stops for the last incremental copy
and the swap (seconds on the lab); a replica catches up after. A group's primary is refused
unless --data allow_primary=yes (it refuses writes meanwhile): `./dbzfs roll --limit HOST`
switches it over to a replica first. It refuses, before anything is changed, a host whose
datasets do not get the new compression yet (converge first) or whose pool lacks the space for
the copies below zfs_capacity_threshold (day2/compression_rewrite.py), and any --data key but
its own (day2/kit.py).
"""

from day2 import compression_rewrite, kit
from operations import runtime

with runtime.refusals_exit_2():  # a refusal exits 2, a failure 1
    compression_rewrite.run(kit.start(compression_rewrite.RUNBOOK))
