"""Seed a replica from ZFS snapshots of another member of its replication group.

    pyinfra INVENTORY runbooks/seed.py --data replica=HOST --dry            # the plan
    pyinfra INVENTORY runbooks/seed.py --data replica=HOST                  # do it
    (optional: --data source=HOST, the member to copy, default the replica's primary;
     --data wipe=HOST, the replica's name again: replace a data directory that holds a database)

The inventory is the truth: the replica must be declared a replica with a primary. It refuses,
before any host is changed, when a pre-check fails (day2/seeding.py says which and why). A run
that was cut resumes where it stopped when run again. MariaDB and PostgreSQL groups.
"""

from day2 import seeding
from validation import preflight

preflight.validate_inventory(parameters=seeding.PARAMETERS)
seeding.run()
