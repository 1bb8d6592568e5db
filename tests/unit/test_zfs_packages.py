"""What the ZFS install asks apt for, from the host's facts (roles/zfs_packages.py)."""

import pytest

from roles.zfs_packages import (
    ZFS_PACKAGES,
    InstallError,
    header_packages,
    missing,
    other_sources,
    release,
    zfs_source,
)

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


@pytest.mark.parametrize("major", [12, "12"])
def test_debian_12_takes_zfs_from_bookworm_backports(major):
    rel = release({"name": "Debian", "major": major}, "12")
    assert rel.codename == "bookworm"
    source = zfs_source(rel)
    assert source.line == "deb http://deb.debian.org/debian bookworm-backports main contrib"
    assert (source.path, source.install_args) == (
        "/etc/apt/sources.list.d/dbzfs-backports.list",
        "-t bookworm-backports",
    )
    # a host upgraded from Debian 13 would not be (and its contrib line is removed anyway)
    assert [o.path for o in other_sources(rel)] == ["/etc/apt/sources.list.d/dbzfs-zfs-contrib.list"]


def test_debian_13_takes_zfs_from_trixie_contrib():
    rel = release({"name": "Debian", "major": "13"}, "13")
    source = zfs_source(rel)
    assert source.line == "deb http://deb.debian.org/debian trixie contrib"
    assert source.install_args == ""  # no backports: trixie's own zfs-dkms
    # the bookworm-backports line a host upgraded from Debian 12 still has goes
    assert [o.path for o in other_sources(rel)] == ["/etc/apt/sources.list.d/dbzfs-backports.list"]


def test_a_release_other_than_the_datas_is_refused_by_name():
    with pytest.raises(
        InstallError,
        match=r"the host runs Debian 12 \(bookworm\), its data says debian_release '13' \(Debian 13 "
        r'\(trixie\)\): set debian_release: "12" for it',
    ):
        release({"name": "Debian", "major": "12"}, "13")


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
    with pytest.raises(
        InstallError,
        match=f"the host runs {shown}; the toolkit converges Debian 12 \\(bookworm\\) and Debian 13 "
        "\\(trixie\\) only",
    ):
        release(distribution, "13")


# --- prebuilt: the module package for the running kernel, tools at its version ----------------

from roles.zfs_packages import module_package, prebuilt_packages, repository_source  # noqa: E402

KERNEL = "6.1.0-57-amd64"
URL = "http://apt.example.net/zfs-modules/"
V = "2.3.2-1~bpo12+1"
REPO = {
    f"zfs-modules-{KERNEL}": [V],
    "zfsutils-linux": [V],
    "zfs-zed": [V],
    "libzfs6linux": [V],
}


def test_prebuilt_pins_module_and_tools_to_the_modules_version():
    assert prebuilt_packages(KERNEL + "\n", URL, REPO, BARE) == [
        f"zfs-modules-{KERNEL}={V}",
        f"zfsutils-linux={V}",
        f"zfs-zed={V}",
    ]
    assert module_package(KERNEL) == f"zfs-modules-{KERNEL}"


def test_prebuilt_on_an_installed_host_needs_no_repository():
    installed = {**BARE, f"zfs-modules-{KERNEL}": {V}}
    assert prebuilt_packages(KERNEL, URL, None, installed)[0] == f"zfs-modules-{KERNEL}={V}"


def test_a_kernel_without_a_module_in_the_repository_is_refused_naming_both():
    other = {k.replace(KERNEL, "6.1.0-56-amd64"): v for k, v in REPO.items()}
    with pytest.raises(InstallError) as err:
        prebuilt_packages(KERNEL, URL, other, BARE)
    text = str(err.value)
    assert f"{URL} has no zfs-modules-{KERNEL} for the running kernel {KERNEL}" in text
    assert "(it has zfs-modules-6.1.0-56-amd64)" in text
    assert f"./dbzfs zfs-repo --kernel {KERNEL}" in text and "zfs_install: dkms" in text


def test_an_unreadable_repository_is_refused():
    with pytest.raises(InstallError, match=r"could not be read \(404  Not Found\)"):
        prebuilt_packages(KERNEL, URL, None, BARE, error="404  Not Found")


def test_tools_at_another_version_than_the_module_are_refused():
    skewed = {**REPO, "zfsutils-linux": ["2.3.3-1~bpo12+1"]}
    with pytest.raises(InstallError, match="not zfsutils-linux at that version"):
        prebuilt_packages(KERNEL, URL, skewed, BARE)


def test_prebuilt_needs_a_debian_kernel():
    with pytest.raises(InstallError, match="not an installed Debian package"):
        prebuilt_packages("6.18.0-custom", URL, REPO, BARE)


def test_repository_source_is_signed_by_the_keyring():
    assert repository_source(URL, "bookworm") == (
        f"deb [signed-by=/etc/apt/keyrings/dbzfs-zfs-modules.asc] {URL} bookworm main"
    )
