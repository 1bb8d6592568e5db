"""The operations both engine roles share (operations/common.py), against fact stubs: config
files checked by the host's own program before they replace the live one, secret files, systemd
reloads and the no-op that keeps a step's place."""

import hashlib

from pyinfra.api import FileUploadCommand, HiddenValue
from pyinfra.context import ctx_host

from facts.config_files import ConfigFilesState, ConfigFileState
from facts.postgresql import SystemdNeedsReload
from operations import common

from tests.unit.fact_stubs import FakeHost, run_operation

CNF = "/etc/mysql/mariadb.conf.d/90-dbzfs.cnf"
TEXT = "[mysqld]\nserver_id = 1\n"
CHECK = "/usr/sbin/mariadbd --defaults-file={path} --verbose --help"


def live(text=None, user="root", group="root", mode=644, checker=True):
    if text is None:
        return {ConfigFileState: {"exists": False, "checker": checker}}
    return {
        ConfigFileState: {
            "exists": True,
            "checker": checker,
            "user": user,
            "group": group,
            "mode": mode,
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
        }
    }


def run(op, facts, **kwargs):
    host = FakeHost(facts)
    with ctx_host.use(host):
        objects = list(op._inner(**kwargs))
    uploads = []
    for c in objects:
        if isinstance(c, FileUploadCommand):
            c.src.seek(0)
            uploads.append((c.dest, c.src.read().decode()))
    return [str(c) for c in objects], uploads, host


def test_config_file_as_rendered_is_no_change():
    commands, uploads, host = run(
        common.config_file, live(TEXT), path=CNF, content=TEXT, check=CHECK, checker="/usr/sbin/mariadbd"
    )
    assert commands == [] and host.noops == [f"{CNF} is as rendered"]


def test_config_file_owner_and_mode_fixed_without_upload():
    commands, uploads, _ = run(common.config_file, live(TEXT, user="mysql", mode=600), path=CNF, content=TEXT)
    assert commands == [f"chown root:root {CNF}", f"chmod 644 {CNF}"] and uploads == []


def test_changed_config_is_checked_by_the_hosts_server_before_it_replaces_the_old_one():
    commands, uploads, _ = run(
        common.config_file,
        live("[mysqld]\nserver_id = 2\n"),
        path=CNF,
        content=TEXT,
        check=CHECK,
        checker="/usr/sbin/mariadbd",
    )
    candidate = f"{common.CHECK_DIR}/90-dbzfs.cnf"
    assert uploads == [(candidate, TEXT)]
    check = commands[-1]
    # The candidate is checked, and moved into place only after the check passed (&& chain in
    # the branch taken when the checker accepted it); a refusal exits 1 with the old file kept.
    assert f"/usr/sbin/mariadbd --defaults-file={candidate} --verbose --help" in check
    assert check.index("--defaults-file") < check.index(f"mv -f {candidate} {CNF}")
    assert "refuses the new 90-dbzfs.cnf" in check and "exit 1" in check
    assert check.index("exit 1") < check.index(f"mv -f {candidate} {CNF}")


def test_config_on_a_host_without_the_server_yet_is_placed_unchecked():
    commands, uploads, _ = run(
        common.config_file,
        live(checker=False),
        path=CNF,
        content=TEXT,
        check=CHECK,
        checker="/usr/sbin/mariadbd",
    )
    assert uploads == [(f"{common.CHECK_DIR}/90-dbzfs.cnf", TEXT)]
    assert "mariadbd" not in " ".join(commands)
    assert commands[-1].endswith(f"mv -f {common.CHECK_DIR}/90-dbzfs.cnf {CNF}")


def test_secret_file_uploaded_privately_then_moved():
    secret = "*:*:replication:replicator:s3cret\n"
    commands, uploads, _ = run(
        common.secret_file,
        live(),
        path="/var/lib/postgresql/.pgpass",
        content=HiddenValue(secret),
        user="postgres",
        group="postgres",
    )
    assert uploads == [(f"{common.PRIVATE_DIR}/.pgpass", secret)]
    assert commands[0] == f"install -d -m 0700 -o root -g root {common.PRIVATE_DIR}"
    assert commands[-1] == (
        "chown postgres:postgres /run/dbzfs/.pgpass && chmod 600 "
        "/run/dbzfs/.pgpass && mv -f /run/dbzfs/.pgpass /var/lib/postgresql/.pgpass"
    )
    assert all("s3cret" not in c for c in commands)


