"""Where a converge's time goes: `python -m lab.converge_profile OUT.json PYINFRA ARGS...`.

Runs the pyinfra CLI in this process with three timers wrapped around pyinfra's own functions:
every fact read (fact class, host, seconds), every operation on every host (name, host, seconds,
changed or not) and every remote command (host, seconds). Writes them to OUT.json, prints a
summary (the slowest operations, facts by total time, round trips per host) and exits with
pyinfra's exit code. Reported figures, not asserted ones: tests/e2e records them per run.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pyinfra_cli.main as cli_main  # before pyinfra.api: it imports gevent first, as the pyinfra CLI does
from pyinfra.api import FactBase, State, facts as api_facts, operations as api_operations
from pyinfra.api.host import Host
from pyinfra.connectors.util import CommandOutput

_records: dict[str, list] = {"facts": [], "operations": [], "commands": []}


def _wrap_fact(original: Callable[..., object]) -> Callable[..., object]:
    def timed(state: State, host: Host, cls: type[FactBase], *args, **kwargs) -> object:
        t0 = time.monotonic()
        try:
            return original(state, host, cls, *args, **kwargs)
        finally:
            _records["facts"].append(
                {
                    "fact": cls.__name__,
                    "host": host.name,
                    "s": time.monotonic() - t0,
                    "stage": int(state.current_stage),
                }
            )

    return timed


def _wrap_operation(original: Callable[..., bool]) -> Callable[..., bool]:
    def timed(state: State, host: Host, op_hash: str) -> bool:
        t0 = time.monotonic()
        ok = False
        try:
            ok = original(state, host, op_hash)
            return ok
        finally:
            meta = state.get_op_meta(op_hash)
            try:
                changed = state.get_op_data_for_host(host, op_hash).operation_meta.did_change()
            except Exception:  # an operation that failed before it completed
                changed = None
            _records["operations"].append(
                {
                    "operation": ", ".join(sorted(meta.names)),
                    "host": host.name,
                    "s": time.monotonic() - t0,
                    "changed": changed,
                    "ok": ok,
                }
            )

    return timed


def _wrap_command(
    original: Callable[..., tuple[bool, CommandOutput]],
) -> Callable[..., tuple[bool, CommandOutput]]:
    def timed(self: Host, *args, **kwargs) -> tuple[bool, CommandOutput]:
        t0 = time.monotonic()
        try:
            return original(self, *args, **kwargs)
        finally:
            _records["commands"].append({"host": self.name, "s": time.monotonic() - t0})

    return timed


def summary(records: dict, wall: float, top: int = 25) -> str:
    ops = defaultdict(lambda: {"s": 0.0, "max": 0.0, "hosts": 0, "changed": 0})
    for r in records["operations"]:
        o = ops[r["operation"]]
        o["s"] += r["s"]
        o["max"] = max(o["max"], r["s"])
        o["hosts"] += 1
        o["changed"] += bool(r["changed"])
    facts = defaultdict(lambda: {"s": 0.0, "n": 0})
    for r in records["facts"]:
        facts[r["fact"]]["s"] += r["s"]
        facts[r["fact"]]["n"] += 1
    per_host = defaultdict(lambda: {"n": 0, "s": 0.0})
    for r in records["commands"]:
        per_host[r["host"]]["n"] += 1
        per_host[r["host"]]["s"] += r["s"]
    lines = [
        f"==> converge profile: {wall:.0f} s wall, {len(records['operations'])} host-operations "
        f"({sum(1 for r in records['operations'] if r['changed'])} changed), "
        f"{len(records['facts'])} fact reads, {len(records['commands'])} remote commands"
    ]
    lines.append(f"  slowest operations (wall = slowest host; sum over hosts), top {top}:")
    for name, o in sorted(ops.items(), key=lambda kv: -kv[1]["max"])[:top]:
        lines.append(f"    {o['max']:7.1f} s  {o['s']:7.1f} s  {o['changed']}/{o['hosts']} changed  {name}")
    lines.append("  facts by total time (count, seconds summed over hosts):")
    for name, f in sorted(facts.items(), key=lambda kv: -kv[1]["s"])[:top]:
        lines.append(f"    {f['n']:4d}  {f['s']:7.1f} s  {name}")
    lines.append("  remote commands per host (count, seconds):")
    for name, h in sorted(per_host.items()):
        lines.append(f"    {name}: {h['n']} commands, {h['s']:.0f} s")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m lab.converge_profile OUT.json PYINFRA-ARGS...", file=sys.stderr)
        return 2
    out = Path(argv[0])
    api_facts._get_fact = _wrap_fact(api_facts._get_fact)
    api_operations._run_host_op = _wrap_operation(api_operations._run_host_op)
    Host.run_shell_command = _wrap_command(Host.run_shell_command)
    sys.argv = ["pyinfra", *argv[1:]]
    t0 = time.monotonic()
    code = 0
    try:
        cli_main.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    wall = time.monotonic() - t0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"wall_s": wall, "argv": argv[1:], **_records}, indent=1))
    print(summary(_records, wall), file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
