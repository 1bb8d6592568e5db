"""testinfra checks for live hosts: `pytest tests/infra --hosts=... --inventory=INVENTORY`.

Each host's declared data comes from the same inventory the deploy used; a host is matched by
its inventory name or its ssh_hostname.
"""

import functools

import pytest

from model.hostdata import HostConfig
from validation import load_inventory_isolated


def pytest_addoption(parser):
    parser.addoption(
        "--inventory", default="inventories/lab.py", help="pyinfra inventory the hosts were converged from"
    )


@functools.cache
def _inventory(path):
    return load_inventory_isolated(path)


@pytest.fixture(scope="module")
def cfg(host, request) -> HostConfig:
    hosts = _inventory(request.config.getoption("--inventory"))
    name = host.backend.get_hostname()
    for inv_name, data in hosts.items():
        if name in (inv_name, data.get("ssh_hostname")):
            return HostConfig.from_data(inv_name, data)
    raise AssertionError(f"host {name!r} is not in {request.config.getoption('--inventory')}")


@pytest.fixture(scope="module")
def members(cfg, request) -> list[HostConfig]:
    """The host's replication group as the inventory declares it, itself included."""
    hosts = _inventory(request.config.getoption("--inventory"))
    configs = [cfg if name == cfg.name else HostConfig.from_data(name, data) for name, data in hosts.items()]
    return [c for c in configs if c.engine == cfg.engine and c.cluster == cfg.cluster]


def pytest_collection_modifyitems(config, items):
    """A module that sets `engine = "mariadb"` (or "postgresql") checks only the hosts whose
    inventory data has that engine, one that sets `only_where = "<key>"` only the hosts whose data
    sets that key true, one that sets `host_roles = (...)` only the hosts whose role is one of
    them: its tests for other hosts are deselected (reported as deselected, never skipped), so
    `pytest tests/infra --hosts=<every host>` stays green."""
    keep, drop = [], []
    for item in items:
        module = getattr(item, "module", None)
        engine = getattr(module, "engine", None)
        only_where = getattr(module, "only_where", None)
        host_roles = getattr(module, "host_roles", None)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if (engine or only_where or host_roles) and "_testinfra_host" in params:
            hosts = _inventory(config.getoption("--inventory"))
            name = params["_testinfra_host"].backend.get_hostname()
            data = next((d for n, d in hosts.items() if name in (n, d.get("ssh_hostname"))), None)
            # unknown hosts fail in `cfg`
            if data is not None and (
                (engine and data.get("engine") != engine)
                or (only_where and not data.get(only_where))
                or (host_roles and data.get("role") not in host_roles)
            ):
                drop.append(item)
                continue
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
