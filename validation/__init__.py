"""Checks an inventory's complete data before any host is touched.

`validate(hosts, secrets)` returns every problem at once, each naming the host, the key, the value
and the fix. deploy.py runs it before any operation (validation/preflight.py); `./dbzfs validate
INVENTORY` (validation/cli.py's main) runs it with no SSH at all.

    validation/checks.py     the run: the type pass from the key definitions (model/keys.py),
                             unknown keys, then every owner's rules (roles/*_checks.py, ...)
    validation/inventory.py  the inventory file, loaded as pyinfra loads it
    validation/cli.py        `python -m validation INVENTORY`
    validation/preflight.py  the check every deploy and runbook runs first
"""

from model.problems import InventoryError, Problem, ValidationError, format_problems
from validation.checks import KEY_TYPES, KNOWN_KEYS, check, validate
from validation.cli import main
from validation.inventory import REPO_ROOT, load_inventory, load_inventory_isolated

__all__ = [
    "KEY_TYPES",
    "KNOWN_KEYS",
    "REPO_ROOT",
    "InventoryError",
    "Problem",
    "ValidationError",
    "check",
    "format_problems",
    "load_inventory",
    "load_inventory_isolated",
    "main",
    "validate",
]
