"""The service account the storage role creates before the database package (one getent command,
adduser --system --group as Debian's maintainer scripts do)."""

import pytest
from pyinfra.api import OperationError

from facts.accounts import SystemAccount
from operations.accounts import system_account

from tests.unit.fact_stubs import run_operation

MYSQL = {
    "user": {"uid": 105, "gid": 111, "home": "/nonexistent", "shell": "/bin/false"},
    "group": {"gid": 111},
}


def test_fact_reads_passwd_and_group_in_one_command():
    fact = SystemAccount()
    command = str(fact.command(account="mysql"))
    assert command == "echo user:$(getent passwd mysql ); echo group:$(getent group mysql );"
    assert (
        fact.process(["user:mysql:x:105:111:MySQL Server,,,:/nonexistent:/bin/false", "group:mysql:x:111:"])
        == MYSQL
    )
    assert fact.process(["user:", "group:"]) == {"user": None, "group": None}


def test_missing_account_is_created_like_the_packages_do():
    commands, _ = run_operation(
        system_account,
        {SystemAccount: {"user": None, "group": None}},
        account="mysql",
        home="/nonexistent",
        shell="/bin/false",
    )
    assert commands == [
        "adduser --system --group --quiet --no-create-home --disabled-password "
        "--home /nonexistent --shell /bin/false mysql"
    ]


def test_existing_account_is_no_change():
    commands, host = run_operation(
        system_account, {SystemAccount: MYSQL}, account="mysql", home="/nonexistent", shell="/bin/false"
    )
    assert commands == [] and host.noops


def test_home_and_shell_corrected():
    commands, _ = run_operation(
        system_account, {SystemAccount: MYSQL}, account="mysql", home="/var/lib/mysql", shell="/bin/sh"
    )
    assert commands == ["usermod -d /var/lib/mysql -s /bin/sh mysql"]


def test_account_in_another_group_is_reported_not_changed():
    other = {"user": dict(MYSQL["user"], gid=100), "group": {"gid": 111}}
    with pytest.raises(OperationError, match="primary group is not the group mysql"):
        run_operation(
            system_account, {SystemAccount: other}, account="mysql", home="/nonexistent", shell="/bin/false"
        )
