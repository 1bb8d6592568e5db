"""
Operations both engine roles (and the runbooks) share: a config file rendered here, checked on the
host by the program that will read it before it replaces the live one; a file holding a secret;
commands fed from a root-only tmpfs directory; systemd reloading changed unit files; and the
no-op that keeps a step's place on hosts it is not for.

Secrets never appear on a command line: files that hold one are uploaded over SFTP into
PRIVATE_DIR (tmpfs, root only) and read from there.
"""

from __future__ import annotations

import hashlib
import io
import os
import shlex
from collections.abc import Generator

from pyinfra import host, logger, state
from pyinfra.api import FileUploadCommand, HiddenValue, OperationError, QuoteString, StringCommand, operation
from pyinfra.context import ctx_state
from pyinfra.facts.files import FileContents
from pyinfra.operations.util.files import generate_color_diff

from facts.config_files import ConfigFilesState, ConfigFileState
from facts.postgresql import SystemdNeedsReload

PRIVATE_DIR = "/run/dbzfs"  # tmpfs, root only: secret-bearing files exist only here, briefly
CHECK_DIR = "/run/dbzfs-check"  # tmpfs, world-readable: candidate config files being checked


def reveal(secret: HiddenValue | str) -> str:
    """A secret's text, from a pyinfra HiddenValue (what the roles pass) or a plain string."""
    return secret.unmask() if isinstance(secret, HiddenValue) else str(secret)


def private_upload(content: str, name: str) -> tuple[list[StringCommand | FileUploadCommand], str]:
    """Commands that put `content` into PRIVATE_DIR/name (a root-only directory before the file
    exists, so the file is never readable by others whatever its mode), and the path."""
    path = f"{PRIVATE_DIR}/{name}"
    return [
        StringCommand("install", "-d", "-m", "0700", "-o", "root", "-g", "root", PRIVATE_DIR),
        FileUploadCommand(io.BytesIO(content.encode()), path, remote_temp_filename=f"{path}.part"),
    ], path


@operation()
def not_on_this_host(reason: str = "", **_ignored) -> Generator[StringCommand, None, None]:
    """Stands in for a step that is not for this host (see roles.engine.step)."""
    host.noop(reason or "not for this host")
    yield from ()


@operation()
def unit_files_loaded(unit_name: str) -> Generator[StringCommand, None, None]:
    """systemctl daemon-reload when systemd holds an older copy of the unit's files (decided by
    systemd itself, so a dry run proposes nothing once they are loaded)."""
    if host.get_fact(SystemdNeedsReload, unit=unit_name):
        yield StringCommand("systemctl", "daemon-reload")
    else:
        host.noop(f"systemd has loaded the current files of {unit_name}")


def _show_diff(path: str, exists: bool, content: str) -> None:
    current = [line + "\n" for line in (host.get_fact(FileContents, path=path) or [])] if exists else []
    host.log(f"Will {'modify' if exists else 'create'} {path}", logger.info)
    for line in generate_color_diff(current, content.splitlines(keepends=True)):
        logger.info("  %s", line)
    logger.info("")


@operation()
def config_file(
    path: str,
    content: str,
    user: str = "root",
    group: str = "root",
    mode: str = "644",
    check: str | None = None,
    checker: str | None = None,
) -> Generator[StringCommand | FileUploadCommand, None, None]:
    """
    A config file with exactly `content` (rendered by roles/render.py, the code path the unit
    tests render with), its owner and mode. With ``check``, a changed file is first uploaded to
    CHECK_DIR and checked there by the host's own program (the way Ansible's ``validate:`` works):
    ``check`` is a shell command with ``{path}`` for the candidate file; only when it succeeds does
    the candidate replace `path` (an atomic rename), otherwise the old file stays and the
    operation fails with the checker's words. Without `checker` on the host (a fresh host, before
    the package that brings it) the file is placed unchecked: nothing reads it yet, and
    validation checked the settings offline against the same server version.

    + path: the file on the host
    + content: the text it must hold
    + user, group, mode: its owner and mode (octal string)
    + check: e.g. ``"mariadbd --defaults-file={path} --verbose --help"``
    + checker: the program ``check`` runs (looked up on the host's PATH or as a path)
    """
    live = host.get_fact(ConfigFileState, path=path, checker=checker if check else None)
    commands = list(_placed(path, content, user, group, mode, live, check, checker))
    if not commands:
        host.noop(f"{path} is as rendered")
    yield from commands


