"""The security keys: the host firewall and TLS (their sections of model/keys.py, which holds the
one table of all keys). Pure."""

from __future__ import annotations

from model.key import BOOLEAN, INTEGER, LIST, Key, section as _in

DEFINITIONS = (
    *_in(
        "firewall",
        "roles.firewall",
        Key(
            "firewall",
            BOOLEAN,
            False,
            "True",
            "an nftables firewall on the host: inbound denied but for what the fleet needs",
            attr="firewall_spec.enabled",
            notes="Not yet applied by deploy.py (issue 48 in progress: the rules, their checks and the "
            "guarded apply are built and unit-tested, not yet run on the lab). What each host accepts, "
            "and from where, is derived from the inventory (roles/firewall.py: `allowed`).",
        ),
        Key(
            "firewall_admin_networks",
            LIST,
            [],
            '["192.0.2.0/24"]',
            "networks SSH (and a Prometheus host's web port) is reached from (CIDR)",
            required="with firewall on: the converge's own SSH session must come from one of them",
            attr="firewall_spec.admin_networks",
        ),
    ),
    *_in(
        "tls",
        "roles.tls",
        Key(
            "tls",
            BOOLEAN,
            False,
            "True",
            "TLS on the database's network connections: clients, replication, seeding and restores",
            notes="Not yet applied by deploy.py (issue 48 in progress). A replication group must agree "
            "on it. The host's key is made on the host; its certificate is signed by the fleet CA on the "
            "operator's machine (pki/ca.py, DBZFS_CA_DIR).",
            attr="tls_spec.enabled",
        ),
        Key(
            "tls_certificate_days",
            INTEGER,
            397,
            "397",
            "how long a host certificate is valid (cut to the CA's own end)",
            attr="tls_spec.certificate_days",
            owner="roles.certificates",
        ),
        Key(
            "tls_renew_days",
            INTEGER,
            30,
            "30",
            "a converge issues the host's certificate again when it expires within this many days",
            attr="tls_spec.renew_days",
            owner="roles.certificates",
        ),
    ),
)
