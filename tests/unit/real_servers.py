"""The real MariaDB and PostgreSQL binaries the unit tests hand rendered configs and generated
data to (installed by scripts/bootstrap): where they are, a scratch directory the postgres account
can use, and what mariadbd makes of a config file."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from engines import db_settings_generate
from model import releases

PG_BIN = Path(db_settings_generate.PG_BIN)
MARIADBD = Path(db_settings_generate.MARIADBD)


def require(path) -> str:
    """The binary's path; a missing one fails the test (never a skip)."""
    assert os.access(path, os.X_OK), f"{path} missing: run scripts/bootstrap (mariadb-server, postgresql)"
    return str(path)


def mariadb_install_db(data: Path, *options: str) -> None:
    """A new MariaDB data directory, root's account unprotected (the tests are its only users)."""
    subprocess.run(
        [
            require(Path("/usr/bin/mariadb-install-db")),
            "--no-defaults",
            f"--datadir={data}",
            "--user=root",
            *options,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def as_postgres(argv: list[str]) -> list[str]:
    """argv run as the postgres account when root (postgres refuses to run as root)."""
    return (["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []) + argv


def postgres_scratch(prefix: str) -> Path:
    """A directory under /tmp owned by postgres (pytest's tmp_path is root's alone); the caller
    removes it."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")
    return path


def mariadbd_values(
    cnf_text: str, tmp: Path | None = None, servers: "Servers | None" = None
) -> dict[str, str]:
    """{option with underscores: value} as `mariadbd --verbose --help` reads the config (this
    machine's mariadbd, or `servers`'); an error or a warning about it fails the test."""
    if servers is None:
        cnf = tmp / "my.cnf"
        cnf.write_text(cnf_text)
        result = subprocess.run(
            [require(MARIADBD), f"--defaults-file={cnf}", "--verbose", "--help"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    else:
        scratch = servers.scratch("dbzfs-mycnf-")
        try:
            (scratch / "my.cnf").write_text(cnf_text)
            cnf = servers.inside(scratch / "my.cnf")
            result = servers.run(
                [servers.require(servers.mariadbd), f"--defaults-file={cnf}", "--verbose", "--help"]
            )
        finally:
            shutil.rmtree(scratch)
    assert result.returncode == 0, result.stderr
    bad = [
        line
        for line in result.stderr.splitlines()
        if "ERROR" in line
        or ("Warning" in line and "max_open_files" not in line and "mysql.plugin" not in line)
    ]
    assert not bad, bad
    values = {}
    in_table = False
    for line in result.stdout.splitlines():
        if line.startswith("-----"):
            in_table = True
            continue
        if in_table and line.strip():
            key, _, value = line.partition(" ")
            values[key.replace("-", "_")] = value.strip()
    return values


class Servers:
    """One Debian release's MariaDB and PostgreSQL, as the unit tests run them: this machine's own
    (Debian 12: scripts/bootstrap), or those of the root scripts/servers-chroot builds (Debian 13),
    run there under chroot. Files the servers read go in scratch() directories, which both sides
    see: `inside(path)` is a path as the servers see it."""

    def __init__(self, release: str):
        self.release = release
        self.root = db_settings_generate.servers_root(release)
        rel = releases.get(release)
        self.mariadb_version, self.pg_version = rel.mariadb, rel.postgresql
        self.pg_bin = f"/usr/lib/postgresql/{rel.postgresql}/bin"
        self.mariadbd = "/usr/sbin/mariadbd"

    def __repr__(self) -> str:
        return f"Servers({self.release!r}: {self.root})"

    @property
    def chrooted(self) -> bool:
        return self.root != Path("/")

    def require(self, inside: str) -> str:
        """The binary as the servers see it; a missing one fails the test (never a skip)."""
        here = self.root / inside.lstrip("/")
        how = "scripts/servers-chroot (run by scripts/bootstrap)" if self.chrooted else "scripts/bootstrap"
        assert os.access(here, os.X_OK), f"{here} missing: run {how} (Debian {self.release}'s servers)"
        return inside

    def inside(self, path: Path) -> str:
        return "/" + str(Path(path).relative_to(self.root)) if self.chrooted else str(path)

    def _ids(self, user: str) -> tuple[int, int]:
        for line in (self.root / "etc/passwd").read_text().splitlines():
            fields = line.split(":")
            if fields[0] == user:
                return int(fields[2]), int(fields[3])
        raise AssertionError(f"no {user} account in {self.root}/etc/passwd")

    def scratch(self, prefix: str, owner: str | None = None) -> Path:
        """A new directory under the root's /tmp (owned by `owner` there); the caller removes it."""
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=self.root / "tmp"))
        if owner and os.geteuid() == 0:
            os.chown(path, *self._ids(owner))
        return path

    def own(self, path: Path, owner: str) -> None:
        if os.geteuid() == 0:
            os.chown(path, *self._ids(owner))

    def run(self, argv: list[str], user: str | None = None, **kw) -> subprocess.CompletedProcess:
        """argv (paths as the servers see them), as `user` when root, in the release's root."""
        if user and os.geteuid() == 0:
            argv = ["runuser", "-u", user, "--", *argv]
        if self.chrooted:
            argv = ["chroot", str(self.root), *argv]
        kw.setdefault("timeout", 60)
        return subprocess.run(argv, capture_output=True, text=True, **kw)


def servers(release: str) -> Servers:
    return Servers(release)
