"""`./dbzfs zfs-repo`: build the ZFS module repository for a Debian release and kernel.

The module is built the way the lab image is (lab/image.py): a debootstrap chroot at native speed
with the kernel's headers and zfs-dkms from backports, DKMS building for that kernel; then the
module package and the matching ZFS userland are published as a signed apt repository in --out.
Serve that directory with any web server and point the hosts at it (docs/zfs-prebuilt.md, "ZFS without a
compiler").
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from pathlib import Path

from lab import image
from lab.definition import LabDefinitionError, load

from . import publish


def kernel_release(text: str) -> str:
    """--kernel's value, as it goes into package names (linux-image-RELEASE): refused if it cannot."""
    if not re.fullmatch(r"[0-9][a-z0-9.+~-]*", text):
        raise argparse.ArgumentTypeError(f"not a kernel release as `uname -r` prints it: {text!r}")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="./dbzfs zfs-repo",
        description=__doc__.split("\n\n")[0],
        epilog="exit status: 0 done, 1 failed, 2 refused or misused (nothing was built)",
    )
    ap.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="directory to write the repository to (replaced)",
    )
    ap.add_argument(
        "--kernel",
        metavar="RELEASE",
        type=kernel_release,
        help="the kernel release to build for, as `uname -r` prints it on the hosts (e.g. 6.1.0-41-amd64); "
        "default: the newest kernel of the release's linux-image-amd64",
    )
    ap.add_argument(
        "--gnupg-home",
        type=Path,
        metavar="DIR",
        default=Path(os.environ.get("GNUPGHOME", Path.home() / ".gnupg")),
        help="GnuPG home holding the signing key (default: $GNUPGHOME or ~/.gnupg)",
    )
    ap.add_argument(
        "--key",
        metavar="ID",
        help="the signing key's id or fingerprint (default: the home's only secret key)",
    )
    args = ap.parse_args(argv)

    try:
        lab = load()
    except LabDefinitionError as e:
        print(f"zfs-repo: refused (nothing was built): {e}", file=sys.stderr)
        return 2
    if args.kernel:
        lab = dataclasses.replace(
            lab,
            image={
                **lab.image,
                "kernel_packages": [f"linux-image-{args.kernel}"],
                "header_packages": [f"linux-headers-{args.kernel}"],
            },
        )
    try:
        key = publish.fingerprint(args.gnupg_home, args.key)
    except OSError as e:  # no gpg
        print(f"zfs-repo: cannot run gpg ({e}); nothing was built", file=sys.stderr)
        return 1
    if not key:
        print(
            f"zfs-repo: no secret key {args.key or ''} in {args.gnupg_home}. Make one with\n"
            f"  mkdir -p -m 700 {args.gnupg_home}\n"
            f"  gpg --homedir {args.gnupg_home} --quick-gen-key 'ZFS modules <ops@example.net>' "
            "ed25519 sign never",
            file=sys.stderr,
        )
        return 2
    try:
        built = image.ensure(lab, "zfs")
        key_file = publish.publish(
            image.repository_debs(lab), args.out, lab.image["suite"], args.gnupg_home, key
        )
    except (image.ImageBuildError, publish.PublishError) as e:
        print(f"zfs-repo: {e}", file=sys.stderr)
        return 1
    kernel, zfs = image.manifest(lab, "zfs")["kernel"], image.manifest(lab, "zfs")["zfs"]
    print(f"==> zfs-repo: ZFS {zfs} for Linux {kernel} ({lab.image['suite']}), built in {built}")
    for deb in sorted((args.out / "pool" / publish.COMPONENT).glob("*.deb")):
        print(f"    {deb.name} ({deb.stat().st_size // 1024} KiB)")
    print(
        f"==> repository: {args.out} (signed by {key}; public key {key_file})\n"
        "    Serve the directory over http(s), then in the hosts' data:\n"
        '      zfs_install = "prebuilt"\n'
        '      zfs_module_repository = {"url": "http://YOUR-SERVER/PATH/", '
        f'"suite": "{lab.image["suite"]}", '
        f'"key_file": "{key_file}"}}'
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
