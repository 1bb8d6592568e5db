"""The fleet's certificate authority, on the operator's machine (issue 48): it signs each host's
certificate for TLS on the database and replication connections. Debian's openssl does the work.

    DBZFS_CA_DIR   the CA's directory (default ~/.config/dbzfs/ca): ca.key (0600) and ca.crt;
                   outside the repository, like the secrets; created on first use, or the
                   operator's own CA put there (its certificate and key, RSA or EC)

The CA's key never leaves this directory: a host sends a certificate signing request for a key
it made itself (roles/tls.py), and gets back the certificate signed here. A host certificate
names the host's inventory name and its addresses (subjectAltName), is for both server and client
authentication (replicas present it to their primary), and never outlives the CA: its days are
cut to the CA's remaining ones. `renewal` says why a certificate must be issued again (expiring
within the renewal window, other names or addresses, another CA), or None.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DIR_ENV = "DBZFS_CA_DIR"
DEFAULT_DIR = "~/.config/dbzfs/ca"
CA_DAYS = 3650
CA_SUBJECT = "/CN=dbzfs fleet CA"


class CAError(Exception):
    pass


@dataclass(frozen=True)
class CA:
    directory: Path

    @property
    def key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def certificate(self) -> Path:
        return self.directory / "ca.crt"

    def pem(self) -> str:
        return self.certificate.read_text()


def _openssl(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["openssl", *args], input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        raise CAError(f"openssl {args[0]}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def directory(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(os.path.expanduser(environ.get(DIR_ENV) or DEFAULT_DIR))


def ensure(path: Path | None = None) -> CA:
    """The CA in `path` (default: DBZFS_CA_DIR), created when it holds none. Refused inside the
    repository, or with a key others can read."""
    path = (path or directory()).expanduser()
    real = path.resolve()
    if real == REPO_ROOT or REPO_ROOT in real.parents:
        raise CAError(f"the CA's directory {path} is inside the repository; keep it outside ({DEFAULT_DIR})")
    ca = CA(path)
    if ca.key.exists() != ca.certificate.exists():
        raise CAError(f"{path} holds one of ca.key and ca.crt without the other: put both, or neither")
    if not ca.key.exists():
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path, 0o700)
        old = os.umask(0o077)
        try:
            _openssl(
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", str(ca.key), "-out", str(ca.certificate), "-days", str(CA_DAYS),
                "-subj", CA_SUBJECT, "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            )  # fmt: skip
        finally:
            os.umask(old)
    if ca.key.stat().st_mode & 0o077:
        raise CAError(f"{ca.key} is readable by others than its owner: chmod 600 {ca.key}")
    return ca


def subject_alt_names(names: Sequence[str], addresses: Sequence[str]) -> str:
    """openssl's subjectAltName value: DNS names, then IP addresses. Pure."""
    entries = [f"DNS:{n}" for n in names] + [f"IP:{ipaddress.ip_address(a)}" for a in addresses]
    return ",".join(entries)


def not_after(pem: str) -> datetime:
    out = _openssl("x509", "-noout", "-enddate", stdin=pem).strip()  # notAfter=Mar  4 12:00:00 2036 GMT
    return datetime.strptime(out.split("=", 1)[1], "%b %d %H:%M:%S %Y %Z").replace(tzinfo=UTC)


def sign(ca: CA, csr: str, names: Sequence[str], addresses: Sequence[str], days: int) -> str:
    """The host's certificate for the key of `csr` (PEM), naming `names` and `addresses`, valid
    `days` at most and never past the CA's own end."""
    left = (not_after(ca.pem()) - datetime.now(UTC)).days - 1
    if left < 1:
        raise CAError(f"the CA {ca.certificate} expires within a day: renew the CA first")
    extensions = (
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        f"subjectAltName={subject_alt_names(names, addresses)}\n"
    )
    with tempfile.TemporaryDirectory(prefix="dbzfs-ca-") as tmp:
        ext = Path(tmp) / "ext.cnf"
        ext.write_text(extensions)
        request = Path(tmp) / "host.csr"
        request.write_text(csr)
        return _openssl(
            "x509", "-req", "-in", str(request), "-CA", str(ca.certificate), "-CAkey", str(ca.key),
            "-set_serial", f"0x{secrets.token_hex(16)}", "-days", str(min(days, left)), "-sha256",
            "-extfile", str(ext), "-subj", f"/CN={names[0]}",
        )  # fmt: skip


def verify(ca: CA, pem: str) -> bool:
    """`openssl verify` of a certificate against the CA."""
    with tempfile.NamedTemporaryFile("w", suffix=".crt") as f:
        f.write(pem)
        f.flush()
        done = subprocess.run(
            ["openssl", "verify", "-CAfile", str(ca.certificate), f.name], capture_output=True
        )
        return done.returncode == 0


def renewal(
    ca: CA, pem: str | None, names: Sequence[str], addresses: Sequence[str], renew_days: int
) -> str | None:
    """Why the certificate must be issued again, or None when it may stay."""
    if not pem:
        return "none yet"
    if not verify(ca, pem):
        return "not signed by this CA"
    text = _openssl("x509", "-noout", "-ext", "subjectAltName", stdin=pem)
    wanted = subject_alt_names(names, addresses).replace("IP:", "IP Address:").split(",")
    have = [e.strip() for e in text.splitlines()[-1].split(",")] if "Alternative" in text else []
    if sorted(have) != sorted(wanted):
        return f"names {have} where the inventory says {wanted}"
    left = not_after(pem) - datetime.now(UTC)
    if left.days < renew_days:
        return f"expires in {left.days} days (renewed within {renew_days})"
    return None
