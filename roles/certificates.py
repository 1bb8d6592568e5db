"""The TLS material on a host (key `tls`; what the engines make of it: roles/tls.py): its key,
its certificate signed by the fleet CA on this machine, and the CA's certificate."""

from __future__ import annotations

from operations import common, tls as tls_ops
from pki import ca as pki
from roles import engine, tls


def material() -> None:
    """The host's key, certificate and CA certificate in tls.TLS_DIR, when its data says tls."""
    cfg = engine.host_config()
    if not cfg.tls_spec.enabled or not cfg.engine:
        return
    engine.packages("openssl", ["openssl"])
    user = tls.service_user(cfg)
    names, addresses = tls.names(cfg)
    tls_ops.private_key(name=f"TLS: the host's key ({tls.KEY})", path=tls.KEY, user=user, group=user)
    tls_ops.certificate(
        name=f"TLS: the host's certificate for {', '.join([*names, *addresses])}",
        path=tls.CERTIFICATE,
        key=tls.KEY,
        names=names,
        addresses=addresses,
        days=cfg.tls_spec.certificate_days,
        renew_days=cfg.tls_spec.renew_days,
    )
    common.config_file(name="TLS: the fleet CA's certificate", path=tls.CA, content=pki.ensure().pem())
