"""testinfra checks for live hosts: `pytest tests/infra --hosts=... --inventory=INVENTORY`.

Each host's declared data comes from the same inventory the deploy used; a host is matched by
its inventory name or its ssh_hostname.
"""

import functools

import pytest

from roles.hostdata import HostConfig
from roles.validation import load_inventory


def pytest_addoption(parser):
    parser.addoption("--inventory", default="inventories/lab.py",
                     help="pyinfra inventory the hosts were converged from")


@functools.lru_cache(maxsize=None)
def _inventory(path):
    return load_inventory(path)


@pytest.fixture(scope="module")
def cfg(host, request) -> HostConfig:
    hosts = _inventory(request.config.getoption("--inventory"))
    name = host.backend.get_hostname()
    for inv_name, data in hosts.items():
        if name in (inv_name, data.get("ssh_hostname")):
            return HostConfig.from_data(inv_name, data)
    raise AssertionError(f"host {name!r} is not in {request.config.getoption('--inventory')}")


