"""`./dbzfs upgrade INVENTORY --group NAME [--from STEP] [--dry] [--data max_lag=S] [--gate-timeout S]
[--report FILE]`

One replication group moved from Debian 12 to 13, step by step in day2/upgrade.py's order: each
host's release step (runbooks/upgrade_release.py: its rollback point, Debian's upgrade, the new
kernel's ZFS module, the reboot), its converge with the new release's data (deploy.py), the
switchover that moves the primary to an upgraded replica and back (runbooks/switchover.py), for
PostgreSQL the major step on the stand-in primary (runbooks/upgrade_postgresql.py) and the
standbys' reseeds (runbooks/seed.py), with `./dbzfs roll`'s health gates after every step. Each
pyinfra run reads the group's data as it is at that step (day2.upgrade.data_for), written as an
inventory over the operator's: the operator's inventory changes once, at the end (the report
says how). The upgrade stops at the first step that fails, says which and why, and how to resume:
the same command with `--from STEP` (the plan is the same while the operator's inventory is; each
step finds where its host is, so the failed step runs again from where it stopped).

`--dry`: the plan, and each release step's probe (its refusals) on the hosts still to move; nothing
changed. The report (printed, and as JSON with --report): per step its seconds and gates; per host
its release step's time; the switchovers' refused writes; the rollback snapshots and the space
they hold, and how to remove them once the upgrade is accepted (the upgrade never removes them).

Exit 0: done (or nothing to do); 1: a step failed; 2: refused or misused, nothing touched.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from day2 import kit, rolling, upgrade
from day2.rolling_run import PYINFRA, ROLL, Gates, converge, log, show, switchover
from operations.upgrade import SYSTEM_DATASET, snapshot_name
from validation import REPO_ROOT, load_inventory_isolated

RELEASE = "runbooks/upgrade_release.py"
MAJOR = "runbooks/upgrade_postgresql.py"
SEED = "runbooks/seed.py"
GATES_AFTER = {
    "release": ("server", "pool"),
    "converge": rolling.GATES,
    # the old primary replicates from the upgraded one only until its own release step: its
    # replication is gated after its converge
    "switchover": ("server",),
    "major": ("server", "pool"),
    "reseed": ("server", "replication", "pool"),
}


def runbook(inventory: str, path: str, data: list[str], limit: list[str], dry: bool) -> tuple[int, str]:
    argv = [str(PYINFRA), inventory, path]
    for item in data:
        argv += ["--data", item]
    for name in limit:
        argv += ["--limit", name]
    argv += ["--dry"] if dry else ["-y"]
    result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def run_step(
    args: argparse.Namespace, p: upgrade.Plan, step: upgrade.Step, inventory: str, hosts: dict, tmp: Path
) -> dict:
    """One step: its pyinfra run (with the step's data), then its gates; the step's entry."""
    entry: dict = {"step": step.kind, "host": step.host, "gates": {}}
    t0 = time.monotonic()
    members = list(p.members)
    if step.kind == "release":
        rc, output = runbook(inventory, RELEASE, [f"host={step.host}"], [step.host], args.dry)
    elif step.kind == "converge":
        rc, output, changed = converge(inventory, step.host, args.dry)
        entry["changed"] = changed
    elif step.kind == "switchover":
        rc, output, refused = switchover(inventory, members, step.host, args.max_lag, args.dry)
        entry["refused_s"] = refused
    elif step.kind == "major":
        rc, output = runbook(inventory, MAJOR, [f"host={step.host}"], members, args.dry)
    else:
        data = [f"host={step.host}", f"source={step.source}", "wipe=yes"]
        rc, output = runbook(inventory, SEED, data, members, args.dry)
    entry.update(s=round(time.monotonic() - t0, 1), rc=rc)
    if rc != 0 or args.dry:
        show(output)
    if rc != 0:
        entry["stopped"] = f"{step.describe()}: pyinfra exit {rc} (its output above)"
        return entry
    if args.dry:
        return entry
    gates = Gates(inventory, hosts, tmp / "ssh_config", args.max_lag, args.gate_timeout)
    role = "primary" if hosts[step.host].get("role") == "primary" else "replica"
    gated = rolling.Step(step.host, p.engine, p.group, role, hosts[step.host].get("primary"))
    for gate in GATES_AFTER[step.kind]:
        ok, detail, took = gates.wait(gate, gated)
        entry["gates"][gate] = {"passed": ok, "detail": detail, "s": round(took, 1)}
        log(f"    gate {gate}: {'passed' if ok else 'FAILED'} ({took:.0f} s): {detail}")
        if not ok:
            entry["stopped"] = f"{step.describe()}: gate {gate} did not pass: {detail}"
            break
    return entry


def unhealthy(args: argparse.Namespace, p: upgrade.Plan, hosts: dict, tmp: Path) -> list[str]:
    """Why the group must not start its upgrade: every member's server answering, its pool ONLINE
    under its capacity threshold, each replica replicating within max_lag (the roll's gates, each
    asked once, not waited for). Empty when it may start."""
    gates = Gates(args.inventory, hosts, tmp / "ssh_config", args.max_lag, args.gate_timeout)
    found = []
    for member in p.members:
        data = hosts[member]
        role = "primary" if data.get("role") == "primary" else "replica"
        step = rolling.Step(member, p.engine, p.group, role, data.get("primary"))
        for gate in ("server", "pool", *(("replication",) if role == "replica" else ())):
            try:
                ok, detail = getattr(gates, gate)(step)
            except Exception as exc:  # an ssh error: the member is not healthy
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            if not ok:
                found.append(f"{member}: {gate}: {detail}")
    return found


def snapshots_report(args: argparse.Namespace, p: upgrade.Plan, hosts: dict, tmp: Path) -> list[dict]:
    """The rollback snapshots on each member and the space they hold (`used`: what removing each
    would free)."""
    gates = Gates(args.inventory, hosts, tmp / "ssh_config", args.max_lag, args.gate_timeout)
    name = snapshot_name(p.old.codename, p.new.codename)
    found = []
    for member in p.members:
        rc, out = gates.run(member, f"zfs list -H -p -t snapshot -o name,used -r | grep '@{name}$' || true")
        for line in out.splitlines():
            if "\t" in line:
                snap, used = line.split("\t")
                found.append({"host": member, "snapshot": snap, "used": int(used)})
    return found


def upgrade_group(args: argparse.Namespace) -> int:
    validate = subprocess.run([sys.executable, "-m", "validation", args.inventory], cwd=REPO_ROOT)
    if validate.returncode != 0:
        log("==> upgrade: the inventory's data is wrong (above); no host was touched")
        return 2
    hosts = load_inventory_isolated(args.inventory)
    try:
        p = upgrade.plan(hosts, args.group)
    except upgrade.PlanError as exc:
        log(f"==> upgrade: {exc} ({exc.fix}); no host was touched")
        return 2
    if not p.steps:
        log(f"==> upgrade: {p.group} ({', '.join(p.members)}) runs {p.new.label} already: nothing to do")
        return 0
    if not 1 <= args.from_step <= len(p.steps):
        log(
            f"==> upgrade: --from {args.from_step}: the plan's steps are 1 to {len(p.steps)}; nothing touched"
        )
        return 2
    log(
        f"==> upgrade{' (dry)' if args.dry else ''}: {p.group} from {p.old.label} to {p.new.label}, "
        f"{len(p.steps)} steps:"
    )
    for i, step in enumerate(p.steps, 1):
        log(f"    {i:2}. {step.describe()}")
    original = str(Path(args.inventory).resolve())
    report: list[dict] = []
    stopped = None
    t_group = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dbzfs-upgrade-") as tmp_dir:
        tmp = Path(tmp_dir)
        (tmp / "ssh_config").write_text(rolling.ssh_config_text(hosts, str(REPO_ROOT)))
        if args.from_step == 1:  # a resumed upgrade starts from a group in the middle of it
            log(
                f"==> upgrade: is {p.group} healthy and caught up? (server, pool, replication of each member)"
            )
            found = unhealthy(args, p, hosts, tmp)
            if found:
                for line in found:
                    log(f"    {line}")
                log(f"==> upgrade: {p.group} is not healthy (above); no host was touched")
                return 2
        for i, step in enumerate(p.steps):
            if (args.dry and step.kind != "release") or i + 1 < args.from_step:
                continue
            overrides = upgrade.data_for(p, i)
            inventory = tmp / f"step-{i + 1:02}-{step.kind}-{step.host}.py"
            why = f"day2/upgrade_run.py: {original} at step {i + 1} ({step.describe()})."
            inventory.write_text(kit.overridden_inventory_text(original, overrides, why))
            step_hosts = {n: {**d, **overrides.get(n, {})} for n, d in hosts.items()}
            log(f"==> [{i + 1}/{len(p.steps)}] {step.describe()}")
            entry = run_step(args, p, step, str(inventory), step_hosts, tmp)
            report.append(entry)
            log(
                f"    {entry['s']:.0f} s"
                + (f", writes refused {entry['refused_s']} s" if "refused_s" in entry else "")
            )
            if entry.get("stopped"):
                stopped = entry["stopped"]
                kept = Path(tempfile.mkdtemp(prefix="dbzfs-upgrade-")) / inventory.name
                kept.write_text(inventory.read_text())
                log(f"    the group's data at this step: {kept}")
                log(
                    f"    resume, once the cause is fixed: ./dbzfs upgrade {args.inventory} --group "
                    f"{args.group} --from {i + 1}"
                )
                break
        snapshots = [] if args.dry else snapshots_report(args, p, hosts, tmp)
    summary = {
        "group": p.group,
        "from": p.old.label,
        "to": p.new.label,
        "dry": args.dry,
        "steps": report,
        "group_s": round(time.monotonic() - t_group, 1),
        "snapshots": snapshots,
        "stopped": stopped,
    }
    if args.report:
        Path(args.report).write_text(json.dumps(summary, indent=2) + "\n")
    log("==> upgrade report:")
    for e in report:
        extra = f", writes refused {e['refused_s']} s" if e.get("refused_s") is not None else ""
        log(f"    {e['step']:<10} {e['host']:<10} {e['s']:6.0f} s{extra}")
    log(f"    the group: {summary['group_s']:.0f} s")
    for s in snapshots:
        log(f"    {s['host']:<10} {s['snapshot']} holds {s['used'] / 2**30:.2f} GiB")
    if snapshots:
        name = snapshot_name(p.old.codename, p.new.codename)
        log(
            "    once the upgrade is accepted, free that space on each host: "
            f"zfs destroy -r POOL/PARENT@{name}; zfs destroy -r POOL/{SYSTEM_DATASET} "
            "(the upgrade never removes them)"
        )
    if stopped:
        log(f"==> upgrade STOPPED: {stopped}")
        return 1
    if not args.dry:
        log(
            "==> upgrade done. Set in the inventory: "
            + ", ".join(f'{n}: debian_release: "{p.new.major}"' for n in p.members)
        )
    return 0


# Its options are the roll's (max_lag, for the gates and the switchovers).
RUNBOOK = kit.Runbook("./dbzfs upgrade", "the upgrade", ROLL.parameters, acts_on=None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="./dbzfs upgrade", description=__doc__.split("\n\n")[1])
    p.add_argument("inventory")
    p.add_argument("--group", required=True, help="the replication group (its name or a member's)")
    p.add_argument(
        "--from",
        dest="from_step",
        type=int,
        default=1,
        metavar="STEP",
        help="resume at this step of the plan",
    )
    p.add_argument("--dry", action="store_true", help="the plan and each host's probe; nothing changed")
    p.add_argument("--data", action="append", default=[], metavar="KEY=VALUE", help="max_lag=S (30)")
    p.add_argument("--gate-timeout", type=int, default=600, help="seconds a gate may take to pass (600)")
    p.add_argument("--report", help="write the report as JSON to this file")
    args = p.parse_args(argv)
    parsed = kit.driver_data(args.data, RUNBOOK, p.error)
    if parsed is None:
        return 2
    args.max_lag = parsed["max_lag"]
    return upgrade_group(args)


if __name__ == "__main__":
    sys.exit(main())
