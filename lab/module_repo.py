"""The lab's ZFS module repository: the zfs image's module package and ZFS userland
(lab/image.py, zfs-debs/) published with zfsrepo, signed with the lab's own key, beside the
other releases' where their zfs images are built (a release upgrade finds the new kernel's
module there), and served to the guests by the lab's apt-cacher-ng as
http://dbzfs-zfs-modules.lab/ (a LocalDirs directory remapped to a repository name: the guests'
apt reaches it through their usual proxy and nothing else leaves the host).

The repository is republished only when the image's packages change; the key is made once per
machine (/var/cache/dbzfs-lab/zfs-repo-gnupg) and its public part is what the lab's inventory
hands to the deploy (zfs_module_repository.key_file).
"""

import dataclasses
import hashlib
import shutil
from pathlib import Path

from model import releases
from zfsrepo import publish

from . import aptcache, image
from .definition import CACHE, ZFS_REPO, Lab
from .vm import LabError, Log

GNUPG = CACHE / "zfs-repo-gnupg"
KEY_UID = "dbzfs lab ZFS module repository <lab@dbzfs-zfs-modules.lab>"
STAMP = ".published-from"


def other_suites(lab: Lab) -> dict[str, list[Path]]:
    """The other releases' module packages, from their zfs images where this machine built them
    (a lab on one release boots them, the upgrade moves a host to the next): suite -> packages."""
    found = {}
    for r in releases.RELEASES.values():
        if r.codename == lab.image["suite"]:
            continue
        other = dataclasses.replace(lab, image={**lab.image, "suite": r.codename})
        debs = image.repository_debs(other) if image.is_built(other, "zfs") else []
        if debs:
            found[r.codename] = debs
    return found


def _fingerprint_of_debs(lab: Lab) -> str:
    h = hashlib.sha256()
    # the same repository whichever release's lab publishes it: no republishing back and forth
    for suite, debs in sorted({lab.image["suite"]: image.repository_debs(lab), **other_suites(lab)}.items()):
        for deb in debs:
            h.update(f"{suite} {deb.name} {deb.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


def check_kernels(lab: Lab) -> None:
    """The bare image must boot the kernel the zfs image built the module for."""
    built_for, boots = image.manifest(lab, "zfs")["kernel"], image.manifest(lab, "bare")["kernel"]
    if built_for != boots:
        raise LabError(
            f"the bare image boots Linux {boots}, the lab's ZFS module package is built for {built_for} "
            f"(both images are built from Debian's archive at different times). Rebuild both: "
            f"rm -rf {image.path(lab, 'zfs')} {image.path(lab, 'bare')}"
        )


def stale_cache(published: Path, caches: tuple[Path, ...]) -> bool:
    """Whether apt-cacher-ng holds an index of the repository that is not the published one (it
    would serve it to the guests instead): a suite's InRelease in a cache that differs from the
    repository's, or a suite the repository no longer has."""
    for cache in caches:
        for cached in sorted((cache / "dists").glob("*/InRelease")):
            mine = published / "dists" / cached.parent.name / "InRelease"
            if not mine.exists() or mine.read_bytes() != cached.read_bytes():
                return True
    return False


def ensure(lab: Lab, log: Log = print) -> None:
    debs = image.repository_debs(lab)
    if not debs:
        raise LabError(f"the zfs image {image.path(lab, 'zfs')} has no {image.REPO_DEBS}/ packages")
    check_kernels(lab)
    stamp = _fingerprint_of_debs(lab)
    if (ZFS_REPO / STAMP).exists() and (ZFS_REPO / STAMP).read_text() == stamp:
        if stale_cache(ZFS_REPO, aptcache.ZFS_REPO_CACHES):
            log("==> zfs module repository: apt-cacher-ng's copy of its indexes is stale: removed")
            for cache in aptcache.ZFS_REPO_CACHES:
                shutil.rmtree(cache, ignore_errors=True)
        return
    others = other_suites(lab)
    suites = ", ".join([lab.image["suite"], *others])
    log(f"==> zfs module repository: publishing {len(debs)} packages to {ZFS_REPO} ({suites})")
    key = publish.ensure_key(GNUPG, KEY_UID)
    publish.publish(debs, ZFS_REPO, lab.image["suite"], GNUPG, key, others=others)
    (ZFS_REPO / STAMP).write_text(stamp)
    # The cache's copy of an older repository must not be served for the new one (it was kept
    # under the remapped name, where CI at de59272 got an older image's trixie index).
    for cache in aptcache.ZFS_REPO_CACHES:
        shutil.rmtree(cache, ignore_errors=True)
