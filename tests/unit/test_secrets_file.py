"""The secrets file (model/secrets.py): a mistake in it is one message naming the file and the line,
and never any of its content (YAML's own messages quote the file: they would print secrets)."""

import os

import pytest

from model import secrets
from model.secrets import SecretsError

SECRET = "hunter2-Xq9"  # appears in every bad file below: must never appear in a message
FIX = "Fix: one 'key: secret' per line, e.g. replication_password: '...' (quote secrets holding : # ' or \")"


def write(tmp_path, text, mode=0o600):
    path = tmp_path / "secrets.yml"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def load(path):
    return secrets.load({"DBZFS_SECRETS_FILE": str(path)})


CASES = {
    "YAML syntax error (unclosed quote)": (
        f'replication_password: "{SECRET}\napp_password: x\n',
        "line 3, column 1: not valid YAML",
    ),
    "YAML syntax error (a second colon)": (
        f"replication_password: {SECRET}: x\n",
        "line 1, column 34: not valid YAML",
    ),
    "a tab indents a key": (f"\treplication_password: {SECRET}\n", "line 1, column 1: not valid YAML"),
    "an undefined alias": (f"replication_password: *{SECRET}\n", "line 1, column 23: not valid YAML"),
    "two documents": (f"a: {SECRET}\n---\nb: x\n", "line 2, column 1: not valid YAML"),
    "a list, not a mapping": (
        f"- {SECRET}\n",
        "line 1, column 1: holds a list, not a mapping of key: secret",
    ),
    "a single value, not a mapping": (
        f"{SECRET}\n",
        "line 1, column 1: holds a single value, not a mapping of key: secret",
    ),
    "a nested mapping": (
        f"app_password: x\nreplication_password:\n  {SECRET}: x\n",
        "line 3, column 3: the value is a mapping, not one secret",
    ),
    "a nested list": (
        f"replication_password: [{SECRET}]\n",
        "line 1, column 23: the value is a list, not one secret",
    ),
    "a non-string key": (
        f"123: {SECRET}\n",
        "line 1, column 1: a key must be a name (text), e.g. replication_password",
    ),
    "a list as key": (
        f"? [{SECRET}]\n: x\n",
        "line 1, column 3: a key must be a name (text), e.g. replication_password",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_secrets_file(case, tmp_path):
    text, where = CASES[case]
    path = write(tmp_path, text)
    with pytest.raises(SecretsError) as err:
        load(path)
    message = str(err.value)
    assert message == f"secrets file {path} {where}. {FIX}"
    assert SECRET not in message and "hunter" not in message


def test_a_key_twice_names_both_lines(tmp_path):
    path = write(tmp_path, f"replication_password: x\napp: y\nreplication_password: {SECRET}\n")
    with pytest.raises(SecretsError) as err:
        load(path)
    assert str(err.value) == (
        f"secrets file {path} line 3, column 1: a key repeats the one on line 1. Fix: keep one line per key"
    )


def test_not_utf8(tmp_path):
    path = tmp_path / "secrets.yml"
    path.write_bytes(b"replication_password: \xff\xfe" + SECRET.encode())
    os.chmod(path, 0o600)
    with pytest.raises(SecretsError) as err:
        load(path)
    assert str(err.value) == f"secrets file {path}: not UTF-8 text. Fix: save it as UTF-8"


def test_readable_by_others_is_refused(tmp_path):
    path = write(tmp_path, f"replication_password: {SECRET}\n", mode=0o644)
    with pytest.raises(SecretsError, match="readable by others") as err:
        load(path)
    assert SECRET not in str(err.value)


def test_secrets_are_the_text_as_written(tmp_path):
    """YAML would read yes as True, 0123 as 83 (octal) and 1e3 as a float: a secret is text."""
    path = write(tmp_path, "a: yes\nb: 0123\nc: 1.5e3\nd: 'quoted: #'\ne: \"x\\ty\"\nf:\ng: ~\nh: on\n")
    loaded = load(path)
    assert {k: loaded.get(k) for k in "abcdefgh"} == {
        "a": "yes",
        "b": "0123",
        "c": "1.5e3",
        "d": "quoted: #",
        "e": "x\ty",
        "f": None,
        "g": None,
        "h": "on",
    }
    assert "f" not in loaded and "a" in loaded


def test_empty_file_has_no_secrets(tmp_path):
    assert "replication_password" not in load(write(tmp_path, "# nothing yet\n"))


def test_cli_reports_a_malformed_secrets_file_without_content(tmp_path):
    import subprocess
    import sys

    from tests.unit.conftest import REPO

    path = write(tmp_path, f'replication_password: "{SECRET}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBZFS_")}
    env["DBZFS_SECRETS_FILE"] = str(path)
    result = subprocess.run(
        [sys.executable, "-m", "validation", "inventories/prod.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2  # refused
    assert result.stderr == f"error: secrets file {path} line 2, column 1: not valid YAML. {FIX}\n"
    assert SECRET not in result.stdout + result.stderr
