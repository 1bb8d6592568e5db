"""What the ZFS install asks apt for, from the host's facts (roles/zfs_packages.py)."""

import pytest

from roles.zfs_packages import ZFS_PACKAGES, InstallError, backports_source, header_packages, missing, suite

BARE = {  # a fresh Debian 12 server: kernel image and its metapackage, no headers
    "linux-image-6.1.0-57-amd64": {"6.1.158-1"},
    "linux-image-amd64": {"6.1.158-1"},
    "openssh-server": {"1:9.2p1-2+deb12u7"},
}


def test_running_kernel_and_metapackage_headers_pinned_to_the_kernel_version():
    assert header_packages("6.1.0-57-amd64\n", BARE) == [
        "linux-headers-6.1.0-57-amd64",
        "linux-headers-amd64=6.1.158-1",
    ]


def test_every_kernel_flavour_gets_its_headers_metapackage():
    installed = {
        **BARE,
        "linux-image-cloud-amd64": {"6.1.158-1"},
        "linux-image-6.1.0-57-cloud-amd64": {"6.1.158-1"},
        "linux-image-amd64-dbg": {"6.1.158-1"},
    }
    assert header_packages("6.1.0-57-cloud-amd64", installed) == [
        "linux-headers-6.1.0-57-cloud-amd64",
        "linux-headers-amd64=6.1.158-1",
        "linux-headers-cloud-amd64=6.1.158-1",
    ]


def test_signed_kernels_unsigned_package_counts_as_installed():
    installed = {"linux-image-6.1.0-57-amd64-unsigned": {"6.1.158-1"}}
    assert header_packages("6.1.0-57-amd64", installed) == ["linux-headers-6.1.0-57-amd64"]


def test_a_running_kernel_debian_does_not_know_stops_the_install():
    with pytest.raises(
        InstallError, match=r"running kernel 6\.18\.0-custom .*no linux-image-6\.18\.0-custom"
    ):
        header_packages("6.18.0-custom", BARE)


def test_headers_never_come_from_backports_with_zfs():
    # the ZFS packages are installed with -t bookworm-backports; headers are asked for separately
    assert not any(p.startswith("linux-headers") for p in ZFS_PACKAGES)
    assert ZFS_PACKAGES == ["zfs-dkms", "zfsutils-linux", "zfs-zed"]


def test_missing_compares_names_and_pinned_versions():
    installed = {**BARE, "linux-headers-amd64": {"6.1.150-1"}, "zfs-dkms": {"2.3.2-2~bpo12+1"}}
    wanted = ["linux-headers-6.1.0-57-amd64", "linux-headers-amd64=6.1.158-1", "zfs-dkms", "zfsutils-linux"]
    assert missing(wanted, installed) == [
        "linux-headers-6.1.0-57-amd64",
        "linux-headers-amd64=6.1.158-1",
        "zfsutils-linux",
    ]
    assert missing(["linux-headers-amd64=6.1.150-1", "zfs-dkms"], installed) == []


@pytest.mark.parametrize(
    "distribution, expected",
    [
        ({"name": "Debian", "major": 12}, "bookworm"),
        ({"name": "Debian", "major": "12"}, "bookworm"),
    ],
)
def test_debian_12_is_bookworm(distribution, expected):
    assert suite(distribution) == expected
    assert backports_source(expected) == "deb http://deb.debian.org/debian bookworm-backports main contrib"


@pytest.mark.parametrize(
    "distribution, shown",
    [
        ({"name": "Debian", "major": 11}, "Debian 11"),
        ({"name": "Ubuntu", "major": 24}, "Ubuntu 24"),
        ({"name": None, "major": None}, "an unknown system"),
        (None, "an unknown system"),
    ],
)
def test_other_systems_are_refused_by_name(distribution, shown):
    with pytest.raises(InstallError, match=f"Debian 12 \\(bookworm\\) only; this host runs {shown}"):
        suite(distribution)
