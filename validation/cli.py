"""`./dbzfs validate INVENTORY` (`python -m validation INVENTORY`): the inventory loaded and
validated with no SSH at all; `--dump-data INVENTORY` prints its hosts' merged data as JSON
(load_inventory_isolated reads it)."""

from __future__ import annotations

import sys

from model import secrets as secrets_mod
from model.problems import InventoryError, format_problems
from validation.checks import validate
from validation.inventory import load_inventory


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--dump-data":
        import json

        try:
            hosts = load_inventory(argv[1])
        except InventoryError as exc:
            print(exc, file=sys.stderr)
            return 1
        json.dump(hosts, sys.stdout, default=str)
        return 0
    if len(argv) != 1:
        print("usage: python -m validation INVENTORY", file=sys.stderr)
        return 2
    # Exit 2: refused (the inventory file, its data or the secrets are wrong), as `./dbzfs roll`
    # and `./dbzfs deploy` refuse them; 1: validating failed (a bug).
    try:
        hosts = load_inventory(argv[0])
        secrets = secrets_mod.load()
        problems = validate(hosts, secrets)
    except InventoryError as exc:
        print(exc, file=sys.stderr)
        return 2
    except (OSError, secrets_mod.SecretsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug here must still not end in a traceback
        print(
            f"error: validating {argv[0]} failed ({type(exc).__name__}: {exc}); no host was "
            "changed. This is a bug in validation/: please report it with the "
            "inventory",
            file=sys.stderr,
        )
        return 1
    if problems:
        print(format_problems(problems, argv[0]), file=sys.stderr)
        return 2
    print(f"{argv[0]}: {len(hosts)} host(s) OK ({', '.join(sorted(hosts))}); secrets from {secrets.source}")
    return 0
