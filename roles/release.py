"""The Debian release each host runs, against its data's debian_release (model/releases.py): the
deploy and every runbook stop, before any host is changed, when a host runs another release or
another system. `problems` is pure (unit-tested); `check` reads every active host's
LinuxDistribution fact once per run, in parallel, and reports every disagreement at once.
"""

from __future__ import annotations

from pyinfra import inventory
from pyinfra.api.host import Host
from pyinfra.facts.server import LinuxDistribution

from model import releases
from model.hostdata import HostConfig
from model.problems import Problem, format_problems
from operations import runtime


def problems(cfg: HostConfig, distribution: dict | None, upgrading: bool = False) -> list[Problem]:
    """A Problem when the host does not run the release its data declares (`upgrading`: the host
    a release upgrade or its rollback moves to it may still run the release before or after it)."""
    found = releases.of_distribution(distribution)
    if cfg.debian_release not in releases.RELEASES:
        return []  # validation reported it
    wanted = releases.get(cfg.debian_release)
    neighbours = found is not None and (
        found is releases.previous(wanted) or wanted is releases.previous(found)
    )
    if found is wanted or (upgrading and neighbours):
        return []
    if found is None:
        return [
            Problem(
                cfg.name,
                "debian_release",
                cfg.debian_release,
                f"the host runs {releases.described(distribution)}, not Debian",
                "install "
                + " or ".join(
                    r.label for r in sorted(releases.RELEASES.values(), key=lambda r: -int(r.major))
                )
                + " on it, or take it out of the inventory",
            )
        ]
    return [
        Problem(
            cfg.name,
            "debian_release",
            cfg.debian_release,
            f"the host runs {found.label}, the data says {wanted.label}",
            f'set debian_release: "{found.major}" for it, or upgrade the host first (docs/releases.md)',
        )
    ]


def check(upgrading: str | None = None) -> None:
    """Stop the run before any host is changed when a host's release is not its data's (but for
    the host a release upgrade moves: day2/upgrade_release.py)."""
    found = runtime.once_per_run("debian release", lambda: _read_all(upgrading))
    if found:
        raise runtime.Refused(
            "\n" + format_problems(found, what="between the inventory and the hosts' releases")
        )


def _read_all(upgrading: str | None = None) -> list[Problem]:
    def one(h: Host) -> list[Problem]:
        cfg = HostConfig.from_data(h.name, h.data)
        return problems(cfg, h.get_fact(LinuxDistribution), upgrading=h.name == upgrading)

    active = {h.name for h in inventory.get_active_hosts()}
    hosts = [h for h in inventory if h.name in active]
    return [p for found in runtime.on_every_host(hosts, one) for p in found]
