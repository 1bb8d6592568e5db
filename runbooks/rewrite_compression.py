"""Rewrite a host's datasets with the compression its data declares (ZFS compresses a block once,
when it writes it: a changed zfs_compression reaches new blocks only).

    pyinfra INVENTORY runbooks/rewrite_compression.py --limit HOST --dry   # the plan
    (the same without --dry: do it; `./dbzfs roll` runs it after each host's converge)

The server runs during the full copy and stops for the last incremental copy and the swap
(seconds on the lab); a replica catches up after, a primary refuses writes meanwhile. It refuses,
before anything is changed, a host whose datasets do not get the new compression yet (converge
first) or whose pool lacks the space for the copies below zfs_capacity_threshold
(day2/compression_rewrite.py).
"""

from day2 import compression_rewrite
from validation import preflight

preflight.validate_inventory()
compression_rewrite.run()
