"""The lab's ZFS module repository: the zfs image's module package and ZFS userland
(lab/image.py, zfs-debs/) published with zfsrepo, signed with the lab's own key, and served to
the guests by the lab's apt-cacher-ng as http://dbzfs-zfs-modules.lab/ (a LocalDirs directory
remapped to a repository name: the guests' apt reaches it through their usual proxy and nothing
else leaves the host).

The repository is republished only when the image's packages change; the key is made once per
machine (/var/cache/dbzfs-lab/zfs-repo-gnupg) and its public part is what the lab's inventory
hands to the deploy (zfs_module_repository.key_file).
"""

import hashlib
import shutil

from zfsrepo import publish

from . import aptcache, image
from .definition import CACHE, ZFS_REPO, Lab
from .vm import LabError, Log

GNUPG = CACHE / "zfs-repo-gnupg"
KEY_UID = "dbzfs lab ZFS module repository <lab@dbzfs-zfs-modules.lab>"
STAMP = ".published-from"


def _fingerprint_of_debs(lab: Lab) -> str:
    h = hashlib.sha256()
    for deb in image.repository_debs(lab):
        h.update(f"{deb.name} {deb.stat().st_size}\n".encode())
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


def ensure(lab: Lab, log: Log = print) -> None:
    debs = image.repository_debs(lab)
    if not debs:
        raise LabError(f"the zfs image {image.path(lab, 'zfs')} has no {image.REPO_DEBS}/ packages")
    check_kernels(lab)
    stamp = _fingerprint_of_debs(lab)
    if (ZFS_REPO / STAMP).exists() and (ZFS_REPO / STAMP).read_text() == stamp:
        return
    log(f"==> zfs module repository: publishing {len(debs)} packages to {ZFS_REPO}")
    key = publish.ensure_key(GNUPG, KEY_UID)
    publish.publish(debs, ZFS_REPO, lab.image["suite"], GNUPG, key)
    (ZFS_REPO / STAMP).write_text(stamp)
    # The cache's copy of an older repository must not be served for the new one.
    shutil.rmtree(aptcache.ACNG / "cache" / aptcache.ZFS_REPO_NAME, ignore_errors=True)
