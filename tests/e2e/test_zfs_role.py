"""The storage role on the lab VMs after the first converge, itself run twice: killed at a random
moment, then run again to the end; every pool built, and the testinfra checks of
tests/infra/test_zfs.py pass on every VM. (The third run, a no-op: test_idempotence.)"""

import re

import pytest

pytestmark = pytest.mark.e2e


def test_a_killed_converge_is_finished_by_the_next_run(interrupted, converged):
    # `converged` ran deploy.py again after the kill and checked it succeeded
    assert interrupted.operation, interrupted.output[-3000:]
    assert interrupted.rc == -9, (interrupted.rc, interrupted.output[-3000:])


def test_every_pool_built(converged):
    for name in converged.names:
        out = converged.check(name, "zpool list -H -o name,health")
        assert out.split() == ["dbpool", "ONLINE"], (name, out)


def test_testinfra_checks_pass(converged):
    result = converged.testinfra("tests/infra/test_zfs.py")
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and " failed" not in result.stdout