@operation()
def config_files(files: dict[str, str], modes: dict[str, str] | None = None) -> Generator:
    """
    Several root-owned files with exactly their `content`, read with one command: what
    `config_file` does for each (without a check), for files nothing checks before use, such as
    systemd units and drop-ins.

    + files: path -> text
    + modes: path -> mode (octal string) where not 644
    """
    modes = modes or {}
    live = host.get_fact(ConfigFilesState, paths=list(files))
    unread = [path for path in files if path not in live]
    if unread:
        raise OperationError(f"could not read the state of {', '.join(unread)}")
    commands = [
        command
        for path, content in files.items()
        for command in _placed(path, content, "root", "root", modes.get(path, "644"), live[path], None, None)
    ]
    if not commands:
        host.noop(f"{', '.join(files)}: as rendered")
    yield from commands


def _placed(
    path: str,
    content: str,
    user: str,
    group: str,
    mode: str,
    live: dict,
    check: str | None,
    checker: str | None,
) -> Generator[StringCommand | FileUploadCommand, None, None]:
    """Commands that make `path` hold `content` with its owner and mode, given its live state
    (ConfigFileState), checked by `check` first when the checker is there; none when it does."""
    wanted = hashlib.sha256(content.encode()).hexdigest()
    if live["exists"] and live["sha256"] == wanted:
        if (live["user"], live["group"], live["mode"]) == (user, group, int(mode)):
            return
        yield StringCommand("chown", f"{user}:{group}", QuoteString(path))
        yield StringCommand("chmod", mode, QuoteString(path))
        return
    if ctx_state.isset() and state.config.DIFF:
        _show_diff(path, live["exists"], content)
    name = os.path.basename(path)
    candidate = f"{CHECK_DIR}/{name}"
    yield StringCommand(
        "install",
        "-d",
        "-m",
        "0755",
        "-o",
        "root",
        "-g",
        "root",
        CHECK_DIR,
        "&&",
        # Created when missing; an existing one keeps its mode (install -d would reset it: a
        # 0700 ~/.ssh made 0755 at every converge).
        "{",
        "test",
        "-d",
        QuoteString(os.path.dirname(path)),
        "||",
        "install",
        "-d",
        "-m",
        "0755",
        QuoteString(os.path.dirname(path)),
        ";",
        "}",
    )
    yield FileUploadCommand(io.BytesIO(content.encode()), candidate, remote_temp_filename=f"{candidate}.part")
    place = [
        "chown",
        f"{user}:{group}",
        QuoteString(candidate),
        "&&",
        "chmod",
        mode,
        QuoteString(candidate),
        "&&",
        "mv",
        "-f",
        QuoteString(candidate),
        QuoteString(path),
    ]
    if check and live["checker"]:
        command = check.format(path=shlex.quote(candidate))
        yield StringCommand(
            "out=$(",
            command,
            "2>&1 >/dev/null",
            ");",
            "rc=$?;",
            "if",
            "[",
            "$rc",
            "-ne",
            "0",
            "]",
            "||",
            "printf",
            "'%s\\n'",
            '"$out"',
            "|",
            "grep",
            "-q",
            "'\\[ERROR\\]';",
            "then",
            "printf",
            QuoteString(f"{checker} refuses the new {name}; {path} is left as it was:\\n"),
            ">&2;",
            "printf",
            "'%s\\n'",
            '"$out"',
            ">&2;",
            "rm",
            "-f",
            QuoteString(candidate),
            ";",
            "exit",
            "1;",
            "fi;",
            *place,
            _shell_executable="bash",
        )
    else:
        if check:
            logger.info(
                f"{host.print_prefix}{checker} is not installed yet: {path} placed as "
                "rendered (its settings were checked offline)"
            )
        yield StringCommand(*place)


@operation()
def secret_file(
    path: str, content: HiddenValue | str, user: str, group: str, mode: str = "600"
) -> Generator[StringCommand | FileUploadCommand, None, None]:
    """
    A file holding a secret (a pyinfra HiddenValue, masked in pyinfra's output), compared by
    SHA-256 (never diffed or printed), created with its mode and owner in a root-only directory
    and then moved into place.
    """
    content = reveal(content)
    live = host.get_fact(ConfigFileState, path=path)
    wanted = hashlib.sha256(content.encode()).hexdigest()
    if live["exists"] and live["sha256"] == wanted:
        if (live["user"], live["group"], live["mode"]) == (user, group, int(str(mode))):
            host.noop(f"{path} holds the secret, mode {mode}, owner {user}")
            return
        yield StringCommand("chown", f"{user}:{group}", QuoteString(path))
        yield StringCommand("chmod", str(mode), QuoteString(path))
        return
    if not live["exists"] and not content:
        raise OperationError(f"{path}: no secret to write")
    commands, tmp = private_upload(content, os.path.basename(path))
    yield from commands
    yield StringCommand(
        "chown",
        f"{user}:{group}",
        QuoteString(tmp),
        "&& chmod",
        str(mode),
        QuoteString(tmp),
        "&& mv -f",
        QuoteString(tmp),
        QuoteString(path),
    )
