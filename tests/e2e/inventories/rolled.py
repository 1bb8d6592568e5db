"""inventories/lab.py with one change per engine for the rolling converge (tests/e2e/test_rolling.py):
MariaDB's redo log buffer (a setting read only at start: each server restarts), PostgreSQL's
compression lz4 -> zstd (Heap's change: a dataset property, new blocks only) and the slow query log (a
reload)."""

import runpy
from pathlib import Path

_lab = runpy.run_path(str(Path(__file__).resolve().parents[3] / "inventories" / "lab.py"))

MARIADB_CHANGE = {"db_settings": {"innodb_log_buffer_size": "48M"}}
POSTGRESQL_CHANGE = {"zfs_compression": "zstd", "db_settings": {"log_min_duration_statement": "250ms"}}

mariadb = [(name, {**data, **MARIADB_CHANGE}) for name, data in _lab["mariadb"]]
postgresql = [(name, {**data, **POSTGRESQL_CHANGE}) for name, data in _lab["postgresql"]]
monitoring = _lab["monitoring"]
