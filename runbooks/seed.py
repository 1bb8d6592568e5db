"""Seed a replica from ZFS snapshots of another member of its replication group.

    pyinfra INVENTORY runbooks/seed.py --data host=HOST --dry            # the plan
    pyinfra INVENTORY runbooks/seed.py --data host=HOST                  # do it
    (optional: --data source=HOST, the member to copy, default the replica's primary;
     --data wipe=yes: replace a data directory that holds a database)

The inventory is the truth: the replica must be declared a replica with a primary. It refuses,
before any host is changed, when a pre-check fails (day2/seeding.py says which and why), and any
--data key but its own (day2/kit.py). A run that was cut resumes where it stopped when run
again. MariaDB and PostgreSQL groups.
"""

from day2 import kit, seeding
from operations import runtime

with runtime.refusals_exit_2():  # a refusal exits 2, a failure 1
    seeding.run(kit.start(seeding.RUNBOOK))
