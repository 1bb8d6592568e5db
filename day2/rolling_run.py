"""`./dbzfs roll INVENTORY [--dry] [--limit A,B] [--data max_lag=S] [--gate-timeout S] [--report FILE]`

deploy.py one host at a time (day2/rolling.py's plan: each group's replicas, then its primary),
then runbooks/rewrite_compression.py where the host's datasets hold blocks of another compression
than the data declares (Heap's lz4 -> zstd: ZFS compresses a block only when it writes it), with
health gates after each host. A primary (roll_primary = "switchover", the default) is first
switched over to a replica the roll converged (runbooks/switchover.py, once the replication gate
passes), converged and rewritten as that replica's replica, gated, and switched back; with
"in_place" it is converged where it is. The roll stops at the first host whose converge,
switchover or gate fails, says which and why, and leaves the hosts after it untouched. `--dry`
runs `pyinfra --dry --diff` host by host in the same order: each host's changes, the datasets it
would rewrite, and for a primary the switchover runbook's own --dry (its pre-checks); no gates,
nothing changed. The report (one line per host: the changes, each gate's verdict and seconds, a
primary's switchovers and how long writes were refused; per host and for the fleet, the
rewrite's physical and logical size and compressratio before and after, and its time) is printed
and written as JSON (--report).

The inventory is validated first (as `./dbzfs deploy` does): bad data stops the roll before any
host is touched. Connections: the inventory's own ssh data (day2.rolling.ssh_config_text), for
pyinfra and testinfra alike.

Its options are named as the runbooks' (which it runs): `--limit A,B` (or --limit A --limit B),
the hosts to roll, and `--data max_lag=S`, the seconds a MariaDB replica may be behind (its
gates, and the switchover's); any other --data key is refused, as a runbook refuses it. Exit 0:
done; 1: a host's converge, switchover or gate failed; 2: refused or misused (bad options, an
inventory whose data is wrong), before any host was touched.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from day2 import kit, rolling
from model.hostdata import HostConfig
from operations.postgresql import slot_name as pg_slot_name
from validation import REPO_ROOT, load_inventory_isolated

PYTHON = Path(sys.executable)
PYINFRA = PYTHON.parent / "pyinfra"
REWRITE = "runbooks/rewrite_compression.py"
SWITCHOVER = "runbooks/switchover.py"


def log(msg: str) -> None:
    print(msg, flush=True)


def show(output: str) -> None:
    """A pyinfra run's output, as it printed it."""
    print(output, end="" if output.endswith("\n") else "\n", flush=True)


def converge(
    inventory: str, host: str, dry: bool, deploy: str = "deploy.py", data: tuple[str, ...] = ()
) -> tuple[int, str, int | None]:
    """pyinfra -y INVENTORY DEPLOY --limit HOST (or --dry --diff), with `data` as --data items:
    exit code, output, and the operations that changed (with --dry: that would change)."""
    # -y skips pyinfra's change detection, which is all that --dry shows.
    argv = [str(PYINFRA), inventory, deploy, "--limit", host, *(a for item in data for a in ("--data", item))]
    argv += ["--dry", "--diff"] if dry else ["-y"]
    result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True)
    output = result.stdout + result.stderr
    changed = len(rolling.changes_proposed(output)) if dry else rolling.changes_made(output)
    return result.returncode, output, changed


def switchover(
    inventory: str, members: list[str], new_primary: str, max_lag: int, dry: bool
) -> tuple[int, str, float | None]:
    """runbooks/switchover.py on the replication group's hosts: exit code, output, and the
    seconds writes were refused (its report)."""
    argv = [str(PYINFRA), inventory, SWITCHOVER, "--data", f"new_primary={new_primary}"]
    argv += ["--data", f"max_lag={max_lag}"]
    for name in members:
        argv += ["--limit", name]
    argv += ["--dry"] if dry else ["-y"]
    result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True)
    output = result.stdout + result.stderr
    return result.returncode, output, rolling.refused_seconds(output)


