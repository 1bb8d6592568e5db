"""zfsrepo: the module package and the signed repository, built with the real tools (dpkg-deb,
dpkg-scanpackages, gpg), then read by the storage role's fact through apt's own downloader and
verified with gpgv, as apt does on the hosts."""

import shlex
import subprocess
from pathlib import Path

import pytest

from facts.zfs import ModuleRepositoryPackages
from zfsrepo import package, publish

KERNEL = "6.1.0-57-amd64"
VERSION = "2.3.2-1~bpo12+1"


def fake_build_root(root: Path, modules=("spl", "zfs")) -> Path:
    d = root / "lib/modules" / KERNEL / "updates/dkms"
    d.mkdir(parents=True)
    for m in modules:
        (d / f"{m}.ko").write_bytes(b"\x7fELF" + m.encode() * 100)
    return root


@pytest.fixture(scope="module")
def signed_repo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("zfsrepo")
    deb = package.build_module_deb(fake_build_root(tmp / "root"), KERNEL, VERSION, tmp / "debs")
    home = tmp / "gnupg"
    key = publish.ensure_key(home, "test <test@example.invalid>")
    key_file = publish.publish([deb], tmp / "repo", "bookworm", home, key)
    return tmp, deb, key_file


def test_module_package_is_named_for_the_kernel_and_replaces_dkms(signed_repo):
    _, deb, _ = signed_repo
    assert deb.name == f"zfs-modules-{KERNEL}_{VERSION}_amd64.deb"
    fields = package.deb_fields(deb, "Package", "Version", "Depends", "Provides", "Conflicts")
    assert fields == {
        "Package": f"zfs-modules-{KERNEL}",
        "Version": VERSION,
        "Depends": f"linux-image-{KERNEL}",
        "Provides": f"zfs-modules (= {VERSION})",
        "Conflicts": "zfs-dkms",
    }
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    assert f"./lib/modules/{KERNEL}/updates/zfs/zfs.ko" in listing and "root/root" in listing
    assert (
        "depmod -a " + KERNEL
        in subprocess.run(
            ["dpkg-deb", "-I", str(deb), "postinst"], capture_output=True, text=True, check=True
        ).stdout
    )


def test_no_package_without_both_modules(tmp_path):
    with pytest.raises(package.PackageError, match=r"found \['spl'\]"):
        package.build_module_deb(fake_build_root(tmp_path / "root", ("spl",)), KERNEL, VERSION, tmp_path)


def test_release_is_signed_and_verifies_with_the_exported_key(signed_repo):
    tmp, _, key_file = signed_repo
    dists = tmp / "repo/dists/bookworm"
    keyring = tmp / "keyring.gpg"
    subprocess.run(["gpg", "--batch", "--dearmor", "-o", str(keyring), str(key_file)], check=True)
    for args in (["InRelease"], ["Release.gpg", "Release"]):
        r = subprocess.run(
            ["gpgv", "--keyring", str(keyring), *[str(dists / a) for a in args]],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
    release = (dists / "Release").read_text()
    assert "Suite: bookworm\nCodename: bookworm\n" in release and "main/binary-amd64/Packages.gz" in release
    assert key_file.read_text().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert not subprocess.run(["pgrep", "-f", f"gpg-agent --homedir {tmp}/gnupg"]).returncode == 0


def run_fact(url: str) -> dict:
    """The fact's command in a real shell on this machine (apt-helper, gzip, awk)."""
    fact = ModuleRepositoryPackages()
    cmd = fact.command(url=url, suite="bookworm").get_raw_value()
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return fact.process(r.stdout.splitlines())


def test_the_fact_reads_the_repositorys_index_through_apt(signed_repo):
    tmp, _, _ = signed_repo
    assert run_fact(f"file://{tmp}/repo/") == {"packages": {f"zfs-modules-{KERNEL}": [VERSION]}}


def test_the_fact_reports_a_repository_it_cannot_read(tmp_path):
    answer = run_fact(f"file://{tmp_path}/nothing-here")
    assert set(answer) == {"error"} and answer["error"], answer


def test_the_fact_quotes_the_url():
    cmd = ModuleRepositoryPackages().command(url="http://x/it's", suite="bookworm").get_raw_value()
    assert (
        cmd.startswith("base=" + shlex.quote("http://x/it's/dists/bookworm/main") + ";") or "it'\\''s" in cmd
    )


def test_publish_never_replaces_a_directory_it_did_not_write(signed_repo, tmp_path):
    tmp, deb, _ = signed_repo
    (tmp_path / "precious.txt").write_text("keep me")
    key = publish.fingerprint(tmp / "gnupg")
    with pytest.raises(publish.PublishError, match="refusing to replace"):
        publish.publish([deb], tmp_path, "bookworm", tmp / "gnupg", key)
    assert (tmp_path / "precious.txt").read_text() == "keep me"
    publish.publish([deb], tmp / "repo", "bookworm", tmp / "gnupg", key)  # its own: replaced
    publish.stop_agent(tmp / "gnupg")
