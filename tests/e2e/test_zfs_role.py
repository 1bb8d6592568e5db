"""The storage role on the lab VMs after the first converge: every pool built, and the testinfra
checks of tests/infra/test_zfs.py pass on every VM."""

import re

import pytest

pytestmark = pytest.mark.e2e


def test_every_pool_built(converged):
    for name in converged.names:
        out = converged.check(name, "zpool list -H -o name,health")
        assert out.split() == ["dbpool", "ONLINE"], (name, out)


def test_testinfra_checks_pass(converged):
    result = converged.testinfra("tests/infra/test_zfs.py")
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and " failed" not in result.stdout
