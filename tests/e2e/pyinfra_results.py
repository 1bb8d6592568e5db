"""Reading pyinfra's CLI output in the e2e tests."""


def grand_total(output: str) -> dict:
    """pyinfra's results table, last row: hosts, changed (its "Success" column), errors, no change."""
    rows = [line for line in output.splitlines() if line.strip().startswith("Grand total")]
    assert rows, f"no results table in pyinfra output:\n{output[-3000:]}"
    hosts, changed, errors, no_change = rows[-1].split()[-4:]

    def number(v):
        return 0 if v == "-" else int(v)

    return {"hosts": number(hosts), "changed": number(changed), "errors": number(errors),
            "no_change": number(no_change)}


def changed_operations(output: str) -> list[str]:
    """Rows of the results table whose "Success" (changed) column is not "-"."""
    lines = output.splitlines()
    try:
        start = max(i for i, line in enumerate(lines) if "No Change" in line and "Operation" in line)
    except ValueError:
        return []
    changed = []
    for line in lines[start + 1:]:
        cells = line.split()
        if len(cells) < 5 or line.strip().startswith("Grand total"):
            continue
        if cells[-3] != "-":
            changed.append(line.strip())
    return changed


def proposed_changes(output: str) -> list[str]:
    """With --dry: rows of the "Operation / Change / Conditional Change" table that name hosts."""
    lines = output.splitlines()
    headers = [i for i, line in enumerate(lines)
               if "Operation" in line and "Conditional Change" in line]
    assert headers, f"no proposed-changes table in pyinfra output:\n{output[-3000:]}"
    rows = []
    for line in lines[headers[-1] + 1:]:
        if not line.strip() or line.startswith("-->"):
            break
        cells = line.split()
        if cells[-1] != "-" or not line.rstrip().endswith("-") or "(" in line:
            rows.append(line.strip())
    return rows
