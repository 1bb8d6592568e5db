"""A host's apt sources moved from one Debian release to the next, for the release upgrade
(issue 47's runbook). Pure: text in, text and findings out; the runbook reads the files and writes
what this returns.

Debian's release notes: every source of Debian's archive names the new release's suites
(bookworm -> trixie, bookworm-updates -> trixie-updates, bookworm-security -> trixie-security),
in the one-line format (`/etc/apt/sources.list`, `*.list`) and in deb822 (`*.sources`, `Suites:`).
Backports of the old release are left out: nothing on the new release comes from them (Debian 13
takes ZFS from its own contrib; the deploy removes dbzfs' backports file). A source that is not
Debian's archive (a vendor's, an operator's mirror not declared as one, the prebuilt ZFS module
repository) is never rewritten: it is reported, and the runbook refuses until the operator says
what it becomes, since its suite naming is its owner's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from model.releases import Release

# The archives that are Debian's own: their suites follow Debian's names.
DEBIAN_ARCHIVES = (
    "http://deb.debian.org/debian",
    "https://deb.debian.org/debian",
    "http://deb.debian.org/debian-security",
    "https://deb.debian.org/debian-security",
    "http://security.debian.org/debian-security",
    "https://security.debian.org/debian-security",
)
_SUFFIXES = ("", "-updates", "-security", "-proposed-updates")


@dataclass
class Moved:
    """The new text of one file, and what the runbook reports about it."""

    text: str
    changed: bool = False
    dropped: list[str] = field(default_factory=list)  # lines or stanzas left out (old backports)
    foreign: list[str] = field(default_factory=list)  # sources not Debian's: the operator decides


def _normal(uri: str) -> str:
    return uri.rstrip("/")


def is_debian(uri: str, mirrors: tuple[str, ...] = ()) -> bool:
    """Whether a source's URI is Debian's archive (or a mirror of it the operator declared)."""
    return _normal(uri) in {_normal(u) for u in (*DEBIAN_ARCHIVES, *mirrors)}


def suite_for(suite: str, old: Release, new: Release) -> str | None:
    """The new release's name of one of the old release's suites; None: left out (backports);
    the suite itself when it is not the old release's (already moved, or another)."""
    if suite == f"{old.codename}-backports":
        return None
    for suffix in _SUFFIXES:
        if suite == old.codename + suffix:
            return new.codename + suffix
    return suite


_ONE_LINE = re.compile(
    r"^(?P<type>deb(?:-src)?)\s+(?P<options>\[[^\]]*\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)(?P<rest>.*)$"
)


def move_list(text: str, old: Release, new: Release, mirrors: tuple[str, ...] = ()) -> Moved:
    """A one-line-format file (sources.list, *.list) moved to the new release."""
    out, moved = [], Moved(text)
    for line in text.splitlines(keepends=True):
        match = _ONE_LINE.match(line.strip())
        if not match or line.lstrip().startswith("#"):
            out.append(line)
            continue
        uri, suite = match["uri"], match["suite"]
        if not is_debian(uri, mirrors):
            if old.codename in suite:
                moved.foreign.append(line.strip())
            out.append(line)
            continue
        target = suite_for(suite, old, new)
        if target is None:
            moved.dropped.append(line.strip())
            moved.changed = True
            continue
        if target != suite:
            start, end = match.span("suite")
            stripped = line.strip()
            indent = line[: len(line) - len(line.lstrip())]
            newline = line[len(line.rstrip("\n")) :]
            line = indent + stripped[:start] + target + stripped[end:] + newline
            moved.changed = True
        out.append(line)
    moved.text = "".join(out)
    return moved


def move_deb822(text: str, old: Release, new: Release, mirrors: tuple[str, ...] = ()) -> Moved:
    """A deb822 file (*.sources) moved to the new release: each stanza's Suites, when its URIs are
    Debian's; a stanza left with no suite is left out."""
    moved = Moved(text)
    stanzas = re.split(r"\n\s*\n", text.strip("\n")) if text.strip() else []
    out = []
    for stanza in stanzas:
        fields = _fields(stanza)
        uris = fields.get("uris", "").split()
        suites = fields.get("suites", "").split()
        if not uris or not suites:
            out.append(stanza)
            continue
        if not all(is_debian(u, mirrors) for u in uris):
            if any(old.codename in s for s in suites):
                moved.foreign.append(" ".join(uris) + " " + " ".join(suites))
            out.append(stanza)
            continue
        targets = [t for t in (suite_for(s, old, new) for s in suites) if t is not None]
        if targets == suites:
            out.append(stanza)
            continue
        moved.changed = True
        if not targets:
            moved.dropped.append(" ".join(uris) + " " + " ".join(suites))
            continue
        if len(targets) < len(suites):
            moved.dropped.append(
                " ".join(uris) + " " + " ".join(s for s in suites if suite_for(s, old, new) is None)
            )
        suites_line = "Suites: " + " ".join(targets)
        out.append(re.sub(r"(?im)^Suites:[ \t]*.*$", lambda _, line=suites_line: line, stanza, count=1))
    moved.text = "\n\n".join(out) + ("\n" if out else "")
    return moved


def _fields(stanza: str) -> dict[str, str]:
    """A deb822 stanza's fields (lower-case names; continuation lines joined), comments skipped."""
    fields: dict[str, str] = {}
    name = None
    for line in stanza.splitlines():
        if line.startswith("#"):
            continue
        if line[:1] in (" ", "\t") and name:
            fields[name] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if sep:
            name = key.strip().lower()
            fields[name] = value.strip()
    return fields
