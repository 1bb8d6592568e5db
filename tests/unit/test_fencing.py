"""The fence check (templates/fence-check.sh.j2, roles/fencing.py): rendered for each engine, run
by bash with stand-in psql / mariadb clients that answer as the peers would, it lets a standby or
a read-only server start, lets a primary start while no peer takes writes (or none answers), and
refuses a primary while a peer takes writes, naming the peer and the way back."""

import os
import subprocess

import pytest

from model.hostdata import HostConfig
from roles import fencing, render


def configs(fleet, engine):
    return [HostConfig.from_data(n, d) for n, d in fleet.items() if d["engine"] == engine]


def script(fleet, engine, name, **override):
    members = configs(fleet, engine)
    cfg = next(m for m in members if m.name == name)
    context = {**render.fence_context(cfg, members), "wait": 0, **override}
    return render.render("fence-check.sh.j2", context)


def reply(answer):
    """A client's reply: a server's answer on stdout; an error (exit 2) on stderr."""
    if "ERROR" in answer or "error:" in answer:
        return f"echo {answer} >&2; exit 2"
    return f"echo {answer}"


def run(tmp_path, text, client, answers):
    """Run the check with `client` (psql or mariadb) on PATH answering `answers[address]` (an
    address missing from it does not answer)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    cases = "".join(f"    *{address}*) {reply(answer)};;\n" for address, answer in answers.items())
    (bin_dir / client).write_text(f'#!/bin/bash\ncase "$*" in\n{cases}    *) exit 2;;\nesac\n')
    (bin_dir / client).chmod(0o755)
    path = tmp_path / "fence-check"
    path.write_text(text)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env, timeout=30)


def test_every_rendering_is_valid_bash(fleet):
    for engine, name in (
        ("postgresql", "pg1"),
        ("postgresql", "pg2"),
        ("mariadb", "db1"),
        ("mariadb", "db2"),
    ):
        r = subprocess.run(["bash", "-n", "-c", script(fleet, engine, name)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


@pytest.fixture
def pg_data(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    return data


def test_postgresql_primary_refuses_to_start_while_a_peer_is_a_primary(fleet, tmp_path, pg_data):
    text = script(fleet, "postgresql", "pg1", data_directory=str(pg_data))
    r = run(tmp_path, text, "psql", {"10.99.0.22": "off"})
    assert r.returncode == 1
    assert "pg1 refuses to start as a primary: pg2 (10.99.0.22) takes writes" in r.stderr
    assert "runbooks/seed.py --data host=pg1 --data wipe=yes" in r.stderr


@pytest.mark.parametrize("answers", [{"10.99.0.22": "on"}, {}])
def test_postgresql_primary_starts_when_no_peer_takes_writes_or_none_answers(
    fleet, tmp_path, pg_data, answers
):
    text = script(fleet, "postgresql", "pg1", data_directory=str(pg_data))
    assert run(tmp_path, text, "psql", answers).returncode == 0


def test_postgresql_standby_always_starts(fleet, tmp_path, pg_data):
    (pg_data / "standby.signal").touch()
    text = script(fleet, "postgresql", "pg2", data_directory=str(pg_data))
    assert run(tmp_path, text, "psql", {"10.99.0.21": "off"}).returncode == 0


def test_postgresql_check_asks_a_walsender_with_the_passfile(fleet, pg_data):
    text = script(fleet, "postgresql", "pg1", data_directory=str(pg_data))
    assert "PGPASSFILE=/var/lib/postgresql/.pgpass" in text and "replication=true" in text
    assert "deadline=$((SECONDS + 0))" in text
    assert "SHOW in_hot_standby" in text and "10.99.0.22" in text and "10.99.0.21" not in text


@pytest.mark.parametrize(
    "role_file, peer, code",
    [
        ("read_only                      = OFF\n", "0", 1),  # a primary while db2 takes writes
        ("read_only                      = OFF\n", "1", 0),  # db2 is read-only
        ("read_only                      = OFF\n", None, 0),  # db2 does not answer
        ("read_only                      = ON\n", "0", 0),  # a replica starts read-only anyway
    ],
)
def test_mariadb_fence_follows_the_role_file_and_the_peers(fleet, tmp_path, role_file, peer, code):
    role = tmp_path / "91-dbzfs-role.cnf"
    role.write_text("[mysqld]\n" + role_file)
    text = script(fleet, "mariadb", "db1", role_config=str(role))
    r = run(tmp_path, text, "mariadb", {"10.99.0.12": peer} if peer is not None else {})
    assert r.returncode == code, r.stderr
    if code:
        assert "db1 refuses to start as a primary: db2 (10.99.0.12) takes writes" in r.stderr


def test_mariadb_without_a_role_file_starts(fleet, tmp_path):
    text = script(fleet, "mariadb", "db1", role_config=str(tmp_path / "missing.cnf"))
    assert run(tmp_path, text, "mariadb", {"10.99.0.12": "0"}).returncode == 0


def test_the_drop_in_runs_the_check_as_root_before_start():
    text = render.fence_dropin()
    assert "[Service]\nExecStartPre=+/usr/local/sbin/dbzfs-fence-check\n" in text
    assert fencing.dropin_path("mariadb.service") == "/etc/systemd/system/mariadb.service.d/dbzfs-fence.conf"


def test_mariadb_client_file_quotes_the_password():
    text = fencing.mariadb_client_text('p"w#d')
    assert text.startswith("[client]\nuser = replicator\npassword = ") and "p" in text


def test_a_peer_that_does_not_answer_at_first_is_asked_again_until_the_deadline(fleet, tmp_path, pg_data):
    # The stand-in psql answers only from its second call on: the fence waits for it and refuses.
    text = script(fleet, "postgresql", "pg1", data_directory=str(pg_data), wait=10)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    count = tmp_path / "calls"
    (bin_dir / "psql").write_text(
        f"#!/bin/bash\necho x >> {count}\n[ $(wc -l < {count}) -ge 2 ] && echo off\nexit 0\n"
    )
    (bin_dir / "psql").chmod(0o755)
    (tmp_path / "fence").write_text(text.replace("sleep 2", "sleep 0.1"))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    r = subprocess.run(["bash", str(tmp_path / "fence")], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 1 and "takes writes" in r.stderr


def test_the_fence_waits_45_s_for_peers_by_default(fleet):
    assert "deadline=$((SECONDS + 45))" in render.render(
        "fence-check.sh.j2",
        render.fence_context(*(lambda ms: (ms[0], ms))(configs(fleet, "postgresql"))),
    )


REFUSED = {
    "psql": 'psql: error: connection to server at \\"10.99.0.22\\", port 5432 failed: Connection refused',
    "mariadb": "ERROR 2002 (HY000): Can\\'t connect to server on \\'10.99.0.12\\' (115)",
}
TIMED_OUT = {
    "psql": 'psql: error: connection to server at \\"10.99.0.22\\", port 5432 failed: timeout expired',
    "mariadb": "ERROR 2002 (HY000): Can\\'t connect to server on \\'10.99.0.12\\' (110)",
}


# A primary of each engine, its client and its one peer (address, the answer "takes writes").
PRIMARIES = [
    ("postgresql", "pg1", "psql", "10.99.0.22", "off"),
    ("mariadb", "db1", "mariadb", "10.99.0.12", "0"),
]


def primary_context(tmp_path, pg_data, engine):
    """What the fence check of a server about to start as a primary reads."""
    if engine == "postgresql":
        return {"data_directory": str(pg_data)}  # no standby.signal
    role = tmp_path / "91-dbzfs-role.cnf"
    role.write_text("[mysqld]\nread_only = OFF\n")
    return {"role_config": str(role)}


@pytest.mark.parametrize("engine, name, client, peer, writable", PRIMARIES)
def test_a_peer_that_refuses_connections_is_passed_over_at_once(
    fleet, tmp_path, pg_data, engine, name, client, peer, writable
):
    # The first converge starts the primary before its replicas have a server: no 45 s wait.
    context = primary_context(tmp_path, pg_data, engine)
    refused = run(tmp_path, script(fleet, engine, name, wait=20, **context), client, {peer: REFUSED[client]})
    assert (
        refused.returncode == 0 and "refuses connections: no server runs there; passed over" in refused.stderr
    )
    timed_out = script(fleet, engine, name, wait=1, **context)
    r = run(tmp_path, timed_out.replace("sleep 2", "sleep 0.1"), client, {peer: TIMED_OUT[client]})
    assert r.returncode == 0 and "gave no answer within 1 s; passed over" in r.stderr


@pytest.mark.parametrize("engine, name, client, peer, writable", PRIMARIES)
def test_a_warning_on_stderr_does_not_hide_a_peer_that_takes_writes(
    fleet, tmp_path, pg_data, engine, name, client, peer, writable
):
    text = script(fleet, engine, name, **primary_context(tmp_path, pg_data, engine))
    r = run(tmp_path, text, client, {peer: f"WARNING: noise >&2; echo {writable}"})
    assert r.returncode == 1 and "takes writes" in r.stderr
