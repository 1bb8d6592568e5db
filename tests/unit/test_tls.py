"""A host's TLS key and certificate (operations/tls.py): the key made on the host, the
certificate signed here by the fleet CA for the host's own key, issued again only when it must."""

import subprocess
from types import SimpleNamespace

from pyinfra.facts.files import File, FileContents

from operations import tls as ops
from pki import ca as pki

from tests.unit.fact_stubs import FakeHost, run_operation
from tests.unit.test_pki import host_request


def test_a_missing_key_is_made_on_the_host_and_owned_by_its_reader():
    commands, _ = run_operation(ops.private_key, {File: None}, "/etc/dbzfs/tls/host.key", "mysql", "mysql")
    assert (
        len(commands) == 1 and "openssl genpkey -algorithm EC" in commands[0] and "umask 077" in commands[0]
    )
    assert "chown mysql:mysql /etc/dbzfs/tls/host.key.new && mv -f" in commands[0]


def test_a_key_in_place_is_a_noop_and_its_owner_is_fixed_without_a_new_key():
    live = {"user": "mysql", "group": "mysql", "mode": 600}
    commands, host = run_operation(ops.private_key, {File: live}, "/k", "mysql", "mysql")
    assert commands == [] and host.noops
    commands, _ = run_operation(ops.private_key, {File: {**live, "mode": 644}}, "/k", "mysql", "mysql")
    assert commands == ["chown mysql:mysql /k && chmod 600 /k"]


def test_a_valid_certificate_is_a_noop(tmp_path):
    ca = pki.ensure(tmp_path / "ca")
    pem = pki.sign(ca, host_request(tmp_path), ["db1"], ["10.99.0.11"], 90)
    commands, host = run_operation(
        ops.certificate,
        {FileContents: pem.splitlines()},
        "/c",
        "/k",
        ["db1"],
        ["10.99.0.11"],
        90,
        30,
        ca_dir=str(ca.directory),
    )
    assert commands == [] and host.noops


def test_a_certificate_is_signed_here_for_the_hosts_own_request_and_uploaded(tmp_path):
    ca = pki.ensure(tmp_path / "ca")
    csr = host_request(tmp_path)
    host = FakeHost({FileContents: None})
    host.log = lambda *a, **k: None
    uploaded = {}

    def run_shell_command(command):
        assert "openssl req -new -key /k -subj /CN=db1" in str(command)
        return True, SimpleNamespace(stdout=csr.strip(), stderr="")

    def put_file(src, dest):
        uploaded[dest] = src.read()
        return True

    host.run_shell_command, host.put_file = run_shell_command, put_file
    from pyinfra.context import ctx_host

    with ctx_host.use(host):
        commands = list(
            ops.certificate._inner("/c", "/k", ["db1"], ["10.99.0.11"], 90, 30, ca_dir=str(ca.directory))
        )
    assert commands[0].function(None, host) is True
    assert "mv -f /c.new /c" in str(commands[1])
    assert pki.verify(ca, uploaded["/c.new"])
    out = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName"], input=uploaded["/c.new"],
                         capture_output=True, text=True).stdout  # fmt: skip
    assert "DNS:db1" in out and "IP Address:10.99.0.11" in out


def found(fleet, secrets):
    from validation import validate

    return [(p.host, p.key, p.value) for p in validate(fleet, secrets)]


def test_a_replication_group_agrees_on_tls(fleet, secrets):
    fleet["db1"]["tls"] = True
    fleet["pg2"]["tls"] = True
    assert found(fleet, secrets) == [("db2", "tls", False), ("pg2", "tls", True)]
    fleet["db2"]["tls"] = fleet["pg1"]["tls"] = True
    assert found(fleet, secrets) == []


def test_the_certificates_days_and_renewal_window(fleet, secrets):
    fleet["db1"].update(tls_certificate_days=0)
    fleet["db2"].update(tls_certificate_days=90, tls_renew_days=90)
    assert found(fleet, secrets) == [("db1", "tls_certificate_days", 0), ("db2", "tls_renew_days", 90)]


def test_what_each_engine_is_given_with_tls_and_nothing_without(fleet):
    from model.hostdata import HostConfig
    from roles import tls

    on = HostConfig.from_data("pg1", {**fleet["pg1"], "tls": True})
    off = HostConfig.from_data("pg1", fleet["pg1"])
    assert tls.postgresql_settings(on)["ssl"] == "on" and tls.postgresql_settings(off) == {}
    assert tls.conninfo_options(on) == " sslmode=verify-full sslrootcert=/etc/dbzfs/tls/ca.crt"
    assert tls.conninfo_options(off) == "" and tls.hba_connection_type(on) == "hostssl"
    db = HostConfig.from_data("db2", {**fleet["db2"], "tls": True})
    assert "MASTER_SSL_VERIFY_SERVER_CERT=1" in tls.master_ssl(db) and tls.require(db) == " REQUIRE SSL"
    assert tls.names(db) == (["db2"], ["10.99.0.12"])
