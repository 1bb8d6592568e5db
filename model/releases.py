"""The Debian releases the toolkit converges, and what differs between them. Pure: constants.

A host's release is its data key `debian_release` ("13" by default): validation reads the
engine's server version from it before any host is touched (the settings each server accepts
differ between versions), and the deploy compares it with what the host reports and refuses a
host that runs another release (roles/release.py) before it changes anything.

    Debian 12 "bookworm"  MariaDB 10.11, PostgreSQL 15, OpenZFS from bookworm-backports (contrib)
    Debian 13 "trixie"    MariaDB 11.8,  PostgreSQL 17, OpenZFS from trixie itself (contrib)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    major: str  # debian_release: "12"
    codename: str  # the suite: "bookworm"
    mariadb: str  # the MariaDB server's major version Debian ships: "10.11"
    postgresql: str  # PostgreSQL's: "15"
    zfs_suite: str  # where zfs-dkms comes from: "bookworm-backports", "trixie"
    # prometheus-mysqld-exporter's version: from 0.15 it reads its connection from a my.cnf only
    # (DATA_SOURCE_NAME is gone), and 0.14 wants a password there (roles/monitoring.py)
    mysqld_exporter: str
    support: str  # how long Debian supports it (docs/releases.md)

    @property
    def label(self) -> str:
        return f"Debian {self.major} ({self.codename})"

    @property
    def zfs_source(self) -> str:
        """The apt line the ZFS install adds (contrib: zfs-dkms's license keeps it out of main);
        `main` too for backports, whose zfs packages depend on backports' own main packages."""
        components = "main contrib" if self.zfs_suite.endswith("-backports") else "contrib"
        return f"{self.zfs_suite} {components}"

    def version(self, engine: str) -> str:
        return {"mariadb": self.mariadb, "postgresql": self.postgresql}[engine]


BOOKWORM = Release(
    major="12",
    codename="bookworm",
    mariadb="10.11",
    postgresql="15",
    zfs_suite="bookworm-backports",
    mysqld_exporter="0.14",
    support="regular security support ended on 2026-06-10; LTS until 2028-06-30",
)
TRIXIE = Release(
    major="13",
    codename="trixie",
    mariadb="11.8",
    postgresql="17",
    zfs_suite="trixie",
    mysqld_exporter="0.17",
    support="the stable release since 2025-08-09: security support until about 2028-08, LTS until 2030-06-30",
)
RELEASES: dict[str, Release] = {r.major: r for r in (BOOKWORM, TRIXIE)}
DEFAULT = TRIXIE.major


def previous(release: Release) -> Release | None:
    """The release before this one among those the toolkit converges; None for the oldest."""
    older = [r for r in RELEASES.values() if int(r.major) < int(release.major)]
    return max(older, key=lambda r: int(r.major)) if older else None


def following(release: Release) -> Release | None:
    """The release after this one among those the toolkit converges; None for the newest."""
    newer = [r for r in RELEASES.values() if int(r.major) > int(release.major)]
    return min(newer, key=lambda r: int(r.major)) if newer else None


def server_versions(major: str, engine: str) -> tuple[str, ...]:
    """The server versions a host of this release may run: the release's own, and for PostgreSQL
    also the previous release's, which Debian keeps installed through the release upgrade (its
    cluster runs on until pg_upgradecluster moves it: day2/upgrade.py). MariaDB's server is
    upgraded with the release's packages: only the release's own."""
    release = get(major)
    own = (release.version(engine),)
    before = previous(release)
    if engine == "postgresql" and before is not None:
        return (*own, before.version(engine))
    return own


def shipping(engine: str, version: str) -> Release:
    """The release whose packages are this server version."""
    for release in RELEASES.values():
        if release.version(engine) == version:
            return release
    raise ValueError(f"no supported Debian release ships {engine} {version}")


def get(major: str) -> Release:
    """The release a validated `debian_release` names."""
    try:
        return RELEASES[str(major)]
    except KeyError:
        raise ValueError(f"unsupported Debian release {major!r}: one of {sorted(RELEASES)}") from None


def of_distribution(distribution: dict | None) -> Release | None:
    """The release a pyinfra LinuxDistribution fact reports; None for any other system."""
    name = str((distribution or {}).get("name") or "").lower()
    major = str((distribution or {}).get("major") or "")
    return RELEASES.get(major) if name == "debian" else None


def described(distribution: dict | None) -> str:
    """What a LinuxDistribution fact says the host runs, for messages."""
    d = distribution or {}
    name = d.get("name") or "an unknown system"
    release = d.get("release_meta", {}).get("VERSION") if isinstance(d.get("release_meta"), dict) else None
    return f"{name} {release or d.get('major') or ''}".strip()
