"""PostgreSQL's major upgrade (15 -> 17) of a group's primary, once it runs Debian 13.

    pyinfra INVENTORY runbooks/upgrade_postgresql.py --data host=HOST

Usually run by `./dbzfs upgrade` (the "major" step, docs/runbooks/upgrade_release.md), with the
host's data at debian_release "13" and postgresql_version "15". pg_upgradecluster --method=link,
after a ZFS snapshot of the stopped cluster (day2/upgrade_major.py says why link mode); the
standbys are reseeded from it next. It refuses, before any change, a host that is not the group's
primary or not on the version before the release's, and any --data key but its own (day2/kit.py).
"""

from day2 import kit, upgrade_major
from operations import runtime

with runtime.refusals_exit_2():  # a refusal exits 2, a failure 1
    upgrade_major.run(kit.start(upgrade_major.RUNBOOK))
