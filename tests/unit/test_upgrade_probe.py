"""day2/upgrade_probe.py: the probe's shell text, its output (as a Debian 12 host printed it, moved to
trixie's sources) and every refusal before a release upgrade."""

import subprocess
from dataclasses import replace

import pytest

from day2 import upgrade_probe
from model import releases
from model.hostdata import HostConfig

GIB = 1 << 30
# What the probe printed on this project's Debian 12 machine (a few lines of each kind kept).
OUTPUT = """os=12
kernel=6.1.0-41-amd64
root=5368709120 1932735283
pool=dbpool\t12348030976\t1649267441\t10698763535\t13\tONLINE
update=0
update_log=W: Download is performed unsandboxed as root
counts=682 207 57
need=641 MB of archives.
after=1406 MB of additional disk space will be used.
remove=libssl3
remove=libgnutls30
new_kernel=6.12.57+deb13-amd64
module=2.3.2-1
end=1""".splitlines()


def probe(**changes):
    return replace(upgrade_probe.parse(OUTPUT), **changes)


@pytest.fixture
def pg(fleet):
    """A PostgreSQL host as its release step sees it (day2/upgrade.py: data_for)."""
    fleet["pg1"].update(debian_release="13", postgresql_version="15")
    return HostConfig.from_data("pg1", fleet["pg1"])


def test_the_output_is_parsed():
    p = upgrade_probe.parse(OUTPUT)
    assert (p.os, p.kernel, p.new_kernel, p.module, p.complete) == (
        "12",
        "6.1.0-41-amd64",
        "6.12.57+deb13-amd64",
        "2.3.2-1",
        True,
    )
    assert (p.root_avail, p.root_used) == (5368709120, 1932735283)
    assert p.pool == {
        "name": "dbpool",
        "size": 12348030976,
        "alloc": 1649267441,
        "free": 10698763535,
        "cap": 13,
        "health": "ONLINE",
    }
    assert (p.update_rc, p.need, p.after, p.counts) == (0, 641_000_000, 1_406_000_000, (682, 207, 57))
    assert p.removed == ["libssl3", "libgnutls30"]


@pytest.mark.parametrize(
    ("text", "size"),
    [("641 MB", 641_000_000), ("1,024 kB", 1_024_000), ("2.5 GB", 2_500_000_000), ("0 B", 0)],
)
def test_apts_sizes(text, size):
    assert upgrade_probe.size(text) == size


def test_space_freed_is_negative():
    p = upgrade_probe.parse(["after=12.3 MB disk space will be freed.", "end=1"])
    assert p.after == -12_300_000


def test_a_host_with_room_a_kernel_and_its_server_kept_may_go(pg):
    assert upgrade_probe.problems(pg, releases.TRIXIE, probe()) == []


def test_a_host_on_the_new_release_is_done_not_refused(pg):
    assert upgrade_probe.problems(pg, releases.TRIXIE, probe(os="13", update_rc=1)) == []


@pytest.mark.parametrize(
    ("changes", "key", "says"),
    [
        ({"complete": False}, "upgrade", "did not finish"),
        ({"os": "11"}, "debian_release", "runs Debian 11"),
        ({"update_rc": 100, "update_log": ["E: no route"]}, "apt sources", "E: no route"),
        ({"root_avail": 2 * GIB}, "root filesystem", "the upgrade needs 2.9 GiB"),
        ({"removed": ["postgresql-15"]}, "upgrade", "would remove the server"),
        ({"new_kernel": ""}, "kernel", "no Debian kernel metapackage"),
    ],
)
def test_each_refusal_names_the_host_the_key_and_a_fix(pg, changes, key, says):
    found = upgrade_probe.problems(pg, releases.TRIXIE, probe(**changes))
    assert [p.key for p in found] == [key], [str(p) for p in found]
    assert found[0].host == "pg1" and says in found[0].message and found[0].fix


def test_a_pool_over_its_threshold_with_the_systems_copy_is_refused(pg):
    pool = {**probe().pool, "cap": 70, "alloc": int(12348030976 * 0.7)}
    found = upgrade_probe.problems(pg, releases.TRIXIE, probe(pool=pool))
    assert [p.key for p in found] == ["zfs_capacity_threshold"]
    assert "with the system's copy" in found[0].message
    degraded = {**probe().pool, "health": "DEGRADED"}
    assert [p.key for p in upgrade_probe.problems(pg, releases.TRIXIE, probe(pool=degraded))] == ["pool"]


def test_a_prebuilt_host_needs_the_new_kernels_module(fleet):
    fleet["db1"].update(
        zfs_install="prebuilt",
        zfs_module_repository={"url": "http://10.0.2.100:3142/zfs/", "suite": "bookworm", "key_file": "/k"},
    )
    cfg = HostConfig.from_data("db1", fleet["db1"])
    found = upgrade_probe.problems(cfg, releases.TRIXIE, probe(module="(none)"))
    assert [p.key for p in found] == ["zfs_module_repository"]
    assert (
        "6.12.57+deb13-amd64" in found[0].message and "zfs-repo --kernel 6.12.57+deb13-amd64" in found[0].fix
    )
    assert upgrade_probe.problems(cfg, releases.TRIXIE, probe()) == []


def test_the_script_is_valid_shell_and_keeps_every_source_text_verbatim():
    text = "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\n# DBZFS_SOURCE_EOF in a comment\n"
    script = upgrade_probe.script({"debian.sources": text, "sources.list": ""}, "dbpool", "zfs-modules-")
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert "DBZFS_SOURCE_EOF_\n" in script  # the marker is never a line of the text
    assert "cat > $d/sources.list.d/debian.sources <<'DBZFS_SOURCE_EOF_'\n" + text in script
    assert "zpool list -Hp -o name,size,alloc,free,cap,health dbpool" in script
    assert "zfs-modules-" in script
    # apt never leaves the probe's directory
    for line in script.splitlines():
        if line.lstrip().startswith(("apt-get", "LC_ALL=C", "if [ -n")) and "apt" in line:
            assert "Dir::State::Lists=$d/lists" in line, line


def test_only_postgresqls_old_server_must_survive(fleet, pg):
    assert upgrade_probe.server_packages(pg) == ["postgresql-15"]
    assert upgrade_probe.server_packages(HostConfig.from_data("db1", fleet["db1"])) == []
