"""host_scripts/pgbackrest_remote.py, the forced command of pgBackRest's ssh keys: the
remote command lines pgBackRest sends pass, anything else is refused with the reason on stderr.
pgbackrest itself never runs: os.execv is replaced by a recorder where a command passes."""

import os
import subprocess

import pytest

from host_scripts import pgbackrest_remote as remote

# What the backup host's pgBackRest asks of a database host (a backup), and a database host's
# archive_command of the backup host, as pgBackRest 2.45 builds them.
BACKUP_REMOTE = (
    "pgbackrest --exec-id=1234-abcd --log-level-console=off --log-level-file=off "
    "--log-level-stderr=error --pg1-path=/datastore/postgresql/15/main --process=0 "
    "--remote-type=pg --stanza=postgresql backup:remote"
)
ARCHIVE_REMOTE = (
    "pgbackrest --config=/etc/pgbackrest.conf --remote-type=repo --stanza=postgresql archive-push:remote"
)


@pytest.mark.parametrize(
    "command",
    [
        BACKUP_REMOTE,
        ARCHIVE_REMOTE,
        "pgbackrest --exec-id=99-ff --process=1 --remote-type=repo --stanza=postgresql archive-get:remote",
        "pgbackrest --remote-type=repo --repo=1 --stanza=analytics restore:remote",
        "/usr/bin/pgbackrest --remote-type=pg --stanza=postgresql check:remote",
    ],
)
def test_pgbackrest_s_remote_command_lines_pass(command):
    assert remote.refusal(command) is None


@pytest.mark.parametrize(
    ("command", "why"),
    [
        (None, "no command"),
        ("", "no command"),
        ("id", "not pgbackrest: 'id'"),
        ("sh -c 'pgbackrest --stanza=x archive-push:remote'", "not pgbackrest: 'sh'"),
        ("/bin/bash", "not pgbackrest: '/bin/bash'"),
        ("pgbackrest", "not a pgBackRest remote"),
        ("pgbackrest --stanza=postgresql backup", "not a pgBackRest remote"),
        ("pgbackrest --stanza=postgresql archive-push:remote; id", "not a pgBackRest remote"),
        ("pgbackrest --stanza=postgresql archive-push:remote && sh", "not a pgBackRest remote"),
        ("pgbackrest --stanza=postgresql extra archive-push:remote", "not an option: 'extra'"),
        ("pgbackrest --Config=/tmp/x archive-push:remote", "not an option: '--Config=/tmp/x'"),
        ("pgbackrest --stanza='postgresql archive-push:remote", "cannot parse the command"),
    ],
)
def test_anything_else_is_refused(command, why):
    found = remote.refusal(command)
    assert found is not None and found.startswith(why), found


@pytest.mark.parametrize(
    "option",
    [
        "--repo1-path=/",
        "--repo-path=/var/lib/postgresql",
        "--repo2-path=/tmp/repo",
        "--config=/tmp/x",
        "--config",  # no value: not this host's config either
        "--config-path=/tmp",
        "--config-include-path=/tmp/conf.d",
        "--lock-path=/tmp/lock",
        "--log-path=/tmp",
        "--spool-path=/tmp/spool",
        "--cmd-ssh=/bin/sh",
    ],
)
def test_options_that_point_elsewhere_are_refused(option):
    name = option[2:].split("=")[0]
    command = f"pgbackrest {option} --remote-type=repo --stanza=postgresql archive-push:remote"
    assert remote.refusal(command) == f"option --{name} may not be set from the other side"


def test_this_host_s_own_config_may_be_named():
    assert remote.refusal(ARCHIVE_REMOTE) is None
    assert "--config=/etc/pgbackrest.conf" in ARCHIVE_REMOTE


def test_main_refuses_with_the_reason_on_stderr(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(os, "execv", lambda *a: ran.append(a))
    monkeypatch.setenv("SSH_ORIGINAL_COMMAND", "pgbackrest --repo1-path=/ --stanza=x archive-get:remote")
    assert remote.main() == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "dbzfs pgbackrest_remote: refused: option --repo1-path may not be set from the other side\n"
    assert ran == []


def test_main_refuses_a_login_without_a_command(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(os, "execv", lambda *a: ran.append(a))
    monkeypatch.delenv("SSH_ORIGINAL_COMMAND", raising=False)
    assert remote.main() == 1
    assert "refused: no command" in capsys.readouterr().err
    assert ran == []


def test_main_runs_pgbackrest_from_its_argument_list_without_a_shell(monkeypatch):
    ran = []
    monkeypatch.setattr(os, "execv", lambda program, argv: ran.append((program, argv)))
    # $(id) stays text: no shell ever sees the line
    monkeypatch.setenv(
        "SSH_ORIGINAL_COMMAND",
        "pgbackrest --exec-id='$(id)' --remote-type=repo --stanza=postgresql info:remote",
    )
    remote.main()
    assert ran == [
        (
            "/usr/bin/pgbackrest",
            [
                "/usr/bin/pgbackrest",
                "--exec-id=$(id)",
                "--remote-type=repo",
                "--stanza=postgresql",
                "info:remote",
            ],
        )
    ]


def test_another_program_named_pgbackrest_runs_debian_s(monkeypatch):
    ran = []
    monkeypatch.setattr(os, "execv", lambda program, argv: ran.append((program, argv)))
    monkeypatch.setenv("SSH_ORIGINAL_COMMAND", "/tmp/evil/pgbackrest --stanza=postgresql archive-get:remote")
    remote.main()
    assert ran == [
        ("/usr/bin/pgbackrest", ["/usr/bin/pgbackrest", "--stanza=postgresql", "archive-get:remote"])
    ]


def test_the_script_refuses_as_ssh_runs_it(tmp_path):
    """As authorized_keys runs it: the system's python3, isolated (standard library only)."""
    env = {"PATH": "/usr/bin:/bin", "SSH_ORIGINAL_COMMAND": "id"}
    result = subprocess.run(
        ["/usr/bin/python3", "-I", remote.__file__],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=30,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == "dbzfs pgbackrest_remote: refused: not pgbackrest: 'id'\n"


def test_the_script_names_the_system_s_python():
    with open(remote.__file__) as f:
        assert f.readline() == "#!/usr/bin/python3\n"