class Gates:
    """The gates of one roll, run over the inventory's own ssh data."""

    def __init__(self, inventory: str, hosts: dict, ssh_config: Path, max_lag: int, timeout: int):
        import testinfra  # imported here: the unit tests need no ssh

        self.inventory, self.hosts, self.ssh_config = inventory, hosts, ssh_config
        self.max_lag, self.timeout = max_lag, timeout
        self._host = lambda name: testinfra.get_host(f"paramiko://{name}", ssh_config=str(ssh_config))

    def run(self, name: str, command: str) -> tuple[int, str]:
        out = self._host(name).run(command)
        return out.rc, (out.stdout + out.stderr).strip()

    def server(self, step: rolling.Step) -> tuple[bool, str]:
        return rolling.server_verdict(*self.run(step.host, rolling.server_command(step.engine)))

    def _replica(self, name: str, engine: str) -> tuple[bool, str]:
        cfg = HostConfig.from_data(name, self.hosts[name])
        rc, out = self.run(name, rolling.replica_command(engine))
        if rc != 0:
            return False, f"{name}: does not answer (exit {rc}): {out[-300:]}"
        if engine == "mariadb":
            source = self.hosts.get(cfg.primary or "", {}).get("replication_address")
            ok, detail = rolling.mariadb_replica_verdict(out, source, self.max_lag)
        else:
            ok, detail = rolling.postgresql_replica_verdict(out)
        return ok, f"{name}: {detail}"

    def replication(self, step: rolling.Step) -> tuple[bool, str]:
        names = [step.host] if step.role == "replica" else rolling.replicas_of(self.hosts, step.host)
        if not names:
            return True, "no replicas"
        verdicts = [self._replica(n, step.engine) for n in names]
        return all(ok for ok, _ in verdicts), "; ".join(detail for _, detail in verdicts)

    def pool(self, step: rolling.Step) -> tuple[bool, str]:
        cfg = HostConfig.from_data(step.host, self.hosts[step.host])
        if cfg.pool is None:
            return True, "no pool declared"
        rc, out = self.run(step.host, rolling.pool_command(cfg.pool.name))
        return rolling.pool_verdict(out if rc == 0 else "", cfg.capacity_threshold)

    def checks(self, step: rolling.Step) -> tuple[bool, str]:
        argv = [
            str(PYTHON),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/infra",
            f"--hosts=paramiko://{step.host}",
            f"--ssh-config={self.ssh_config}",
            f"--inventory={self.inventory}",
        ]
        result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True)
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        summary = lines[-1] if lines else result.stderr.strip()[-300:]
        if result.returncode == 0:
            return True, summary
        failed = [line for line in lines if line.startswith("FAILED")]
        return False, "; ".join(failed[:5]) or summary

    def wait(self, gate: str, step: rolling.Step) -> tuple[bool, str, float]:
        """The gate, tried every 5 s until it passes or the timeout passes."""
        t0 = time.monotonic()
        while True:
            try:
                ok, detail = getattr(self, gate)(step)
            except Exception as exc:  # an ssh error is a failed try, not a crash of the roll
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            took = time.monotonic() - t0
            if ok or took > self.timeout:
                return ok, detail, took
            time.sleep(5)


class LagSampler(threading.Thread):
    """The replica's lag every few seconds while its datasets are rewritten (PostgreSQL: asked of
    its primary, in bytes of WAL; MariaDB: of the replica, in seconds, unanswered while stopped)."""

    def __init__(self, gates: Gates, step: rolling.Step, every: float = 5.0):
        super().__init__(daemon=True)
        on = step.host if step.engine == "mariadb" else step.primary or step.host
        self.command = rolling.lag_command(step.engine, step.host, pg_slot_name(step.host))
        self.gates, self.on, self.engine, self.every = gates, on, step.engine, every
        self.samples: list[float | None] = []
        self.done = threading.Event()

    def sample(self) -> None:
        try:
            value = rolling.lag_value(self.engine, *self.gates.run(self.on, self.command))
        except Exception:  # an ssh error is an unanswered sample, not a failed roll
            value = None
        self.samples.append(value)

    def run(self) -> None:
        self.sample()
        while not self.done.wait(self.every):
            self.sample()

    def finish(self) -> None:
        self.done.set()
        self.join(timeout=60)


def pending_rewrite(gates: Gates, step: rolling.Step) -> tuple[dict, dict, list[str]]:
    """The host's datasets and the compression the data declares for each, their sizes and the
    compression their blocks carry, and those whose blocks carry another."""
    cfg = HostConfig.from_data(step.host, gates.hosts[step.host])
    if cfg.pool is None:
        return {}, {}, []
    wanted = {cfg.dataset_name(r): cfg.compression_of(r) for r in cfg.child_datasets}
    rc, out = gates.run(step.host, rolling.sizes_command(list(wanted)))
    before = rolling.parse_sizes(out if rc == 0 else "")
    return wanted, before, rolling.needs_rewrite(before, wanted)


