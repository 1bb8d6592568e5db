"""The host firewall's rules put in place without ever shutting the operator out
(roles/firewall.py renders them and refuses, before any change, rules that would not let the
converge's own SSH session in again).

`rules`: nothing when the file is as rendered and its table loaded. Otherwise the candidate is
uploaded, checked by nft (`nft -c`), a revert is armed (a transient systemd timer that reloads
the previous rules of ours, or deletes our table, after `revert_after` seconds), the candidate is
loaded (one nft transaction: all of it or nothing), and a new SSH connection is opened: only
when it answers is the revert disarmed and the file installed (nftables.service loads it at
boot). A new connection that is refused leaves the revert to fire: the operation waits for it,
checks that the host answers again, and fails saying the rules were reverted.
"""

from __future__ import annotations

import hashlib
import io
import shlex
from collections.abc import Generator
from time import sleep

from pyinfra import host, logger
from pyinfra.api import FileUploadCommand, FunctionCommand, OperationError, StringCommand, operation
from pyinfra.facts.server import Command

from facts.firewall import FirewallState
from operations.common import CHECK_DIR, PRIVATE_DIR

REVERT_UNIT = "dbzfs-firewall-revert"
BEFORE = f"{PRIVATE_DIR}/firewall.before.nft"  # the rules a revert restores; gone once it is done


def arm_revert_script(path: str, table: str, revert_after: int) -> str:
    """The revert, armed: the rules of ours the host has now (the file, when it is ours), else
    our table deleted; a transient timer runs it after `revert_after` seconds."""
    q = shlex.quote
    return (
        "set -eu\n"
        f"mkdir -p -m 700 {PRIVATE_DIR}\n"
        f"if [ -f {q(path)} ] && grep -qx 'table inet {table}' {q(path)}; then cp {q(path)} {BEFORE}; "
        f"else printf 'table inet {table}\\ndelete table inet {table}\\n' > {BEFORE}; fi\n"
        f"systemctl stop {REVERT_UNIT}.timer {REVERT_UNIT}.service 2>/dev/null || true\n"
        f"systemctl reset-failed {REVERT_UNIT}.service 2>/dev/null || true\n"
        f"systemd-run --quiet --unit={REVERT_UNIT} --on-active={int(revert_after)} "
        f"sh -c {q(f'nft -f {BEFORE} && rm -f {BEFORE}')}\n"
    )


def installed_script(staged: str, path: str) -> str:
    q = shlex.quote
    return (
        "set -eu\n"
        f"systemctl stop {REVERT_UNIT}.timer 2>/dev/null || true\n"
        f"install -m 644 {q(staged)} {q(path)}\n"
        f"rm -f {q(staged)} {BEFORE}\n"
        "systemctl enable --quiet nftables.service\n"
    )


@operation()
def rules(path: str, content: str, table: str, revert_after: int = 120) -> Generator:
    """See the module's docstring.

    + path: the rules file nftables.service loads at boot (/etc/nftables.conf)
    + content: the rendered rules (roles/firewall.py: ruleset_text)
    + table: the table they define and replace
    + revert_after: seconds before an unconfirmed change is reverted
    """
    live = host.get_fact(FirewallState, path=path, table=table)
    if live["sha1"] == hashlib.sha1(content.encode()).hexdigest() and live["loaded"]:
        host.noop(f"{path} is as rendered and loaded")
        return
    staged = f"{CHECK_DIR}/firewall.nft"
    yield StringCommand("mkdir", "-p", CHECK_DIR)
    yield FileUploadCommand(io.StringIO(content), staged, remote_temp_filename=None)
    yield StringCommand("nft", "-c", "-f", staged)
    yield StringCommand("bash", "-c", shlex.quote(arm_revert_script(path, table, revert_after)))
    yield StringCommand("nft", "-f", staged)
    yield FunctionCommand(confirmed, (revert_after,), {})
    yield StringCommand("bash", "-c", shlex.quote(installed_script(staged, path)))


def confirmed(state, host, revert_after: int) -> bool:  # noqa: ANN001 - pyinfra's FunctionCommand signature
    """A new SSH connection through the new rules; refused: wait for the revert, fail."""
    host.disconnect()
    if _answers(host):
        logger.info(f"{host.name}: a new SSH session passes the new rules")
        return True
    logger.error(
        f"{host.name}: a new SSH session was refused under the new rules; reverted in {revert_after} s"
    )
    sleep(revert_after + 10)
    for _ in range(12):
        if _answers(host):
            raise OperationError(
                f"{host.name}: the new firewall rules refused a new SSH session; the previous rules are back"
            )
        sleep(5)
    raise OperationError(f"{host.name}: refused new SSH sessions and did not answer after the revert")


def _answers(host) -> bool:  # noqa: ANN001
    try:
        host.connect(show_errors=False)
        return bool(host.connected) and host.get_fact(Command, "echo ok") == "ok"
    except Exception:  # noqa: BLE001 - a refused or dropped connection
        if host.connected:
            host.disconnect()
        return False
