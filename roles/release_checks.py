"""The rules over a host's release data (model/keys.py: debian_release, postgresql_version; the
host side, what the host really runs, is roles/release.py's). Pure."""

from __future__ import annotations

from model import releases
from model.checking import Context
from model.hostdata import HostConfig


def host(ctx: Context, c: HostConfig) -> None:
    """debian_release is one of the releases; postgresql_version, when set, one the host's release
    may run: its own, or the previous release's that Debian keeps through the release upgrade."""
    if not ctx.choice(c, "debian_release", c.debian_release):
        return
    if c.postgresql_version is None or not ctx.ok(c, "postgresql_version"):
        return
    if not ctx.choice(c, "postgresql_version", c.postgresql_version):
        return
    release = releases.get(c.debian_release)
    if c.engine != "postgresql":
        ctx.add(
            c.name,
            "postgresql_version",
            c.postgresql_version,
            f"set on a host whose engine is {c.engine!r}, not PostgreSQL",
            "remove it",
        )
        return
    allowed = releases.server_versions(c.debian_release, "postgresql")
    if c.postgresql_version not in allowed:
        ctx.add(
            c.name,
            "postgresql_version",
            c.postgresql_version,
            f"{release.label} runs PostgreSQL {' or '.join(allowed)} only",
            f"leave it out (PostgreSQL {release.postgresql}), or set debian_release to the release "
            "the host runs",
        )
