"""Reading pyinfra's CLI output in the e2e tests."""


def grand_total(output: str) -> dict:
    """pyinfra's results table, last row: hosts, changed (its "Success" column), errors, no change."""
    rows = [line for line in output.splitlines() if line.strip().startswith("Grand total")]
    assert rows, f"no results table in pyinfra output:\n{output[-3000:]}"
    hosts, changed, errors, no_change = rows[-1].split()[-4:]

    def number(v):
        return 0 if v == "-" else int(v)

    return {
        "hosts": number(hosts),
        "changed": number(changed),
        "errors": number(errors),
        "no_change": number(no_change),
    }


def changed_operations(output: str) -> list[str]:
    """Rows of the results table whose "Success" (changed) column is not "-"."""
    lines = output.splitlines()
    try:
        start = max(i for i, line in enumerate(lines) if "No Change" in line and "Operation" in line)
    except ValueError:
        return []
    changed = []
    for line in lines[start + 1 :]:
        cells = line.split()
        if len(cells) < 5 or line.strip().startswith("Grand total"):
            continue
        if cells[-3] != "-":
            changed.append(line.strip())
    return changed


def proposed_changes(output: str) -> list[str]:
    """With --dry (and without -y): operations of the "Detected changes" table that would change
    a host, as "operation: hosts"."""
    lines = output.splitlines()
    headers = [i for i, line in enumerate(lines) if "Operation" in line and "Conditional Change" in line]
    assert headers, f"no detected-changes table in pyinfra output:\n{output[-3000:]}"
    header = lines[headers[-1]]
    change_at = header.index("Change")
    conditional_at = header.index("Conditional Change")
    rows = []
    for line in lines[headers[-1] + 1 :]:
        if not line.strip():
            break
        change = line[change_at:conditional_at].strip()
        conditional = line[conditional_at:].strip()
        if change != "-" or conditional != "-":
            rows.append(f"{line[:change_at].strip()}: {change} / {conditional}")
    return rows


def assert_changed_nothing(result) -> dict:
    """A converge (a labkit Result) that succeeded and changed no operation on any host."""
    output = result.stdout + result.stderr
    result.check()
    totals = grand_total(output)
    assert totals["errors"] == 0 and totals["changed"] == 0, (changed_operations(output), output[-6000:])
    assert totals["no_change"] > 0
    return totals
