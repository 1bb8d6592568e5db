"""Failover: the primary of a replication group is gone; the most advanced replica takes its place.

    pyinfra INVENTORY runbooks/failover.py --data failed=HOST --dry   # the plan
    pyinfra INVENTORY runbooks/failover.py --data failed=HOST         # do it
    (optional: --data new_primary=HOST, a replica that nothing is ahead of)

Run with the same inventory as deploy.py, before updating it. The failed primary's host may be
unreachable: pyinfra reports it and goes on with the others (and exits 1 for that host). The
runbook refuses, before any host is changed, while the primary's server or a replica's link to
it still answers (day2/failover.py says which checks and why). It prints the inventory change
and how to rejoin the old primary, which is fenced (roles/fencing.py) until it is re-seeded.
"""

from pyinfra import host

from day2 import failover
from roles import topology
from validation import preflight

preflight.validate_inventory(parameters=failover.PARAMETERS)
topology.check(group_of=host.data.get("failed"))
failover.run()