def test_secret_file_unchanged_is_compared_by_hash():
    commands, _, host = run(
        common.secret_file,
        live("x:y\n", "postgres", "postgres", 600),
        path="/p",
        content="x:y\n",
        user="postgres",
        group="postgres",
    )
    assert commands == [] and host.noops


def test_secret_file_wrong_mode_fixed_without_upload():
    commands, uploads, _ = run(
        common.secret_file,
        live("x:y\n", "postgres", "postgres", 644),
        path="/p",
        content="x:y\n",
        user="postgres",
        group="postgres",
    )
    assert commands == ["chown postgres:postgres /p", "chmod 600 /p"] and uploads == []


def test_daemon_reload_only_when_systemd_holds_old_files():
    commands, _ = run_operation(common.unit_files_loaded, {SystemdNeedsReload: True}, "mariadb.service")
    assert commands == ["systemctl daemon-reload"]
    commands, host = run_operation(common.unit_files_loaded, {SystemdNeedsReload: False}, "mariadb.service")
    assert commands == [] and host.noops


def test_skip_is_a_noop():
    commands, host = run_operation(common.not_on_this_host, {}, reason="not a standby", path="/x")
    assert commands == [] and host.noops == ["not a standby"]


def test_config_file_state_fact_reads_one_command():
    fact = ConfigFileState()
    command = str(fact.command("/etc/x.conf", "/usr/sbin/mariadbd"))
    assert "command -v /usr/sbin/mariadbd" in command and "sha256sum" in command and "stat" in command
    assert fact.process(["checker=1", "stat=root root 644", "sha256=" + "a" * 64, "end=1"]) == {
        "exists": True,
        "checker": True,
        "user": "root",
        "group": "root",
        "mode": 644,
        "sha256": "a" * 64,
    }
    assert fact.process(["end=1"]) == {"exists": False, "checker": False}


# --- several files read with one command -------------------------------------------------------

UNIT = "/etc/systemd/system/x.service.d/dbzfs.conf"
SCRIPT = "/usr/local/lib/dbzfs/x.py"


def files_live(**states):
    return {
        ConfigFilesState: {
            path: live(text, mode=mode)[ConfigFileState] for path, (text, mode) in states.items()
        }
    }


def test_config_files_all_as_rendered_is_one_read_and_no_change():
    facts = files_live(**{UNIT: ("a\n", 644), SCRIPT: ("b\n", 755)})
    commands, uploads, host = run(
        common.config_files, facts, files={UNIT: "a\n", SCRIPT: "b\n"}, modes={SCRIPT: "755"}
    )
    assert commands == [] and uploads == [] and len(host.fact_calls) == 1
    assert host.noops == [f"{UNIT}, {SCRIPT}: as rendered"]


def test_config_files_places_only_what_differs():
    facts = files_live(**{UNIT: ("old\n", 644), SCRIPT: ("b\n", 644)})
    commands, uploads, _ = run(
        common.config_files, facts, files={UNIT: "new\n", SCRIPT: "b\n"}, modes={SCRIPT: "755"}
    )
    assert uploads == [(f"{common.CHECK_DIR}/dbzfs.conf", "new\n")]
    assert commands[-1] == f"chmod 755 {SCRIPT}"
    assert any(c.endswith(f"mv -f {common.CHECK_DIR}/dbzfs.conf {UNIT}") for c in commands)


def test_config_files_state_fact_splits_per_path():
    fact = ConfigFilesState()
    command = str(fact.command([UNIT, SCRIPT]))
    assert command.count("sha256sum") == 2 and command.endswith("echo done=1")
    out = [
        f"path={UNIT}",
        "stat=root root 644",
        "sha256=" + "a" * 64,
        "end=1",
        f"path={SCRIPT}",
        "end=1",
        "done=1",
    ]
    state = fact.process(out)
    assert state[UNIT]["exists"] and state[UNIT]["mode"] == 644
    assert state[SCRIPT] == {"exists": False, "checker": False}
