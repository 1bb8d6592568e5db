"""The fleet CA on the operator's machine (pki/ca.py), with Debian's openssl: created outside the
repository with a private key, host certificates that verify, name the host and its addresses,
never outlive the CA, and are renewed when they must be."""

import os
import subprocess

import pytest

from pki import ca as pki


def host_request(tmp_path, name="db1"):
    key, csr = tmp_path / f"{name}.key", tmp_path / f"{name}.csr"
    subprocess.run(
        ["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}"],
        check=True, capture_output=True,
    )  # fmt: skip
    return csr.read_text()


def test_the_ca_is_made_once_with_a_key_only_its_owner_reads(tmp_path):
    ca = pki.ensure(tmp_path / "ca")
    assert oct(ca.key.stat().st_mode & 0o777) == "0o600"
    first = ca.pem()
    assert pki.ensure(tmp_path / "ca").pem() == first  # kept


def test_the_ca_refuses_the_repository_and_a_readable_key(tmp_path):
    with pytest.raises(pki.CAError, match="inside the repository"):
        pki.ensure(pki.REPO_ROOT / ".lab" / "ca")
    ca = pki.ensure(tmp_path / "ca")
    os.chmod(ca.key, 0o644)
    with pytest.raises(pki.CAError, match="chmod 600"):
        pki.ensure(tmp_path / "ca")


def test_a_host_certificate_verifies_and_names_the_host_and_its_address(tmp_path):
    ca = pki.ensure(tmp_path / "ca")
    pem = pki.sign(ca, host_request(tmp_path), ["db1"], ["10.99.0.11"], days=90)
    assert pki.verify(ca, pem)
    assert pki.renewal(ca, pem, ["db1"], ["10.99.0.11"], renew_days=30) is None
    text = subprocess.run(
        ["openssl", "x509", "-noout", "-text"], input=pem, capture_output=True, text=True
    ).stdout
    assert "TLS Web Server Authentication, TLS Web Client Authentication" in text


def test_renewal_says_why(tmp_path):
    ca = pki.ensure(tmp_path / "ca")
    pem = pki.sign(ca, host_request(tmp_path), ["db1"], ["10.99.0.11"], days=20)
    assert pki.renewal(ca, None, ["db1"], ["10.99.0.11"], 30) == "none yet"
    assert "expires in" in pki.renewal(ca, pem, ["db1"], ["10.99.0.11"], renew_days=30)
    assert "names" in pki.renewal(ca, pem, ["db1"], ["10.99.0.12"], renew_days=1)
    other = pki.ensure(tmp_path / "other")
    assert pki.renewal(other, pem, ["db1"], ["10.99.0.11"], 1) == "not signed by this CA"


def test_a_certificate_never_outlives_the_ca(tmp_path):
    ca = pki.ensure(tmp_path / "ca")
    pem = pki.sign(ca, host_request(tmp_path), ["db1"], ["10.99.0.11"], days=100_000)
    assert pki.not_after(pem) <= pki.not_after(ca.pem())
