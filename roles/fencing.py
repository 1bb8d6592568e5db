"""Fencing: a server never starts as a primary while another member of its replication group
takes writes. A systemd drop-in runs the fence check (templates/fence-check.sh.j2) before the
server starts, whatever starts it, so the old primary that comes back after a failover stays
down (PostgreSQL: it has no standby.signal; MariaDB: its role file sets read_only OFF) until it
is re-seeded as a replica. The check asks each peer over the replication network with the
replication account, which exists for every member on every server of the group.
"""

from __future__ import annotations

from pyinfra.api import HiddenValue

from model import secrets
from model.hostdata import HostConfig
from operations import common
from operations.mariadb import option_value
from roles import engine, render


def dropin_path(unit: str) -> str:
    return f"/etc/systemd/system/{unit}.d/dbzfs-fence.conf"


def mariadb_client_text(password: str) -> str:
    """The [client] options of the replication account (the fence asks peers with it)."""
    user = render.REPLICATION_USER["mariadb"]
    return f"[client]\nuser = {user}\npassword = {option_value(password)}\n"


def place(cfg: HostConfig, group: engine.Group, unit: str) -> None:
    """The fence check and its drop-in for `unit` (systemd re-reads units in the role's own step)."""
    if cfg.engine == "mariadb":
        common.secret_file(
            name=f"{render.MARIADB_PEERS_CLIENT} (replication account, 0600)",
            path=render.MARIADB_PEERS_CLIENT,
            content=HiddenValue(mariadb_client_text(engine.secret(secrets.REPLICATION_PASSWORD).unmask())),
            user="root",
            group="root",
            mode="600",
        )
    engine.config_file(
        "fence-check.sh.j2",
        render.fence_context(cfg, group.members),
        render.FENCE_CHECK,
        mode="755",
        name=f"{render.FENCE_CHECK} (never start as a second primary)",
    )
    engine.text_file(render.fence_dropin(), dropin_path(unit), name=f"{unit}: fence check before start")
