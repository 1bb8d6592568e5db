"""The host's apt-cacher-ng on 127.0.0.1: the guests' only way out (and the image build's mirror).

There is no systemd on the lab host, so the lab runs its own daemon with its own config
directory, cache and logs under /var/cache/dbzfs-lab/acng (the system's /etc/apt-cacher-ng is
not touched). Guests reach it as 10.0.2.100:PORT through a qemu guestfwd (one socat per
connection); the image build uses it as an http proxy.
"""

import os
import shutil
import socket
import subprocess
import time

from .definition import CACHE, ZFS_REPO, ZFS_REPO_URL
from .vm import Log

ACNG = CACHE / "acng"
CONF = ACNG / "conf"
PIDFILE = ACNG / "apt-cacher-ng.pid"

BACKENDS_DEBIAN = "http://deb.debian.org/debian/\n"
# The security archive by all its names, fetched from deb.debian.org.
REMAP_SECDEB = (
    "security.debian.org security.debian.org/debian-security deb.debian.org/debian-security /debian-security"
    " cdn-fastly.deb.debian.org/debian-security ; deb.debian.org/debian-security"
)


# The lab's ZFS module repository (lab/module_repo.py): a local directory the daemon serves at
# /ZFS_REPO_NAME/, and a repository name remapped to it, so that the guests' apt, which sends every
# request through this proxy, can fetch it as ZFS_REPO_URL.
ZFS_REPO_NAME = "dbzfs-zfs-modules"
# The daemon keeps what it fetched through a Remap-NAME under CacheDir/NAME: the repository's
# indexes as the guests fetched them, which it serves again without asking the directory.
ZFS_REPO_REMAP = ZFS_REPO_NAME.replace("-", "")
ZFS_REPO_CACHES = (ACNG / "cache" / ZFS_REPO_NAME, ACNG / "cache" / ZFS_REPO_REMAP)


def _config(port: int) -> str:
    return f"""# Written by lab/aptcache.py: the lab's own apt-cacher-ng.
CacheDir: {ACNG}/cache
LogDir: {ACNG}/log
SupportDir: /usr/lib/apt-cacher-ng
Port: {port}
BindAddress: 127.0.0.1
PidFile: {PIDFILE}
Foreground: 0
Remap-debrep: file:deb_mirror*.gz /debian ; file:backends_debian # Debian Archives
Remap-secdeb: {REMAP_SECDEB}
LocalDirs: {ZFS_REPO_NAME} {ZFS_REPO}
Remap-{ZFS_REPO_REMAP}: {ZFS_REPO_URL.split("//", 1)[1].rstrip("/")} ; http://127.0.0.1:{port}/{ZFS_REPO_NAME}/
ReportPage: acng-report.html
ExThreshold: 4
FollowIndexFileRemoval: 1
# Only the remapped Debian archives above: refuse to proxy anything else (and no CONNECT).
PassThroughPattern: ^$
ForceManaged: 1
"""


def answers(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def ensure(port: int = 3142, log: Log = print) -> None:
    """Start the daemon on 127.0.0.1:port unless something already answers there (ours is
    restarted when its configuration changed)."""
    if answers(port):
        if pid() is None or (CONF / "acng.conf").read_text() == _config(port):
            return
        log("==> apt cache: restarting apt-cacher-ng (its configuration changed)")
        stop()
    exe = shutil.which("apt-cacher-ng") or "/usr/sbin/apt-cacher-ng"
    if not os.path.exists(exe):
        raise RuntimeError("apt-cacher-ng is not installed (run scripts/bootstrap)")
    for d in (CONF, ACNG / "cache", ACNG / "log"):
        d.mkdir(parents=True, exist_ok=True)
    (CONF / "acng.conf").write_text(_config(port))
    (CONF / "backends_debian").write_text(BACKENDS_DEBIAN)
    log(f"==> apt cache: starting apt-cacher-ng on 127.0.0.1:{port} (logs: {ACNG}/log)")
    subprocess.run(
        [exe, "-c", str(CONF)],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if answers(port):
            return
        time.sleep(0.2)
    raise RuntimeError(f"apt-cacher-ng did not answer on 127.0.0.1:{port} (see {ACNG}/log)")


def pid() -> int | None:
    try:
        p = int(PIDFILE.read_text().strip())
        os.kill(p, 0)
        return p
    except (OSError, ValueError):
        return None


def stop() -> None:
    """Stop the daemon this module started (by its pidfile); no-op otherwise."""
    p = pid()
    if p:
        os.kill(p, 15)
        for _ in range(50):
            if pid() is None:
                break
            time.sleep(0.1)
