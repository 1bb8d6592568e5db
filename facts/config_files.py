"""A managed file's owner, mode and checksum, and whether the program that checks it is there, read
with one command (pyinfra's files.put needs two: File, then Sha256File)."""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand


class ConfigFileState(FactBase):
    """
    ``None`` when the file does not exist, else its owner, group, mode and SHA-256, plus whether
    ``checker`` (a program name or path) can run on the host.

    .. code:: python

        {"user": "root", "group": "root", "mode": 644, "sha256": "9f86d0...", "checker": True}
        # or, for a file that does not exist yet: {"checker": False} with "exists": False
    """

    def command(self, path: str, checker: str | None = None) -> StringCommand:
        # One shell line, phrase by phrase: is the checker there, then (for an existing file)
        # owner, group and mode, then the SHA-256; "end=1" marks a complete answer.
        probe = ["command", "-v", QuoteString(checker), ">/dev/null", "2>&1", "&&", "echo", "checker=1;"]
        exists = ["if", "[", "-f", QuoteString(path), "];", "then"]
        stat = ["stat", "-c", "'stat=%U %G %a'", QuoteString(path), "&&"]
        sha256 = ["printf", "'sha256=%s\\n'", '"$(sha256sum <', QuoteString(path), '| cut -c1-64)";']
        return StringCommand(*(probe if checker else []), *exists, *stat, *sha256, "fi;", "echo", "end=1")

    def process(self, output: list[str]) -> dict:
        fields = dict(line.split("=", 1) for line in output if "=" in line)
        state = {"exists": "stat" in fields, "checker": fields.get("checker") == "1"}
        if state["exists"]:
            user, group, mode = fields["stat"].split()
            state.update(user=user, group=group, mode=int(mode), sha256=fields.get("sha256", ""))
        return state


class ConfigFilesState(FactBase):
    """
    ConfigFileState of several files (no checker) with one command: path -> state.

    .. code:: python

        {"/etc/a.conf": {"exists": True, "checker": False, "user": "root", ...},
         "/etc/b.conf": {"exists": False, "checker": False}}
    """

    def command(self, paths: list[str]) -> StringCommand:
        parts = []
        for path in paths:
            one = ConfigFileState().command(path)
            parts += ["echo", QuoteString(f"path={path}"), ";", one, ";"]
        return StringCommand(*parts, "echo", "done=1")

    def process(self, output: list[str]) -> dict[str, dict]:
        files: dict[str, list[str]] = {}
        current: list[str] | None = None
        for line in output:
            if line.startswith("path="):
                current = files.setdefault(line[len("path=") :], [])
            elif current is not None:
                current.append(line)
        return {path: ConfigFileState().process(lines) for path, lines in files.items()}
