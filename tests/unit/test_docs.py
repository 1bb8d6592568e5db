"""The README is a first screen and docs/ holds the rest: the README stays short and keeps the
commands CI and the lab run, every relative link resolves, every runbook has its page linked from
the README's index, and no commit hash stands in for a version in the user documentation
(measurement history with its commits belongs in CHANGELOG.md and tests/e2e/README.md)."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
MAX_README_LINES = 260

# [text](target) and ![alt](target); a target ends at whitespace or ')' (an optional "title" after).
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# A word of 7 to 40 hex digits with at least one letter and one digit: a commit hash. Words that
# look like one and are not: key types.
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
NOT_HASHES = {"ed25519"}


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def without_code_blocks(text: str) -> str:
    """The text with fenced code blocks blanked (a link's syntax inside one is not a link)."""
    return re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)


def relative_links(path: Path) -> list[str]:
    targets = LINK.findall(without_code_blocks(path.read_text()))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_the_readme_is_a_first_screen():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines: move detail to docs/"


@pytest.mark.parametrize("command", ["./dbzfs test", "./dbzfs converge"])
def test_the_readme_gives_the_lab_commands(command):
    assert command in README.read_text(), f"README.md lost {command!r} (CI runs ./dbzfs test)"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path):
    broken = [
        target for target in relative_links(path) if not (path.parent / target.split("#", 1)[0]).exists()
    ]
    assert not broken, f"{path.relative_to(REPO)}: links to missing files: {broken}"


def test_every_runbook_has_a_page_linked_from_the_readme():
    readme_links = {(REPO / t.split("#", 1)[0]).resolve() for t in relative_links(README)}
    runbooks = sorted((REPO / "runbooks").glob("*.py"))
    assert runbooks
    for runbook in runbooks:
        page = DOCS / "runbooks" / f"{runbook.stem}.md"
        assert page.exists(), f"{runbook.relative_to(REPO)} has no page {page.relative_to(REPO)}"
        assert page.resolve() in readme_links, f"README.md's index does not link {page.relative_to(REPO)}"


@pytest.mark.parametrize(
    "path",
    [p for p in markdown_files() if DOCS / "examples" not in p.parents],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_no_commit_hash_in_user_docs(path):
    found = sorted(set(HASH.findall(path.read_text())) - NOT_HASHES)
    assert not found, (
        f"{path.relative_to(REPO)} names commits {found}: versions are VERSION's; measurement "
        "history with its commits goes to CHANGELOG.md or tests/e2e/README.md"
    )
