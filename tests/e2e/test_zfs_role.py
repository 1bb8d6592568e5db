"""The storage role on the lab VMs: converge, testinfra checks, a second converge that changes
nothing, and the safety rule (a drive holding a filesystem stops pool creation untouched)."""

import re
import time

import pytest

pytestmark = pytest.mark.e2e

TIMES = {}


def grand_total(output: str) -> dict:
    """pyinfra's results table, last row: hosts, changed (its "Success" column), errors, no change."""
    rows = [line for line in output.splitlines() if line.strip().startswith("Grand total")]
    assert rows, f"no results table in pyinfra output:\n{output[-3000:]}"
    hosts, changed, errors, no_change = rows[-1].split()[-4:]
    number = lambda v: 0 if v == "-" else int(v)  # noqa: E731
    return {"hosts": number(hosts), "changed": number(changed), "errors": number(errors),
            "no_change": number(no_change)}


def converge(lab, *args):
    t0 = time.monotonic()
    result = lab.pyinfra(*args)
    return result, time.monotonic() - t0


@pytest.fixture(scope="module")
def converged(lab):
    result, seconds = converge(lab)
    TIMES["first converge"] = seconds
    result.check()
    totals = grand_total(result.stdout + result.stderr)
    assert totals["errors"] == 0 and totals["changed"] > 0, totals
    return lab


def test_first_converge_builds_every_pool(converged):
    for name in converged.names:
        out = converged.check(name, "zpool list -H -o name,health")
        assert out.split() == ["dbpool", "ONLINE"], (name, out)


def test_testinfra_checks_pass(converged):
    result = converged.testinfra("tests/infra/test_zfs.py")
    assert result.ok, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and " failed" not in result.stdout


def test_second_converge_changes_nothing(converged):
    result, seconds = converge(converged)
    TIMES["second converge"] = seconds
    result.check()
    totals = grand_total(result.stdout + result.stderr)
    assert totals == {**totals, "changed": 0, "errors": 0}, (totals, result.stdout[-6000:])


def test_dry_run_shows_no_change(converged):
    result = converged.pyinfra("--dry", "--diff")
    result.check()
    assert "Grand total" not in result.stdout  # --dry stops before executing
    meta = [line for line in result.stdout.splitlines() if re.match(r"^\s+\S.*\s+\d+ \(", line)]
    assert not meta, meta  # no operation lists a host under "Change"


def test_refuses_a_drive_holding_a_filesystem(converged):
    lab = converged
    victim = "pg2"
    vm = lab.vms[victim]
    lab.reset_drives(victim)
    target = vm.drive_ids[5]
    lab.check(victim, f"mkfs.ext4 -q -F {target}")
    before = lab.check(victim, "for d in /dev/disk/by-id/nvme-QEMU*; do case $d in *-part*) continue;; esac; "
                               "printf '%s ' $d; blkid -p -o value -s TYPE $d || echo -; done")
    result = lab.pyinfra("--limit", victim)
    output = result.stdout + result.stderr
    assert not result.ok, output[-4000:]
    assert target in output and "ext4" in output, output[-4000:]
    assert lab.run(victim, "zpool list -H -o name dbpool").rc != 0  # no pool was created
    after = lab.check(victim, "for d in /dev/disk/by-id/nvme-QEMU*; do case $d in *-part*) continue;; esac; "
                              "printf '%s ' $d; blkid -p -o value -s TYPE $d || echo -; done")
    assert after == before  # no drive was changed: the ext4 is still there, the others blank
    assert f"{target} ext4" in after


def test_report_times():
    # Reported, not asserted: the closing note quotes these.
    print(f"\nconverge times: {', '.join(f'{k} {v:.0f} s' for k, v in TIMES.items())}")
