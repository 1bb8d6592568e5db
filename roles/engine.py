"""What the engine roles (roles/mariadb.py, roles/postgresql.py) and the runbooks share: the host's
replication group read from the inventory, secrets, steps every host of a group passes in the same
place, packages installed with the lists refreshed only when something is missing, and config
files rendered by roles/render.py.

Ordering across hosts: pyinfra runs operations in waves and joins hosts only at operations they
share (the same call site). A step that only some hosts need is therefore called on every host of
the group through `step`, as a no-op where it does not apply, so that e.g. a replica's seeding
waits for the primary's replication account created in the step before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyinfra import host, inventory, state
from pyinfra.api import HiddenValue
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import apt

from engines import db_settings_check
from facts.hardware import HostHardware
from model import secrets
from model.hostdata import HostConfig
from model.sizing import Sizing
from operations import common, packages as packages_ops, runtime
from roles import render
from roles.zfs_packages import missing as missing_packages


def host_config() -> HostConfig:
    """This host's settings (group_data defaults under its inventory data)."""
    return HostConfig.from_data(host.name, host.data)


def sized_for_this_host(cfg: HostConfig) -> Sizing:
    """Settings sized from the live host's RAM and CPUs (HostHardware). Stops the deploy before
    any operation of the host when its memory overrides with the ARC exceed the RAM it really has
    (validation checked the declared `hardware`, which may differ)."""
    key = (id(state), host.name)
    if key not in _hardware:
        _hardware[key] = host.get_fact(HostHardware)
    hw = _hardware[key]
    problems = db_settings_check.memory_problems(cfg, hw["ram_bytes"], hw["cpus"])
    if problems:
        raise runtime.Refused(
            "\n".join(f"{p} (live RAM and CPUs of the host); nothing was changed" for p in problems)
        )
    return cfg.sizing(ram_bytes=hw["ram_bytes"], cpus=hw["cpus"])


# The host's RAM and CPUs do not change during a run: read once per host (three roles size).
_hardware: dict[tuple[int, str], dict] = {}


@dataclass(frozen=True)
class Group:
    """A host's replication group: every inventory host with the same engine and cluster (itself
    included, in inventory order), whatever --limit selects."""

    me: HostConfig
    members: tuple[HostConfig, ...]

    @property
    def primary(self) -> HostConfig | None:
        """The host this one follows (a replica), or this host (a primary)."""
        if self.me.role == "primary":
            return self.me
        return next((m for m in self.members if m.name == self.me.primary), None)

    @property
    def replicas(self) -> list[HostConfig]:
        """The replicas that follow this host (none unless it is a primary)."""
        return [m for m in self.members if m.role == "replica" and m.primary == self.me.name]

    @property
    def peers(self) -> list[HostConfig]:
        return [m for m in self.members if m.name != self.me.name]

    def source(self) -> HostConfig:
        """A replica's primary; stops the deploy when the inventory does not hold it (validation
        reports that first)."""
        primary = self.primary
        if primary is None or primary is self.me:
            raise runtime.Refused(f"{self.me.name}: primary {self.me.primary!r} is not in the inventory")
        return primary


def group(cfg: HostConfig) -> Group:
    members = []
    for other in inventory:
        c = cfg if other.name == cfg.name else HostConfig.from_data(other.name, other.data)
        if c.engine == cfg.engine and c.cluster == cfg.cluster:
            members.append(c)
    return Group(cfg, tuple(members))


def secret(key: str) -> HiddenValue:
    """A secret by key, masked in pyinfra's output; stops the deploy, naming the host, the key
    and where it was looked for, when it is missing (validation reports that first)."""
    try:
        loaded = secrets.load()
    except secrets.SecretsError as exc:
        raise runtime.Refused(f"{host.name}: {exc}") from None
    value = loaded.get(key)
    if not value:
        raise runtime.Refused(
            f"{host.name}: secret {key!r} is missing (looked in: {loaded.source}); "
            f"export {secrets.env_name(key)} or add it to the secrets file"
        )
    return HiddenValue(value)


def step(applies: bool, why_not: str, op: Callable[..., OperationMeta], **kwargs) -> OperationMeta:
    """Call `op` on this host, or a no-op in its place at the same call site (see the module's
    docstring), so that hosts of a group stay joined at this step."""
    if not hasattr(op, "_inner"):  # a helper would add a stack frame the no-op does not have
        raise TypeError(f"engine.step takes a pyinfra operation, not {op!r}")
    if not applies:
        kwargs = {"name": kwargs.get("name"), "reason": why_not}
    # One call expression on one line: pyinfra identifies an operation by the line numbers of its
    # call stack, so the operation and its no-op must be called from the same line.
    return (op if applies else common.not_on_this_host)(**kwargs)


_refreshed: set[tuple[int, str]] = set()
_installed: dict[tuple[int, str], dict] = {}


def installed_packages() -> dict:
    """The host's Debian packages as the deploy found them (DebPackages, read once per host and
    run: roles decide what to install from it while the deploy is prepared, before any change)."""
    key = (id(state), host.name)
    if key not in _installed:
        _installed[key] = host.get_fact(DebPackages) or {}
    return _installed[key]


def packages(
    name: str, names: list[str], installed: dict | None = None, max_list_age: int = 3600, **kwargs
) -> None:
    """apt packages (no recommends; `name=version` pins one). Only when one of them is missing
    (or at another version) are the package lists
    refreshed first, at most once per host and run, and only when older than `max_list_age`
    seconds (0: whatever their age and however often, after adding a source): a converge an hour
    or a week later must not count a list refresh as a change. `installed`: DebPackages, when already read."""
    installed = installed_packages() if installed is None else installed
    key = (id(state), host.name)
    missing = missing_packages(names, installed or {})
    # max_list_age 0 follows a source added in this run: refreshed again even after an earlier
    # refresh (the firewall's nftables, the first package of a bare host, came before the ZFS
    # sources: CI at b074f8d).
    if missing and (key not in _refreshed or max_list_age == 0):
        if key not in _refreshed:
            # A half-installed package reads as missing: a killed converge's leftovers come first.
            packages_ops.interrupted_installs_finished(name="Finish interrupted package installs")
        _refreshed.add(key)
        apt.update(name="Refresh the package lists", cache_time=max_list_age or None)
    # Installed when the deploy was prepared stays installed: no need to ask the host again.
    step(
        bool(missing),
        f"installed: {', '.join(names)}",
        apt.packages,
        name=name,
        packages=names,
        no_recommends=True,
        **kwargs,
    )


def config_file(
    template: str,
    context: dict,
    dest: str,
    check: str | None = None,
    checker: str | None = None,
    user: str = "root",
    group: str = "root",
    mode: str = "644",
    name: str | None = None,
) -> OperationMeta:
    """A file from templates/ rendered by roles/render.py (the same code and Jinja settings the
    unit tests and `render_host` use) and placed with operations.common.config_file."""
    return common.config_file(
        name=name or dest,
        path=dest,
        content=render.render(template, context),
        user=user,
        group=group,
        mode=mode,
        check=check,
        checker=checker,
    )


def text_file(
    text: str, dest: str, user: str = "root", group: str = "root", mode: str = "644", name: str | None = None
) -> OperationMeta:
    """A file with text rendered by roles/render.py (e.g. a systemd drop-in)."""
    return common.config_file(name=name or dest, path=dest, content=text, user=user, group=group, mode=mode)


def active_names() -> set[str]:
    """The hosts taking part in this run: in --limit (when given) and connected."""
    return {h.name for h in inventory.get_active_hosts()}
