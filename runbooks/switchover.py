"""Planned switchover: the primary of a replication group moves to one of its replicas.

    pyinfra INVENTORY runbooks/switchover.py --data new_primary=HOST --dry   # the plan
    pyinfra INVENTORY runbooks/switchover.py --data new_primary=HOST         # do it
    (optional: --data max_lag=SECONDS, how far behind the new primary may be; default 30)

Run with the same inventory as deploy.py, before updating it: the inventory must match the live
topology, and the runbook prints the inventory change to make afterwards. It refuses, before any
host is changed, when a pre-check fails (day2/switchover.py says which and why). MariaDB
(GTID) and PostgreSQL (streaming replication) groups.
"""

from pyinfra import host

from day2 import switchover, switchover_run
from roles import topology
from validation import preflight

preflight.validate_inventory(parameters=switchover.PARAMETERS)
topology.check(group_of=host.data.get("new_primary"))
switchover_run.run()