def rewrite(args: argparse.Namespace, gates: Gates, step: rolling.Step, entry: dict) -> str | None:
    """The compression rewrite of the host's datasets (runbooks/rewrite_compression.py) when their
    blocks carry another compression than the data declares, with its before/after figures in
    entry["rewrite"]. With --dry: which datasets it would rewrite. A message when it failed."""
    wanted, before, pending = pending_rewrite(gates, step)
    if not wanted:
        return None
    unknown = rolling.unrecorded(before, wanted)
    named = {"unrecorded": unknown} if unknown else {}
    for d in unknown:
        log(
            f"    rewrite: {d} has no record of its blocks' compression, so it is not rewritten (if you "
            f"know it: zfs set {rolling.BLOCKS_COMPRESSION}=VALUE {d})"
        )
    if args.dry:
        for d in pending:
            size = rolling.mib(int(before[d].get("used", 0)))
            log(f"    rewrite: {d}, blocks {before[d][rolling.BLOCKS_COMPRESSION]} -> {wanted[d]} ({size})")
        entry["rewrite"] = {"datasets": pending, **named}
        return None
    sampler = LagSampler(gates, step) if step.role == "replica" and pending else None
    t0 = time.monotonic()
    if sampler:
        sampler.start()
    try:
        rc, output, changed = converge(gates.inventory, step.host, False, REWRITE, rewrite_data(step))
    finally:
        if sampler:
            sampler.finish()
    took = time.monotonic() - t0
    if rc != 0:
        show(output)
        return f"{step.host}: the compression rewrite failed (pyinfra exit {rc}, its output above)"
    if not pending and not changed:
        if unknown:
            entry["rewrite"] = {"datasets": [], **named}
        return None
    rc, out = gates.run(step.host, rolling.sizes_command(list(wanted)))
    after = rolling.parse_sizes(out if rc == 0 else "")
    entry["rewrite"] = {
        **rolling.rewrite_report(before, after, pending or list(wanted)),
        "s": round(took, 1),
        **named,
    }
    log(f"    rewrite ({took:.0f} s): {rolling.rewrite_line(entry['rewrite'])}")
    if sampler:
        entry["rewrite"]["lag"] = rolling.lag_summary(step.engine, sampler.samples)
        log(f"    {rolling.lag_line(entry['rewrite']['lag'])}; caught up: the replication gate below")
    return None


def rewrite_data(step: rolling.Step) -> tuple[str, ...]:
    """runbooks/rewrite_compression.py's arguments for the host: a primary is rolled here only in
    place (roll_primary = "in_place", or no replica to switch over to), so it is allowed."""
    return (f"host={step.host}", *(("allow_primary=yes",) if step.role == "primary" else ()))


def wait_for_gates(gates: Gates, step: rolling.Step, entry: dict, names: tuple[str, ...]) -> str | None:
    """The gates in order, each until it passes or times out; a message at the first that fails."""
    for gate in names:
        ok, detail, took = gates.wait(gate, step)
        entry[gate] = {"passed": ok, "detail": detail, "s": round(took, 1)}
        log(f"    gate {gate}: {'passed' if ok else 'FAILED'} ({took:.0f} s): {detail}")
        if not ok:
            return f"{step.host}: gate {gate} did not pass within {gates.timeout} s: {detail}"
    return None


def converge_and_gate(args: argparse.Namespace, gates: Gates, step: rolling.Step, entry: dict) -> str | None:
    """deploy.py on the host (with the gates' inventory), its compression rewrite, its gates."""
    t0 = time.monotonic()
    rc, output, changed = converge(gates.inventory, step.host, args.dry)
    entry.update(converge_s=round(time.monotonic() - t0, 1), changed=changed, rc=rc)
    if args.dry or rc != 0:
        show(output)
    if rc != 0:
        return f"{step.host}: the converge failed (pyinfra exit {rc}, its output above)"
    log(f"    {changed if changed is not None else '?'} change(s) in {entry['converge_s']:.0f} s")
    stopped = rewrite(args, gates, step, entry)
    if stopped or args.dry:
        return stopped
    return wait_for_gates(gates, step, entry["gates"], rolling.GATES)


