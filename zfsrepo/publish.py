"""A signed apt repository from .deb files, laid out as apt expects:

  OUT/pool/main/*.deb
  OUT/dists/SUITE/main/binary-ARCH/Packages, Packages.gz
  OUT/dists/SUITE/Release, InRelease (clearsigned), Release.gpg (detached)
  OUT/KEY_FILE  the signing key's public part (armored): what the hosts' apt verifies with

Any static web server can serve OUT (nginx, Apache; the lab uses apt-cacher-ng's LocalDirs).
The signing key belongs to the operator: a GnuPG home and a key id, never a passphrase on a
command line (use a key without one on the build machine, or a running gpg-agent).
"""

from __future__ import annotations

import email.utils
import gzip
import hashlib
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

COMPONENT = "main"
KEY_FILE = "dbzfs-zfs-modules.asc"


class PublishError(RuntimeError):
    pass


def release_text(suite: str, arch: str, indexes: dict[str, bytes], date: str) -> str:
    """The Release file for one component and architecture; `indexes`: path under dists/SUITE
    -> content."""
    lines = [
        "Origin: dbzfs",
        "Label: dbzfs ZFS modules",
        f"Suite: {suite}",
        f"Codename: {suite}",
        f"Date: {date}",
        f"Architectures: {arch}",
        f"Components: {COMPONENT}",
        "Description: OpenZFS kernel modules built once per kernel, and the matching ZFS userland",
    ]
    for field, algo in (("MD5Sum", hashlib.md5), ("SHA256", hashlib.sha256)):
        lines.append(f"{field}:")
        for name, data in sorted(indexes.items()):
            lines.append(f" {algo(data).hexdigest()} {len(data):>16} {name}")
    return "\n".join(lines) + "\n"


def _gpg(home: Path, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--yes", *args], capture_output=True, text=True
    )
    if r.returncode != 0:
        raise PublishError(f"gpg {' '.join(args)} failed: {r.stderr.strip()}")
    return r


def stop_agent(home: Path) -> None:
    """gpg starts an agent for the home; leave no process behind."""
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True)


def ensure_key(home: Path, uid: str) -> str:
    """The fingerprint of the signing key in `home`, made (ed25519, no passphrase, signing only)
    when the home has none. For a lab or a build machine whose key the operator keeps there."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    home.chmod(0o700)
    try:
        fpr = fingerprint(home)
        if not fpr:
            _gpg(home, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
            fpr = fingerprint(home)
        return fpr
    finally:
        stop_agent(home)


def fingerprint(home: Path, key: str | None = None) -> str:
    r = subprocess.run(
        [
            "gpg",
            "--homedir",
            str(home),
            "--batch",
            "--with-colons",
            "--list-secret-keys",
            *([key] if key else []),
        ],
        capture_output=True,
        text=True,
    )
    fprs = [line.split(":")[9] for line in r.stdout.splitlines() if line.startswith("fpr:")]
    return fprs[0] if fprs else ""


def publish(
    debs: list[Path],
    out: Path,
    suite: str,
    gnupg_home: Path,
    key: str,
    arch: str = "amd64",
    others: Mapping[str, list[Path]] | None = None,
) -> Path:
    """Write the repository to `out` (replacing what was there) and return its public key file.
    `others`: more suites (suite -> its packages) published beside `suite`, each with its own
    index, all in one pool (a host moved from one release to the next finds its new kernel's
    module under the new release's suite)."""
    suites = {suite: debs, **(others or {})}
    if not all(suites.values()):
        raise PublishError("no packages to publish")
    if out.exists() and any(out.iterdir()) and not (out / KEY_FILE).exists():
        raise PublishError(
            f"refusing to replace {out}: it is not a repository zfs-repo wrote (no {KEY_FILE}); "
            "give a new or empty directory"
        )
    if not fingerprint(gnupg_home, key):
        raise PublishError(f"no secret key {key!r} in the GnuPG home {gnupg_home}")
    tmp = out.with_name(out.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for name, packages in suites.items():
            _suite(tmp, name, packages, arch, gnupg_home, key)
        public = _gpg(gnupg_home, "--armor", "--export", key).stdout
    finally:
        stop_agent(gnupg_home)
    (tmp / KEY_FILE).write_text(public)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out / KEY_FILE


def _suite(tmp: Path, suite: str, debs: list[Path], arch: str, gnupg_home: Path, key: str) -> None:
    """One suite's packages into the pool, its index, its Release signed (InRelease, Release.gpg)."""
    pool = tmp / "pool" / COMPONENT / suite
    pool.mkdir(parents=True)
    for deb in debs:
        shutil.copy2(deb, pool / deb.name)
    scan = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", f"pool/{COMPONENT}/{suite}", "/dev/null"],
        cwd=tmp,
        capture_output=True,
    )
    if scan.returncode != 0 or not scan.stdout:
        raise PublishError(f"dpkg-scanpackages failed: {scan.stderr.decode(errors='replace').strip()}")
    rel = f"{COMPONENT}/binary-{arch}"
    dists = tmp / "dists" / suite
    (dists / rel).mkdir(parents=True)
    indexes = {f"{rel}/Packages": scan.stdout, f"{rel}/Packages.gz": gzip.compress(scan.stdout, mtime=0)}
    for name, data in indexes.items():
        (dists / name).write_bytes(data)
    release = dists / "Release"
    release.write_text(release_text(suite, arch, indexes, email.utils.formatdate(usegmt=True)))
    _gpg(gnupg_home, "--local-user", key, "--clearsign", "--output", str(dists / "InRelease"), str(release))
    _gpg(
        gnupg_home,
        "--local-user",
        key,
        "--armor",
        "--detach-sign",
        "--output",
        str(dists / "Release.gpg"),
        str(release),
    )
