"""A host's TLS key and certificate (roles/tls.py): the key made on the host and never sent
anywhere; the certificate signed on the operator's machine by the fleet CA (pki/ca.py), whose key
never reaches a host.

`private_key`: an EC P-256 key made by the host's openssl when absent, owned by the service user
that reads it, mode 0600. `certificate`: nothing when the host's certificate verifies against the
CA and names what it must for longer than the renewal window (pki.ca.renewal, decided before the
run with the certificate the host holds); else a signing request is made on the host for its own
key, signed here when the operation runs, and the certificate uploaded.
"""

from __future__ import annotations

import io
import shlex
from collections.abc import Generator, Sequence
from pathlib import Path

from pyinfra import host
from pyinfra.api import FunctionCommand, OperationError, StringCommand, operation
from pyinfra.facts.files import File, FileContents

from pki import ca as pki


@operation()
def private_key(path: str, user: str, group: str) -> Generator[StringCommand, None, None]:
    """See the module's docstring."""
    live = host.get_fact(File, path=path)
    q = shlex.quote
    if live:
        if (live["user"], live["group"], live["mode"]) == (user, group, 600):
            host.noop(f"{path}: the host's key, {user}:{group} 0600")
            return
        yield StringCommand(f"chown {q(user)}:{q(group)} {q(path)} && chmod 600 {q(path)}")
        return
    directory = path.rsplit("/", 1)[0]
    yield StringCommand(
        f"install -d -m 755 {q(directory)} && (umask 077 && openssl genpkey -algorithm EC "
        f"-pkeyopt ec_paramgen_curve:P-256 -out {q(path)}.new) && chown {q(user)}:{q(group)} {q(path)}.new "
        f"&& mv -f {q(path)}.new {q(path)}"
    )


@operation()
def certificate(
    path: str,
    key: str,
    names: Sequence[str],
    addresses: Sequence[str],
    days: int,
    renew_days: int,
    ca_dir: str | None = None,
) -> Generator:
    """See the module's docstring.

    + path: the certificate on the host
    + key: the host's private key (operations.tls.private_key)
    + names, addresses: what the certificate names (subjectAltName)
    + days: how long a new certificate is valid (cut to the CA's end)
    + renew_days: issued again when it expires within this many days
    + ca_dir: the CA's directory on this machine (default: DBZFS_CA_DIR)
    """
    ca = pki.ensure(pki.directory() if ca_dir is None else Path(ca_dir))
    lines = host.get_fact(FileContents, path=path)
    why = pki.renewal(ca, "\n".join(lines) + "\n" if lines else None, names, addresses, renew_days)
    if why is None:
        host.noop(f"{path}: signed by the fleet CA, names {', '.join([*names, *addresses])}")
        return
    host.log(f"{path}: issued ({why})")
    q = shlex.quote

    def issue(state, host) -> bool:  # noqa: ANN001 - pyinfra's FunctionCommand signature
        ok, output = host.run_shell_command(
            StringCommand(f"openssl req -new -key {q(key)} -subj {q('/CN=' + names[0])}")
        )
        if not ok:
            raise OperationError(f"{host.name}: no signing request for {key}: {output.stderr}")
        pem = pki.sign(ca, output.stdout + "\n", names, addresses, days)
        if not host.put_file(io.StringIO(pem), f"{path}.new"):
            raise OperationError(f"{host.name}: could not upload {path}")
        return True

    yield FunctionCommand(issue, (), {})
    yield StringCommand(f"chmod 644 {q(path)}.new && mv -f {q(path)}.new {q(path)}")