def via_switchover(
    args: argparse.Namespace, gates: Gates, step: rolling.Step, entry: dict, tmp: Path
) -> str | None:
    """A primary rolled through a switchover: its replicas caught up, switched over to
    step.switch_to, converged (and rewritten) as its replica with the inventory the fleet then
    has, gated, switched back, and its replication gated again."""
    target = step.switch_to
    members = [step.host, *rolling.replicas_of(gates.hosts, step.host)]
    entry["switchover"] = {"to": target}
    if args.dry:
        rc, output, _ = switchover(args.inventory, members, target, args.max_lag, dry=True)
        show(output)
        if rc != 0:
            return f"{step.host}: the switchover to {target} would be refused (its output above)"
        log(f"    switchover to {target}: its pre-checks pass; {step.host}'s changes as a primary:")
        return converge_and_gate(args, gates, step, entry)
    # A primary with nothing to change stays where it is: no switchover, no refused writes.
    t0 = time.monotonic()
    rc, output, changed = converge(args.inventory, step.host, True)
    if rc == 0 and changed == 0 and not pending_rewrite(gates, step)[2]:
        entry.update(converge_s=round(time.monotonic() - t0, 1), changed=0, rc=0)
        log(f"    nothing to change (--dry: 0 changes, no rewrite): {step.host} stays the primary")
        return None
    stopped = wait_for_gates(gates, step, entry["switchover"], ("replication",))
    if stopped:
        return f"{stopped} (before the switchover to {target})"
    t0 = time.monotonic()
    rc, output, refused = switchover(args.inventory, members, target, args.max_lag, dry=False)
    entry["switchover"].update(s=round(time.monotonic() - t0, 1), refused_s=refused, rc=rc)
    if rc != 0:
        show(output)
        return f"{step.host}: the switchover to {target} failed (pyinfra exit {rc}, its output above)"
    log(f"    switched over to {target} in {entry['switchover']['s']:.0f} s (writes refused {refused} s)")

    # The fleet as it now is: the same inventory with the group's roles swapped, kept where the
    # operator can use it should the roll stop before the switch back.
    swapped = rolling.swapped_hosts(gates.hosts, step.host, target)
    switched = tmp / f"{step.host}-switched-to-{target}.py"
    switched.write_text(
        rolling.swapped_inventory_text(str(Path(args.inventory).resolve()), step.host, target, members)
    )
    as_replica = Gates(str(switched), swapped, gates.ssh_config, gates.max_lag, gates.timeout)
    stopped = converge_and_gate(args, as_replica, replace(step, role="replica", primary=target), entry)
    if stopped:
        kept = Path(tempfile.mkdtemp(prefix="dbzfs-roll-")) / switched.name
        kept.write_text(switched.read_text())
        return (
            f"{stopped}; {target} is the primary now, {step.host} its replica: {kept} is the "
            f"inventory as the fleet is (switch back: pyinfra {kept} {SWITCHOVER} --data "
            f"new_primary={step.host})"
        )

    t0 = time.monotonic()
    rc, output, refused = switchover(str(switched), members, step.host, args.max_lag, dry=False)
    back = entry["switch_back"] = {"s": round(time.monotonic() - t0, 1), "refused_s": refused, "rc": rc}
    if rc != 0:
        show(output)
        return f"{step.host}: the switch back from {target} failed (pyinfra exit {rc}, its output above)"
    log(f"    switched back from {target} in {back['s']:.0f} s (writes refused {refused} s)")
    return wait_for_gates(gates, step, back, ("server", "replication"))


