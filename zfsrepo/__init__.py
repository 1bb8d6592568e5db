"""ZFS built once per kernel and served as an apt repository: no compiler on database hosts.

package.py   the module package (zfs-modules-<kernel>) from a root where DKMS built ZFS, and the
             ZFS userland packages that root installed, so that module and tools match
publish.py   a signed apt repository (Packages, Release, InRelease) from those packages
__main__.py  `./dbzfs zfs-repo`: build both for a Debian release and kernel on this machine
"""
