"""Move one host to the Debian release its data says (Debian 12 -> 13), with its rollback point.

    pyinfra INVENTORY runbooks/upgrade_release.py --data host=HOST --limit HOST

Usually run by `./dbzfs upgrade` (docs/upgrade.md), which orders a replication group's hosts,
switches its primary over first and gives each run the data the group has at that step. The
host's data says the new release; the host runs the one before. It refuses, before any change,
what day2/upgrade_probe.py refuses and any --data key but its own (day2/kit.py).
"""

from day2 import kit, upgrade_release
from operations import runtime

with runtime.refusals_exit_2():  # a refusal exits 2, a failure 1
    upgrade_release.run(kit.start(upgrade_release.RUNBOOK))
