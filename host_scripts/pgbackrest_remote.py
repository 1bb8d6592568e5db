#!/usr/bin/python3
"""The forced command of pgBackRest's ssh keys (authorized_keys command=, roles/pgbackrest.py).

The other side's pgBackRest asks for its remote (`pgbackrest [--option=value ...] COMMAND:remote`,
in SSH_ORIGINAL_COMMAND); that alone runs, from its argument list (no shell), with the options
that point at files (config, repository, lock, log and spool paths) refused unless they name what
this host's own pgbackrest.conf says. Anything else, a shell or another program, is refused: a
database host's key opens pgBackRest's protocol on the backup host, never a shell where every
host's copies are. Standard library only.
"""

from __future__ import annotations

import os
import re
import shlex
import sys

PROGRAM = "/usr/bin/pgbackrest"
CONF = "/etc/pgbackrest.conf"
REMOTE_COMMAND = re.compile(r"^[a-z][a-z-]*:remote$")
OPTION = re.compile(r"^--([a-z][a-z0-9-]*)(?:=(.*))?$", re.DOTALL)
# Options naming a place on this host: only the values this host sets for itself pass.
PATH_OPTIONS = re.compile(
    r"^(config|config-path|config-include-path|repo\d*-path|lock-path|log-path|spool-path|cmd-ssh)$"
)
ALLOWED_PATHS = {"config": {CONF}}


def refusal(original: str | None) -> str | None:
    """Why the command is refused, None when it is pgBackRest's remote."""
    if not original:
        return "no command: this key runs pgBackRest's remote only"
    try:
        argv = shlex.split(original)
    except ValueError as exc:
        return f"cannot parse the command ({exc})"
    if not argv or os.path.basename(argv[0]) != "pgbackrest":
        return f"not pgbackrest: {argv[0] if argv else ''!r}"
    if len(argv) < 2 or not REMOTE_COMMAND.match(argv[-1]):
        return "not a pgBackRest remote (COMMAND:remote last)"
    for arg in argv[1:-1]:
        match = OPTION.match(arg)
        if not match:
            return f"not an option: {arg!r}"
        name, value = match.group(1), match.group(2)
        if PATH_OPTIONS.match(name) and value not in ALLOWED_PATHS.get(name, set()):
            return f"option --{name} may not be set from the other side"
    return None


def main() -> int:
    original = os.environ.get("SSH_ORIGINAL_COMMAND")
    why = refusal(original)
    if why is not None:
        print(f"dbzfs pgbackrest_remote: refused: {why}", file=sys.stderr)
        return 1
    argv = shlex.split(original)
    os.execv(PROGRAM, [PROGRAM, *argv[1:]])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
