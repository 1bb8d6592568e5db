"""Finishing what an interrupted package install left: a converge killed during `apt-get install`
leaves dpkg's work half done (Debian's next install refuses: "dpkg was interrupted, you must
manually run 'dpkg --configure -a'") or a package manager still running that holds the lock."""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host, logger
from pyinfra.api import operation

from facts.dpkg import DpkgInterrupted

# A package manager left running by the killed run is waited for this long, then the run stops.
LOCK_WAIT_SECONDS = 600


def finish_command(wait: int = LOCK_WAIT_SECONDS) -> str:
    """Wait for apt-get/dpkg processes still running, then let dpkg finish every half-installed
    package (unpacked, half configured, triggers pending); fails after `wait` seconds."""
    return (
        f"i=0; while pgrep -x 'apt-get|dpkg' >/dev/null; do i=$((i + 1)); "
        f'if [ "$i" -gt {wait // 2} ]; then echo "a package manager still runs after {wait} s:" >&2; '
        "pgrep -a -x 'apt-get|dpkg' >&2; exit 1; fi; sleep 2; done; "
        "DEBIAN_FRONTEND=noninteractive dpkg --force-confdef --force-confold --configure -a"
    )


@operation()
def interrupted_installs_finished() -> Generator[str, None, None]:
    """Noop on a host whose packages are whole and where no package manager runs."""
    found = host.get_fact(DpkgInterrupted)
    if not found["audit"] and not found["running"]:
        host.noop("no interrupted package install")
        return
    what = "; ".join(found["running"]) or "none"
    logger.warning(
        f"{host.print_prefix}an earlier package install was interrupted (dpkg --audit: "
        f"{len(found['audit'])} line(s); package managers running: {what}): finishing it first"
    )
    yield finish_command()
