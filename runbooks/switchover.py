"""Planned switchover: the primary of a replication group moves to one of its replicas.

    pyinfra INVENTORY runbooks/switchover.py --data new_primary=HOST --dry   # the plan
    pyinfra INVENTORY runbooks/switchover.py --data new_primary=HOST         # do it
    (optional: --data max_lag=SECONDS, how far behind the new primary may be; default 30)

Run with the same inventory as deploy.py, before updating it: the inventory must match the live
topology, and the runbook prints the inventory change to make afterwards. It refuses, before any
host is changed, when a pre-check fails (day2/switchover.py says which and why; a --limit that
leaves out a host of the group among them), and any --data key but its own (day2/kit.py).
MariaDB (GTID) and PostgreSQL (streaming replication) groups.
"""

from day2 import kit, switchover, switchover_run
from operations import runtime
from roles import topology

with runtime.refusals_exit_2():  # a refusal exits 2, a failure 1
    args = kit.start(switchover.RUNBOOK)
    topology.check(group_of=args["new_primary"])
    switchover_run.run(args)