def roll(args: argparse.Namespace) -> int:
    validate = subprocess.run([str(PYTHON), "-m", "validation", args.inventory], cwd=REPO_ROOT)
    if validate.returncode != 0:
        log("==> roll: the inventory's data is wrong (above); no host was touched")
        return 2
    hosts = load_inventory_isolated(args.inventory)
    only = {n for item in args.limit or () for n in item.split(",") if n} or None
    try:
        steps = rolling.plan(hosts, only)
    except ValueError as exc:
        log(f"==> roll: --limit: {exc}; no host was touched")
        return 2
    order = ", ".join(f"{s.host} ({s.group} {s.role})" for s in steps)
    log(f"==> roll{' (dry)' if args.dry else ''}: {len(steps)} host(s), one at a time: {order}")
    report: list[dict] = []
    stopped = None
    with tempfile.TemporaryDirectory(prefix="dbzfs-roll-") as tmp:
        ssh_config = Path(tmp) / "ssh_config"
        ssh_config.write_text(rolling.ssh_config_text(hosts, str(REPO_ROOT)))
        gates = Gates(args.inventory, hosts, ssh_config, args.max_lag, args.gate_timeout)
        for i, step in enumerate(steps, 1):
            entry: dict = {"host": step.host, "group": step.group, "role": step.role, "gates": {}}
            report.append(entry)
            if step.switch_to:
                how = f"switchover to {step.switch_to}, converge, switch back"
                log(f"==> [{i}/{len(steps)}] {step.host} ({step.group} {step.role}): {how}")
                stopped = via_switchover(args, gates, step, entry, Path(tmp))
            else:
                log(f"==> [{i}/{len(steps)}] {step.host} ({step.group} {step.role}): converge")
                stopped = converge_and_gate(args, gates, step, entry)
            if stopped:
                break
    untouched = [s.host for s in steps[len(report) :]]
    summary = {
        "inventory": args.inventory,
        "dry": args.dry,
        "hosts": report,
        "stopped": stopped,
        "untouched": untouched,
    }
    rewritten = [e["rewrite"] for e in report if "before" in e.get("rewrite", {})]
    if rewritten:
        summary["rewrite"] = {
            when: {
                "used": sum(r[when]["used"] for r in rewritten),
                "logicalused": sum(r[when]["logicalused"] for r in rewritten),
            }
            for when in ("before", "after")
        }
        for when in ("before", "after"):
            t = summary["rewrite"][when]
            t["compressratio"] = round(t["logicalused"] / t["used"], 2) if t["used"] else 0.0
    if args.report:
        Path(args.report).write_text(json.dumps(summary, indent=2) + "\n")
    log("==> roll report:")
    for entry in report:
        gates_line = ", ".join(
            f"{g} {'ok' if v['passed'] else 'FAILED'} {v['s']:.0f} s" for g, v in entry["gates"].items()
        )
        log(
            f"    {entry['host']:<10} {entry['group']:<22} {entry['role']:<8} "
            f"changes {entry.get('changed')}, converge {entry.get('converge_s', 0):.0f} s"
            + (f"; {gates_line}" if gates_line else "")
        )
    for entry in report:
        there, back = entry.get("switchover", {}), entry.get("switch_back", {})
        if "s" in there:
            line = f"switchover to {there['to']} {there['s']:.0f} s (writes refused {there['refused_s']} s)"
            if back:
                line += f", back {back['s']:.0f} s (writes refused {back['refused_s']} s)"
            log(f"    {entry['host']:<10} {line}")
    for entry in report:
        if "before" in entry.get("rewrite", {}):
            took = entry["rewrite"]["s"]
            log(f"    {entry['host']:<10} rewrite {took:.0f} s: {rolling.rewrite_line(entry['rewrite'])}")
    if "rewrite" in summary:
        log(f"    fleet      rewrite: {rolling.rewrite_line(summary['rewrite'])}")
    for entry in report:
        if entry.get("rewrite", {}).get("unrecorded"):
            unknown = ", ".join(entry["rewrite"]["unrecorded"])
            log(f"    {entry['host']:<10} not rewritten, no record of their blocks' compression: {unknown}")
    if stopped:
        log(f"==> roll STOPPED at {stopped}")
        log(f"    not converged (left as they are): {', '.join(untouched) or 'none'}")
        return 1
    log(f"==> roll done: {len(report)} host(s){' (dry: nothing changed)' if args.dry else ''}")
    return 0


ROLL = kit.Runbook(
    "./dbzfs roll",
    "the roll",
    (
        kit.Parameter(
            "max_lag",
            "seconds a MariaDB replica may be behind, default 30",
            default=30,
            parse=kit.whole_seconds,
            example="30",
        ),
    ),
    acts_on=None,
)
RENAMED = {"--hosts": "--limit A,B", "--max-lag": "--data max_lag=S"}


class Misuse(argparse.ArgumentParser):
    """argparse, with its exit code on a misuse kept at 2 and the renamed options hinted."""

    def error(self, message: str) -> None:  # type: ignore[override]
        for old, new in RENAMED.items():
            if old in message:
                message += f" ({old} is now {new}, named as the runbooks name it)"
        super().error(message)


def main(argv: list[str] | None = None) -> int:
    p = Misuse(prog="./dbzfs roll", description=__doc__.split("\n\n")[1])
    p.add_argument("inventory")
    p.add_argument(
        "--dry",
        action="store_true",
        help="each host's changes and rewrites in the roll's order; nothing changed",
    )
    p.add_argument(
        "--limit",
        action="append",
        metavar="A,B",
        help="only these hosts (comma-separated, or the option again), in the roll's order",
    )
    p.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="max_lag=S: seconds a MariaDB replica may be behind (30)",
    )
    p.add_argument("--gate-timeout", type=int, default=300, help="seconds a gate may take to pass (300)")
    p.add_argument("--report", help="write the report as JSON to this file")
    args = p.parse_args(argv)
    parsed = kit.driver_data(args.data, ROLL, p.error)
    if parsed is None:
        return 2
    args.max_lag = parsed["max_lag"]
    return roll(args)


if __name__ == "__main__":
    sys.exit(main())
