"""tests/labkit.env_number: the e2e tests' numeric settings from the environment."""

import pytest

from tests.labkit import env_number


def test_unset_or_empty_is_the_default(monkeypatch):
    monkeypatch.delenv("DBZFS_X", raising=False)
    assert env_number("DBZFS_X", 3) == 3
    monkeypatch.setenv("DBZFS_X", "")
    assert env_number("DBZFS_X", 3) == 3
    monkeypatch.setenv("DBZFS_X", "7")
    assert env_number("DBZFS_X", 3) == 7
    monkeypatch.setenv("DBZFS_X", "2.5")
    assert env_number("DBZFS_X", None, kind=float) == 2.5


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("x", "DBZFS_X='x': not a whole number >= 1; unset it for the default (3)"),
        ("0", "DBZFS_X='0': not a whole number >= 1; unset it for the default (3)"),
    ],
)
def test_a_bad_value_fails_naming_the_variable_and_the_value(monkeypatch, raw, message):
    monkeypatch.setenv("DBZFS_X", raw)
    with pytest.raises(pytest.fail.Exception) as e:
        env_number("DBZFS_X", 3, minimum=1)
    assert str(e.value) == message
