"""The real MariaDB and PostgreSQL binaries the unit tests hand rendered configs and generated
data to (installed by scripts/bootstrap): where they are, a scratch directory the postgres account
can use, and what mariadbd makes of a config file."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from engines import db_settings_generate

PG_BIN = Path(db_settings_generate.PG_BIN)
MARIADBD = Path(db_settings_generate.MARIADBD)


def require(path) -> str:
    """The binary's path; a missing one fails the test (never a skip)."""
    assert os.access(path, os.X_OK), f"{path} missing: run scripts/bootstrap (mariadb-server, postgresql-15)"
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


def mariadbd_values(cnf_text: str, tmp: Path) -> dict[str, str]:
    """{option with underscores: value} as `mariadbd --verbose --help` reads the config; an error or
    a warning about it fails the test."""
    cnf = tmp / "my.cnf"
    cnf.write_text(cnf_text)
    result = subprocess.run(
        [require(MARIADBD), f"--defaults-file={cnf}", "--verbose", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
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
