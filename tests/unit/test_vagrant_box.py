"""lab/vagrant_box.py offline: the box's metadata and Vagrantfile, the apt proxy it may carry, and
Vagrant's insecure key from the vagrant package. Building a box needs the bare image and root
(`python -m lab vagrant-box`)."""

import shutil
import subprocess

import pytest

from lab import vagrant_box
from lab.vm import LabError


def test_the_box_vagrantfile_boots_the_images_kernel_and_is_ruby(tmp_path):
    text = vagrant_box.box_vagrantfile(vagrant_box.KERNELS / "abc")
    assert "lv.kernel = '/var/lib/libvirt/images/dbzfs-box/abc/vmlinuz'" in text
    assert "lv.initrd = '/var/lib/libvirt/images/dbzfs-box/abc/initrd.img'" in text
    assert "root=/dev/vda" in text and "net.ifnames=0" in text
    (tmp_path / "Vagrantfile").write_text(text)
    ruby = shutil.which("ruby")
    assert ruby, "ruby missing: run scripts/bootstrap lab (Debian's vagrant depends on it)"
    check = subprocess.run([ruby, "-c", str(tmp_path / "Vagrantfile")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_metadata_names_libvirt_qcow2_and_the_size_in_whole_gigabytes(tmp_path):
    img = tmp_path / "root.img"
    with img.open("wb") as f:
        f.truncate(8 * 1024**3 + 1)
    assert vagrant_box.metadata(img) == {"provider": "libvirt", "format": "qcow2", "virtual_size": 9}


def test_apt_proxy_is_an_http_url_or_nothing():
    assert vagrant_box.apt_proxy_setting(None) is None
    assert vagrant_box.apt_proxy_setting("http://192.168.121.1:3142") == (
        'Acquire::http::Proxy "http://192.168.121.1:3142";\n'
    )
    for bad in ("ftp://x", 'http://a";b', "http://a b"):
        with pytest.raises(LabError, match="give an http:// URL"):
            vagrant_box.apt_proxy_setting(bad)


def test_vagrants_insecure_key_comes_from_the_package():
    assert vagrant_box.insecure_key().startswith("ssh-")
