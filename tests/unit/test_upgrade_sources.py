"""day2/upgrade_sources.py: apt sources moved from Debian 12 to 13 as Debian's release notes say,
old backports left out, sources that are not Debian's reported and left alone."""

from day2.upgrade_sources import is_debian, move_deb822, move_list, suite_for
from model.releases import BOOKWORM, TRIXIE

SOURCES_LIST = """# written by the installer
deb http://deb.debian.org/debian bookworm main contrib non-free-firmware
deb-src http://deb.debian.org/debian bookworm main
  deb http://deb.debian.org/debian bookworm-updates main
deb http://security.debian.org/debian-security bookworm-security main
deb [arch=amd64] http://deb.debian.org/debian/ bookworm-backports main contrib
# deb http://deb.debian.org/debian bookworm-proposed-updates main
deb [signed-by=/etc/apt/keyrings/zfs.asc] http://apt.example.net/zfs-modules/ bookworm main
deb http://apt.postgresql.org/pub/repos/apt bookworm-pgdg main
"""


def test_suites_follow_debians_names():
    assert [
        suite_for(s, BOOKWORM, TRIXIE) for s in ("bookworm", "bookworm-updates", "bookworm-security")
    ] == [
        "trixie",
        "trixie-updates",
        "trixie-security",
    ]
    assert suite_for("bookworm-backports", BOOKWORM, TRIXIE) is None
    assert suite_for("trixie", BOOKWORM, TRIXIE) == "trixie"  # moved already: as it is


def test_a_sources_list_moves_line_by_line():
    moved = move_list(SOURCES_LIST, BOOKWORM, TRIXIE)
    assert moved.changed
    assert moved.text == (
        "# written by the installer\n"
        "deb http://deb.debian.org/debian trixie main contrib non-free-firmware\n"
        "deb-src http://deb.debian.org/debian trixie main\n"
        "  deb http://deb.debian.org/debian trixie-updates main\n"
        "deb http://security.debian.org/debian-security trixie-security main\n"
        "# deb http://deb.debian.org/debian bookworm-proposed-updates main\n"
        "deb [signed-by=/etc/apt/keyrings/zfs.asc] http://apt.example.net/zfs-modules/ bookworm main\n"
        "deb http://apt.postgresql.org/pub/repos/apt bookworm-pgdg main\n"
    )
    assert moved.dropped == ["deb [arch=amd64] http://deb.debian.org/debian/ bookworm-backports main contrib"]
    assert moved.foreign == [
        "deb [signed-by=/etc/apt/keyrings/zfs.asc] http://apt.example.net/zfs-modules/ bookworm main",
        "deb http://apt.postgresql.org/pub/repos/apt bookworm-pgdg main",
    ]


def test_moving_twice_changes_nothing():
    once = move_list(SOURCES_LIST, BOOKWORM, TRIXIE)
    twice = move_list(once.text, BOOKWORM, TRIXIE)
    assert twice.text == once.text and not twice.changed and not twice.dropped


def test_a_declared_mirror_is_debians():
    text = "deb http://mirror.example.net/debian bookworm main\n"
    assert move_list(text, BOOKWORM, TRIXIE).foreign == [text.strip()]
    moved = move_list(text, BOOKWORM, TRIXIE, mirrors=("http://mirror.example.net/debian/",))
    assert moved.text == "deb http://mirror.example.net/debian trixie main\n" and not moved.foreign
    assert is_debian("https://deb.debian.org/debian/") and not is_debian("http://deb.debian.org/ubuntu")


DEB822 = """Types: deb deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

# backports only: goes
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main

Types: deb
URIs: https://vendor.example.com/apt
Suites: bookworm
Components: main
"""


def test_deb822_stanzas_move_by_their_suites():
    moved = move_deb822(DEB822, BOOKWORM, TRIXIE)
    assert moved.changed
    assert moved.text == (
        "Types: deb deb-src\n"
        "URIs: http://deb.debian.org/debian\n"
        "Suites: trixie trixie-updates\n"
        "Components: main contrib\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        "\n"
        "Types: deb\n"
        "URIs: https://vendor.example.com/apt\n"
        "Suites: bookworm\n"
        "Components: main\n"
    )
    assert moved.dropped == ["http://deb.debian.org/debian bookworm-backports"]
    assert moved.foreign == ["https://vendor.example.com/apt bookworm"]
    assert not move_deb822(moved.text, BOOKWORM, TRIXIE).changed


def test_a_deb822_stanza_keeps_its_other_suites_when_backports_go():
    text = (
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-backports\n"
        "Components: main\n"
    )
    moved = move_deb822(text, BOOKWORM, TRIXIE)
    assert moved.text == "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\n"
    assert moved.dropped == ["http://deb.debian.org/debian bookworm-backports"]
