"""Defaults for every host: each host data key with its default value, for the group `all`.

Each key is defined once, in model/keys.py: its type, its default, when a host must set it, the
code that reads it and what it does. This file hands pyinfra those defaults; the reference of
every key, with its default and meaning, is docs/keys.md (generated from the same definitions).

Inventories (host data) and other group_data files override any key. Keys are flat on purpose:
pyinfra merges host data shallowly, so a nested dict in an inventory would replace the whole
default. `model.hostdata.HostConfig` reads these keys and `validation` checks them.

pyinfra runs this file and takes the names listed in `__all__` as the group's data: every key of
model/keys.py, nothing else. A deployment that wants another default for all its hosts can assign
the key below the update (e.g. `zpool_ashift = 13`); better, set it in the inventory.
"""

from model import keys as _keys

globals().update(_keys.defaults())
__all__ = list(_keys.KEYS)
