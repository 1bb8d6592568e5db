"""The mariadb role (not built yet: see the issue tracker)."""

from pyinfra.api import deploy


@deploy("mariadb")
def server():
    pass
