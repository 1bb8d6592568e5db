"""A new server config is checked by the host's own server binary before it replaces the live one
(the way Ansible's `validate:` works): a config the server refuses fails the deploy, names the
setting, and leaves the old file and the running server as they were."""

import pytest

from roles import mariadb

from tests.labkit import lab_postgresql

pytestmark = pytest.mark.e2e

CASES = {
    "db2": (mariadb.CONFIG, "mariadb.service", "innodb_no_such_setting = 1", "innodb_no_such_setting"),
    "pg2": (
        f"{lab_postgresql().config_dir}/postgresql.conf",
        lab_postgresql().unit,
        "shared_buffers = 'plenty'",
        "shared_buffers",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_config_the_server_refuses_keeps_the_old_file(converged, name):
    path, unit, line, setting = CASES[name]
    before = converged.check(name, f"sha256sum {path}; systemctl show -p MainPID --value {unit}")
    result = converged.pyinfra(
        "--limit", name, "--data", f"refused_line={line}", deploy="tests/e2e/deploys/refused_config.py"
    )
    output = result.stdout + result.stderr
    assert result.rc != 0, output[-4000:]
    assert f"refuses the new {path.rsplit('/', 1)[-1]}" in output and setting in output, output[-4000:]
    after = converged.check(name, f"sha256sum {path}; systemctl show -p MainPID --value {unit}")
    assert after == before  # same file, same server process
    assert converged.check(name, "ls -A /run/dbzfs-check").strip() == ""  # no candidate left behind
