"""A system account the way Debian's packages create theirs, so that the storage role can own the
datasets' mountpoints before the database package is installed (the package then finds it)."""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import OperationError, QuoteString, StringCommand, operation

from facts.accounts import SystemAccount


@operation()
def system_account(account: str, home: str, shell: str) -> Generator[StringCommand, None, None]:
    """
    A system user with a group of its own name (``adduser --system --group``, as mariadb-server's
    and postgresql-common's maintainer scripts do), its home directory not created.

    + account: user and group name
    + home, shell: its passwd fields

    An existing user whose primary group is not its own group is reported, never changed.
    """
    name = account
    live = host.get_fact(SystemAccount, account=name)
    user, group = live["user"], live["group"]
    if user is None:
        yield StringCommand(
            "adduser",
            "--system",
            "--group",
            "--quiet",
            "--no-create-home",
            "--disabled-password",
            "--home",
            QuoteString(home),
            "--shell",
            QuoteString(shell),
            QuoteString(name),
        )
        return
    if group is None or user["gid"] != group["gid"]:
        raise OperationError(
            f"user {name} exists but its primary group is not the group {name}; "
            "fix the account by hand (the packages expect that group)"
        )
    changes = []
    if user["home"] != home:
        changes += ["-d", QuoteString(home)]
    if user["shell"] != shell:
        changes += ["-s", QuoteString(shell)]
    if changes:
        yield StringCommand("usermod", *changes, QuoteString(name))
    else:
        host.noop(f"system account {name} exists (home {home}, shell {shell})")
