"""
What a converge costs (`./dbzfs bench --converge`): the lab's VMs wiped to fresh images, then
`--dry` on the fresh hosts, the first converge, a no-op converge and a no-op `--dry`, each timed in
total and per host, with its operations, under lab/converge_profile.py.

    figures(profile, wall, rc)   one pyinfra run's figures, from the profile's records
    measure(log)                 the four runs on the lab, its VMs powered off after
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable

from lab import control, definition, vm as vmmod

RUNS = (
    ("--dry on fresh hosts", ("--dry",)),
    ("first converge", ()),
    ("no-op converge", ()),
    ("no-op --dry", ("--dry",)),
)


def figures(profile: dict, wall: float, rc: int) -> dict:
    """Per host: the operations run (none under --dry, which only reads facts), the changed ones,
    the fact reads, and the seconds its operations and fact reads took (what that host waited
    for); in total: the wall time and the sums."""
    hosts: dict[str, dict] = defaultdict(lambda: {"operations": 0, "changed": 0, "facts": 0, "seconds": 0.0})
    for op in profile["operations"]:
        h = hosts[op["host"]]
        h["operations"] += 1
        h["changed"] += bool(op["changed"])
        h["seconds"] += op["s"]
    for fact in profile["facts"]:
        hosts[fact["host"]]["facts"] += 1
        hosts[fact["host"]]["seconds"] += fact["s"]
    hosts = {name: {**h, "seconds": round(h["seconds"], 1)} for name, h in sorted(hosts.items())}
    return {
        "rc": rc,
        "wall_seconds": round(wall, 1),
        "operations": sum(h["operations"] for h in hosts.values()),
        "changed": sum(h["changed"] for h in hosts.values()),
        "facts": sum(h["facts"] for h in hosts.values()),
        "hosts": hosts,
    }


def measure(log: Callable[[str], None]) -> list[dict]:
    lab = definition.load()
    running = [name for name, vm in lab.all_vms.items() if vmmod.pid(vm)]
    if running:
        raise RuntimeError(
            f"lab VMs running ({', '.join(running)}): the converge cost is measured on fresh ones. "
            "Stop them first: ./dbzfs lab down"
        )
    control.wipe(lab, lab.names, log=log)
    control.up(lab, lab.names, log=log)
    out = []
    try:
        for name, args in RUNS:
            profile_path = control.STATE / f"bench-converge-{len(out)}.json"
            argv = [
                str(control.PYTHON),
                "-m",
                "lab.converge_profile",
                str(profile_path),
                # -y skips pyinfra's change detection, which is all that --dry shows
                *([] if "--dry" in args else ["-y"]),
                str(control.INVENTORY),
                *args,
                "deploy.py",
            ]
            log(f"==> converge cost: {name}")
            t0 = time.monotonic()
            result = subprocess.run(
                argv, cwd=control.REPO, env=control.lab_env(), capture_output=True, text=True
            )
            wall = time.monotonic() - t0
            profile_path.with_suffix(".log").write_text(result.stdout + result.stderr)
            if result.returncode != 0:
                raise RuntimeError(f"{name}: pyinfra exit {result.returncode}:\n{result.stderr[-3000:]}")
            row = {"name": name, **figures(json.loads(profile_path.read_text()), wall, result.returncode)}
            log(
                f"    {wall:.0f} s, {row['operations']} host-operations ({row['changed']} changed): "
                + ", ".join(f"{h} {v['seconds']:.0f} s" for h, v in row["hosts"].items())
            )
            out.append(row)
    finally:
        control.down(lab, lab.names, log=log)
    return out
