"""Failover: the primary of a replication group is gone; the most advanced replica takes its place.

    pyinfra INVENTORY runbooks/failover.py --data failed=HOST --exclude HOST --dry   # the plan
    pyinfra INVENTORY runbooks/failover.py --data failed=HOST --exclude HOST         # do it
    (optional: --data new_primary=HOST, a replica that nothing is ahead of)

Run with the same inventory as deploy.py, before updating it. `--exclude HOST` leaves the failed
primary's host out of the run: pyinfra connects to every host of a run before any runbook code
runs, counts one it cannot reach as failed and exits 1 for it (and without -y asks whether to go
on); left out, a failover that succeeds exits 0. Its server is then judged from its replicas
(its replication port, seen from each). The runbook refuses, before any host is changed, while
the primary's server or a replica's link to it still answers (day2/failover.py says which checks
and why), and any --data key but its own (day2/kit.py). It prints the inventory change and how
to rejoin the old primary, which is fenced (roles/fencing.py) until it is re-seeded.
"""

from day2 import failover, kit
from operations import runtime
from roles import topology

with runtime.refusals_exit_2():  # a refusal exits 2, a failure 1
    args = kit.start(failover.RUNBOOK)
    topology.check(group_of=args["failed"])
    failover.run(args)
