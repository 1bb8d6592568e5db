"""TLS on the database's network connections (issue 48; key `tls`): each host's key and
certificate, and what each engine's configuration says with them.

The material, in TLS_DIR on the host: the host's key (made there by its openssl, owned by the
server's user, 0600), its certificate (signed by the fleet CA on the operator's machine:
operations/tls.py, pki/ca.py), and the CA's certificate, against which peers are verified.

What each engine is given (pure functions, read by roles/render.py and the replication
operations once wired):
- PostgreSQL: `ssl = on` with the three files (`postgresql_settings`); `hostssl`, never `host`,
  for every network line of pg_hba; `sslmode=verify-full` and the CA in every primary_conninfo
  (`conninfo_options`): a standby checks that its primary's certificate names the address it
  connects to.
- MariaDB: ssl_cert, ssl_key, ssl_ca (`mariadb_settings`); the replication and application
  accounts `REQUIRE SSL`; replicas `MASTER_SSL=1`, `MASTER_SSL_CA` and
  `MASTER_SSL_VERIFY_SERVER_CERT=1` (`master_ssl`).
"""

from __future__ import annotations

from collections.abc import Sequence

import engines
from model.hostdata import HostConfig

TLS_DIR = "/etc/dbzfs/tls"
KEY = f"{TLS_DIR}/host.key"
CERTIFICATE = f"{TLS_DIR}/host.crt"
CA = f"{TLS_DIR}/ca.crt"


def names(cfg: HostConfig) -> tuple[list[str], list[str]]:
    """What the host's certificate names: its inventory name, and its replication address."""
    return [cfg.name], [cfg.replication_address] if cfg.replication_address else []


def postgresql_settings(cfg: HostConfig) -> dict[str, str]:
    if not cfg.tls_spec.enabled:
        return {}
    return {"ssl": "on", "ssl_cert_file": CERTIFICATE, "ssl_key_file": KEY, "ssl_ca_file": CA}


def hba_connection_type(cfg: HostConfig) -> str:
    """pg_hba's connection type for every network line."""
    return "hostssl" if cfg.tls_spec.enabled else "host"


def conninfo_options(cfg: HostConfig) -> str:
    """What a standby's primary_conninfo adds (empty without TLS)."""
    return f" sslmode=verify-full sslrootcert={CA}" if cfg.tls_spec.enabled else ""


def mariadb_settings(cfg: HostConfig) -> dict[str, str]:
    if not cfg.tls_spec.enabled:
        return {}
    return {"ssl_cert": CERTIFICATE, "ssl_key": KEY, "ssl_ca": CA}


def require(cfg: HostConfig) -> str:
    """What a MariaDB account's CREATE/ALTER USER adds (empty without TLS)."""
    return " REQUIRE SSL" if cfg.tls_spec.enabled else ""


def master_ssl(cfg: HostConfig) -> str:
    """What a replica's CHANGE MASTER adds (empty without TLS)."""
    if not cfg.tls_spec.enabled:
        return ""
    return f", MASTER_SSL=1, MASTER_SSL_CA='{CA}', MASTER_SSL_VERIFY_SERVER_CERT=1"


def group_problems(members: Sequence[HostConfig]) -> list[tuple[HostConfig, str]]:
    """Members of one replication group that disagree with its primary on `tls`. Pure."""
    primary = next((m for m in members if m.role == "primary"), None)
    if primary is None:
        return []
    return [
        (m, f"its primary {primary.name} has tls {primary.tls_spec.enabled}")
        for m in members
        if m is not primary and m.tls_spec.enabled != primary.tls_spec.enabled
    ]


def service_user(cfg: HostConfig) -> str:
    return engines.ENGINES[cfg.engine].service_user.user
