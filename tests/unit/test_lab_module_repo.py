"""lab/module_repo.py: apt-cacher-ng's copy of the module repository's indexes is removed when it is
not the published one (CI at de59272 was served an older image's trixie index), and the other
releases' module packages are published beside the lab's own."""

from pathlib import Path

from lab import module_repo


def index(root: Path, suite: str, text: str) -> None:
    (root / "dists" / suite).mkdir(parents=True, exist_ok=True)
    (root / "dists" / suite / "InRelease").write_text(text)


def test_a_cached_index_that_is_not_the_published_one_is_stale(tmp_path):
    repo, cache = tmp_path / "repo", tmp_path / "cache"
    index(repo, "trixie", "new")
    assert not module_repo.stale_cache(repo, (cache,))  # nothing cached
    index(cache, "trixie", "new")
    assert not module_repo.stale_cache(repo, (cache, tmp_path / "absent"))
    index(cache, "trixie", "old")
    assert module_repo.stale_cache(repo, (cache,))
    index(cache, "trixie", "new")
    index(cache, "bookworm", "gone from the repository")
    assert module_repo.stale_cache(repo, (cache,))
