"""The postgresql role (not built yet: see the issue tracker)."""

from pyinfra.api import deploy


@deploy("postgresql")
def server():
    pass
