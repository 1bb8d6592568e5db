"""inventories/lab.py with db2's drive_pattern widened to every drive whose serial starts with db2-,
as the converge's warning says to once a drive of another serial took a pulled drive's place in its
pool (tests/e2e/test_degraded.py: autoreplace resilvered it in; the lab's own pattern, db2-nvme??,
does not match it)."""

import runpy
from pathlib import Path

_lab = runpy.run_path(str(Path(__file__).resolve().parents[3] / "inventories" / "lab.py"))

from lab.definition import BY_ID_PREFIX  # noqa: E402 (the lab's inventory puts the repository on sys.path)

WIDER = {"db2": BY_ID_PREFIX + "db2-*"}

mariadb = [
    (name, {**data, "drive_pattern": WIDER.get(name, data["drive_pattern"])})
    for name, data in _lab["mariadb"]
]
postgresql = _lab["postgresql"]
monitoring = _lab["monitoring"]
