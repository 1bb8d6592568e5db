"""A converge never fights the live replication topology: with an inventory that disagrees with
what runs (each engine's primary and replica swapped, as after a switchover the inventory does not
show yet), deploy.py stops before any operation, naming every host, what it declares and what runs,
and the live servers replicate as before."""

import pytest

from tests.e2e.conftest import REPO

pytestmark = pytest.mark.e2e

SWAPPED = REPO / "tests" / "e2e" / "inventories" / "swapped_roles.py"


def replication(lab):
    return (
        lab.check("db2", "mariadb -E -e 'SHOW SLAVE STATUS' | sed -n 's/ *Master_Host: //p'").strip(),
        lab.check("db1", "mariadb -NB -e 'SELECT @@global.read_only'").strip(),
        lab.check("pg2", "cd / && runuser -u postgres -- psql -XAtc 'SELECT pg_is_in_recovery()'").strip(),
        lab.check("pg1", "cd / && runuser -u postgres -- psql -XAtc 'SELECT pg_is_in_recovery()'").strip(),
    )


def test_a_stale_inventory_stops_before_any_change(converged):
    before = replication(converged)
    assert before == ("10.99.0.11", "0", "t", "f")
    result = converged.pyinfra(inventory=SWAPPED)
    output = result.stdout + result.stderr
    assert result.rc != 0, output[-4000:]
    assert (
        "4 problem(s) between the inventory and the live replication topology; no host was changed" in output
    )
    for line in (
        "db1: role = 'replica': the inventory declares it a replica of db2, but the live server is a primary",
        "db2: role = 'primary': the inventory declares it a primary, but the live server is a replica of db1 "
        "(10.99.0.11). Fix: declare what runs (db2: role 'replica', primary 'db1')",
        "pg1: role = 'replica': the inventory declares it a standby of pg2, but the live server is a primary",
        "pg2: role = 'primary': the inventory declares it a primary, but the live server is a standby of pg1 "
        "(10.99.0.21)",
    ):
        assert line in output, output[-4000:]
    assert "Starting operation" not in output
    assert replication(converged) == before
