"""host_scripts/zfs_metrics.py: the node_exporter textfile collector run on each database host.

The fixtures in fixtures/zfs_metrics/ are OpenZFS 2.3.2's outputs for pool states the lab cannot
easily produce (spare in use, checksum and data errors, scrub running, several pools), written by
fixtures/zfs_metrics/generate.py after zpool's own printing code. fixtures/zfs_metrics/real/ holds
outputs captured on the lab's ZFS 2.3.2 VMs: every file there is parsed, the known ones checked value
by value, and a status captured both as JSON and as text must give the same samples.
"""

import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host_scripts import zfs_metrics as zm

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "host_scripts" / "zfs_metrics.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "zfs_metrics"
REAL = FIXTURES / "real"
PROMTOOL = REPO / ".venv" / "bin" / "promtool"

SCENARIOS = ["healthy", "degraded", "spare-inuse", "errors", "scrubbing", "never-scrubbed", "two-pools"]
POOL_METRICS = {
    "dbzfs_zpool_online",
    "dbzfs_zpool_state",
    "dbzfs_zpool_errors",
    "dbzfs_zpool_device_errors",
    "dbzfs_zpool_data_errors",
    "dbzfs_zpool_scrub_end_timestamp_seconds",
    "dbzfs_zpool_scrub_errors",
    "dbzfs_zpool_scrub_in_progress",
    "dbzfs_zpool_spares",
    "dbzfs_zpool_spares_in_use",
}
LIST_METRICS = {
    "dbzfs_zpool_size_bytes",
    "dbzfs_zpool_allocated_bytes",
    "dbzfs_zpool_free_bytes",
    "dbzfs_zpool_fragmentation_percent",
    "dbzfs_zpool_capacity_percent",
}


def drives(host, numbers):
    return [f"nvme-QEMU_NVMe_Ctrl_{host}-nvme{n:02d}" for n in numbers]


def pool(
    state="ONLINE",
    errors=(0, 0, 0),
    device_errors=None,
    devices=None,
    data_errors=0,
    scrub_end=0,
    scrub_errors=0,
    scrub_in_progress=0,
    spares=2,
    spares_in_use=0,
):
    return {
        "state": state,
        "errors": errors,
        "device_errors": device_errors or {},
        "devices": devices if devices is not None else drives("db1", range(24)),
        "data_errors": data_errors,
        "scrub_end": scrub_end,
        "scrub_errors": scrub_errors,
        "scrub_in_progress": scrub_in_progress,
        "spares": spares,
        "spares_in_use": spares_in_use,
    }


SCRUBBED = 1749342240  # the healthy pool's last scrub started Sun Jun  8 00:24:00 2025 UTC
EXPECTED = {
    "healthy": {"dbpool": pool(scrub_end=SCRUBBED + 3)},
    "degraded": {"dbpool": pool(state="DEGRADED", scrub_end=SCRUBBED + 3)},
    # nvme00 faulted, spare nvme24 resilvered in its place: the resilver is the last scan, so no
    # finished scrub is known; nvme24 is counted once, from the tree (the spares section has no counters).
    "spare-inuse": {
        "dbpool": pool(
            state="DEGRADED",
            errors=(3, 37, 0),
            device_errors={drives("db1", [0])[0]: (3, 37, 0)},
            devices=drives("db1", range(25)),
            spares_in_use=1,
        )
    },
    # Checksum errors on both sides of mirror-5 (and 4 on mirror-5 itself, not a leaf: not summed).
    "errors": {
        "dbpool": pool(
            errors=(2, 0, 12),
            device_errors={drives("db1", [10])[0]: (0, 0, 7), drives("db1", [11])[0]: (2, 0, 5)},
            data_errors=2,
            scrub_end=1749525129,
            scrub_errors=2,
        )
    },
    "scrubbing": {"dbpool": pool(scrub_in_progress=1)},
    "never-scrubbed": {"dbpool": pool(spares=0)},
    "two-pools": {
        "dbpool": pool(devices=drives("pg1", range(24)), scrub_end=SCRUBBED + 5, spares=0),
        # its last scrub was canceled: no finished scrub
        "backup": pool(devices=drives("pg1", [24, 25]), spares=0),
    },
}

SIZE, ALLOC = 6039797760, 2115502080
LIST_EXPECTED = {
    "healthy": {"dbpool": (SIZE, ALLOC, SIZE - ALLOC, 1, 35)},
    "degraded": {"dbpool": (SIZE, ALLOC, SIZE - ALLOC, 1, 35)},
    "spare-inuse": {"dbpool": (SIZE, ALLOC, SIZE - ALLOC, 1, 35)},
    "errors": {"dbpool": (SIZE, ALLOC, SIZE - ALLOC, 2, 35)},
    "scrubbing": {"dbpool": (SIZE, ALLOC, SIZE - ALLOC, 1, 35)},
    "never-scrubbed": {"dbpool": (SIZE, 2621440, SIZE - 2621440, 0, 0)},
    "two-pools": {
        "dbpool": (SIZE, ALLOC, SIZE - ALLOC, 3, 35),
        "backup": (503316480, 104857600, 398458880, 0, 20),
    },
}


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """zpool status prints dates in local time: the fixtures' are UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def fixture(name):
    return (FIXTURES / name).read_text()


def status_fixture(scenario, kind):
    if kind == "json":
        return zm.zpool_status_json_samples(fixture(f"zpool-status-j-json-int.{scenario}.json"))
    return zm.zpool_status_text_samples(fixture(f"zpool-status-p.{scenario}.txt"))


def by_series(samples):
    """{(name, {labels}) as a hashable key: value}, failing on a repeated series."""
    series = {}
    for s in samples:
        key = (s.name, s.labels)
        assert key not in series, f"repeated series {key}"
        series[key] = s.value
    return series


def value(samples, name, **labels):
    matches = [s.value for s in samples if s.name == name and dict(s.labels) == labels]
    assert len(matches) == 1, f"{name}{labels}: {len(matches)} samples"
    return matches[0]


# --- The exposition format, checked by a parser of its own (and promtool when there is one) ---------

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def _unescape(text):
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), text)


def parse_exposition(text):
    """Prometheus text format 0.0.4, strictly: every family with one # HELP and one # TYPE gauge
    before its samples, families not interleaved, label values escaped, no repeated series.
    Returns {(name, ((label, value), ...)): value}."""
    assert text.endswith("\n") and not text.endswith("\n\n")
    series, help_seen, type_seen, finished = {}, set(), set(), set()
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        where = f"line {number}: {line!r}"
        if line.startswith("#"):
            match = re.fullmatch(r"# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)", line)
            assert match, where
            kind, name, rest = match.groups()
            if name != current:
                assert name not in finished, f"family {name} interleaved, {where}"
                if current:
                    finished.add(current)
                current = name
            seen = help_seen if kind == "HELP" else type_seen
            assert name not in seen, f"second {kind}, {where}"
            seen.add(name)
            if kind == "TYPE":
                assert rest == "gauge", where
            continue
        match = _SAMPLE.fullmatch(line)
        assert match, where
        name, label_text, number_text = match.groups()
        assert name == current and name in help_seen and name in type_seen, f"no HELP/TYPE first, {where}"
        labels = ()
        if label_text:
            pairs = _LABEL.findall(label_text)
            rebuilt = ",".join(f'{k}="{v}"' for k, v in pairs)
            assert rebuilt == label_text, f"bad labels, {where}"
            labels = tuple((k, _unescape(v)) for k, v in pairs)
            assert len({k for k, _ in labels}) == len(labels), where
        key = (name, labels)
        assert key not in series, f"repeated series, {where}"
        series[key] = float(number_text)
    return series


def check_with_promtool(text):
    if not PROMTOOL.exists():
        return
    result = subprocess.run([str(PROMTOOL), "check", "metrics"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --- zpool status -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["json", "text"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_pool_metric(scenario, kind):
    samples = status_fixture(scenario, kind)
    by_series(samples)
    expected = EXPECTED[scenario]
    assert {dict(s.labels)["pool"] for s in samples} == set(expected)
    for name, want in expected.items():
        mine = [s for s in samples if dict(s.labels)["pool"] == name]
        assert {s.name for s in mine} == POOL_METRICS
        assert value(mine, "dbzfs_zpool_online", pool=name) == int(want["state"] == "ONLINE")
        states = [s for s in mine if s.name == "dbzfs_zpool_state"]
        assert [(dict(s.labels)["state"], s.value) for s in states] == [(want["state"], 1)]
        for kind_index, kind_name in enumerate(zm.ERROR_TYPES):
            assert value(mine, "dbzfs_zpool_errors", pool=name, type=kind_name) == want["errors"][kind_index]
        devices = {}
        for s in mine:
            if s.name == "dbzfs_zpool_device_errors":
                labels = dict(s.labels)
                devices.setdefault(labels["device"], {})[labels["type"]] = s.value
        assert sorted(devices) == sorted(want["devices"])
        for device, counts in devices.items():
            assert counts == dict(
                zip(zm.ERROR_TYPES, want["device_errors"].get(device, (0, 0, 0)), strict=True)
            )
        assert value(mine, "dbzfs_zpool_data_errors", pool=name) == want["data_errors"]
        assert value(mine, "dbzfs_zpool_scrub_end_timestamp_seconds", pool=name) == want["scrub_end"]
        assert value(mine, "dbzfs_zpool_scrub_errors", pool=name) == want["scrub_errors"]
        assert value(mine, "dbzfs_zpool_scrub_in_progress", pool=name) == want["scrub_in_progress"]
        assert value(mine, "dbzfs_zpool_spares", pool=name) == want["spares"]
        assert value(mine, "dbzfs_zpool_spares_in_use", pool=name) == want["spares_in_use"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_json_and_text_agree(scenario):
    assert status_fixture(scenario, "json") == status_fixture(scenario, "text")


def test_scrub_paused_counts_as_in_progress():
    text = fixture("zpool-status-p.scrubbing.txt").replace(
        "  scan: scrub in progress since Wed Jun 11 02:00:01 2025",
        "  scan: scrub paused since Wed Jun 11 02:03:00 2025\n\tscrub started on Wed Jun 11 02:00:01 2025",
    )
    assert value(zm.zpool_status_text_samples(text), "dbzfs_zpool_scrub_in_progress", pool="dbpool") == 1


def test_text_data_errors_listed_with_v():
    text = fixture("zpool-status-p.errors.txt").replace(
        "errors: 2 data errors, use '-v' for a list",
        "errors: Permanent errors have been detected in the following files:\n\n"
        "        dbpool/datastore/mysql:<0x83>\n        /datastore/mysql/app/t1.ibd\n",
    )
    assert value(zm.zpool_status_text_samples(text), "dbzfs_zpool_data_errors", pool="dbpool") == 2


def test_text_log_and_cache_devices_count():
    """Class sections (logs, cache) have counters too; spares have none."""
    text = fixture("zpool-status-p.healthy.txt").replace(
        "\tspares\n",
        "\tlogs\t\n"
        "\t  nvme-QEMU_NVMe_Ctrl_db1-nvme30    ONLINE       0     1     0\n"
        "\tcache\n"
        "\t  nvme-QEMU_NVMe_Ctrl_db1-nvme31    ONLINE       4     0     0\n"
        "\tspares\n",
    )
    samples = zm.zpool_status_text_samples(text)
    assert value(samples, "dbzfs_zpool_errors", pool="dbpool", type="read") == 4
    assert value(samples, "dbzfs_zpool_errors", pool="dbpool", type="write") == 1
    assert value(samples, "dbzfs_zpool_spares", pool="dbpool") == 2


def test_status_rejects_garbage():
    with pytest.raises(ValueError):
        zm.zpool_status_json_samples("zpool: invalid option 'j'\n")
    with pytest.raises(ValueError):
        zm.zpool_status_json_samples('{"pools": {"dbpool": {"name": "dbpool"}}}')
    with pytest.raises(ValueError):
        zm.zpool_status_text_samples("  pool: dbpool\n state: ONLINE\n")


def test_no_pools():
    assert zm.zpool_status_json_samples('{"output_version":{},"pools":{}}\n') == []
    assert zm.zpool_status_text_samples("") == []


# --- zpool list, zfs list -----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_zpool_list(scenario):
    samples = zm.zpool_list_samples(fixture(f"zpool-list-Hp.{scenario}.txt"))
    by_series(samples)
    names = [
        "dbzfs_zpool_size_bytes",
        "dbzfs_zpool_allocated_bytes",
        "dbzfs_zpool_free_bytes",
        "dbzfs_zpool_fragmentation_percent",
        "dbzfs_zpool_capacity_percent",
    ]
    for name, numbers in LIST_EXPECTED[scenario].items():
        for metric, number in zip(names, numbers, strict=True):
            assert value(samples, metric, pool=name) == number
    assert len(samples) == 5 * len(LIST_EXPECTED[scenario])


def test_zpool_list_dash_gives_no_sample():
    """fragmentation is "-" without spacemap_histogram; an unavailable pool has "-" for every size."""
    samples = zm.zpool_list_samples(
        "old\t1073741824\t1048576\t1072693248\t-\t0\tONLINE\ngone\t-\t-\t-\t-\t-\tUNAVAIL\n"
    )
    assert {(s.name, dict(s.labels)["pool"]) for s in samples} == {
        ("dbzfs_zpool_size_bytes", "old"),
        ("dbzfs_zpool_allocated_bytes", "old"),
        ("dbzfs_zpool_free_bytes", "old"),
        ("dbzfs_zpool_capacity_percent", "old"),
    }


def test_zpool_list_rejects_other_columns():
    with pytest.raises(ValueError):
        zm.zpool_list_samples("NAME   SIZE  ALLOC   FREE\ndbpool  5.25G  1.97G  3.28G\n")


def test_newest_snapshot_per_dataset():
    samples = zm.zfs_snapshot_samples(fixture("zfs-list-Hp-t-snapshot.txt"))
    assert by_series(samples) == {
        ("dbzfs_zfs_newest_snapshot_timestamp_seconds", (("dataset", "dbpool/datastore"),)): 1749340800,
        ("dbzfs_zfs_newest_snapshot_timestamp_seconds", (("dataset", "dbpool/datastore/mysql"),)): 1749348001,
        (
            "dbzfs_zfs_newest_snapshot_timestamp_seconds",
            (("dataset", "dbpool/datastore/mysql-log"),),
        ): 1749348002,
    }
    assert zm.zfs_snapshot_samples(fixture("zfs-list-Hp-t-snapshot.empty.txt")) == []
    with pytest.raises(ValueError):
        zm.zfs_snapshot_samples("dbpool/datastore\t1749340800\n")


# --- Rendering ----------------------------------------------------------------------------------------


def test_label_values_are_escaped():
    tricky = 'a\\b"c\nd'
    text = zm.render([zm.sample("dbzfs_zfs_newest_snapshot_timestamp_seconds", 7, dataset=tricky)])
    assert 'dataset="a\\\\b\\"c\\nd"} 7\n' in text
    assert parse_exposition(text) == {
        ("dbzfs_zfs_newest_snapshot_timestamp_seconds", (("dataset", tricky),)): 7.0
    }
    check_with_promtool(text)


def test_render_refuses_unknown_metrics_and_repeated_series():
    with pytest.raises(ValueError):
        zm.render([zm.sample("dbzfs_something_else", 1)])
    with pytest.raises(ValueError):
        zm.render(
            [zm.sample("dbzfs_zpool_online", 1, pool="p"), zm.sample("dbzfs_zpool_online", 0, pool="p")]
        )


def test_every_metric_has_help():
    assert all(help_text.strip() and "\n" not in help_text for help_text in zm.METRICS.values())


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_output_is_valid_exposition_format(scenario):
    samples = (
        status_fixture(scenario, "json")
        + zm.zpool_list_samples(fixture(f"zpool-list-Hp.{scenario}.txt"))
        + zm.zfs_snapshot_samples(fixture("zfs-list-Hp-t-snapshot.txt"))
        + [
            zm.sample("dbzfs_zfs_metrics_last_success_timestamp_seconds", 1749600000),
            zm.sample("dbzfs_zfs_metrics_success", 1),
        ]
    )
    text = zm.render(samples)
    parsed = parse_exposition(text)
    assert parsed == {key: float(v) for key, v in by_series(samples).items()}
    assert {name for name, _ in parsed} == set(zm.METRICS)
    check_with_promtool(text)


# --- Writing the file ---------------------------------------------------------------------------------


def test_write_is_atomic_and_world_readable(tmp_path):
    out = tmp_path / "dbzfs_zfs.prom"
    zm.write_atomically(str(out), "old\n")
    zm.write_atomically(str(out), "new\n")
    assert out.read_text() == "new\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["dbzfs_zfs.prom"]


def test_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    out = tmp_path / "dbzfs_zfs.prom"
    out.write_text("old\n")
    seen = []

    def fail(src, dst):
        seen.append(os.path.basename(src))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(zm.os, "replace", fail)
    with pytest.raises(OSError):
        zm.write_atomically(str(out), "new\n" * 1000)
    assert out.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["dbzfs_zfs.prom"]
    # node_exporter reads *.prom only: the temporary file never looks like one
    assert seen and seen[0].startswith(".") and not seen[0].endswith(".prom")


def test_stale_temporaries_of_a_killed_run_are_removed(tmp_path):
    out = tmp_path / "dbzfs_zfs.prom"
    names = (".dbzfs_zfs.prom.k1l2.tmp", ".dbzfs_zfs.prom.r3n4.tmp", "x.tmp")
    stale, fresh, other = (tmp_path / name for name in names)
    for path in (stale, fresh, other):
        path.write_text("half")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    os.utime(other, (time.time() - 7200, time.time() - 7200))
    zm.remove_stale_temporaries(str(out))
    assert sorted(os.listdir(tmp_path)) == sorted([fresh.name, other.name])


READER = """
import os, sys
path, ready, stop, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
valid = {"a" * size + "\\n", "b" * size + "\\n"}
reads, seen = 0, set()
while not os.path.exists(stop):
    with open(path) as handle:
        text = handle.read()
    if text not in valid:
        print("mixed or partial:", len(text), repr(text[:20]), repr(text[-20:]))
        sys.exit(1)
    seen.add(text[0])
    reads += 1
    if reads == 1:
        open(ready, "w").close()
print(reads, "".join(sorted(seen)))
"""


def test_a_reader_sees_the_old_or_the_new_file_never_a_mix(tmp_path):
    """Another process (as node_exporter) reading all along sees one whole file or the other.
    A process, not a thread: pyinfra's gevent patches threading when the whole suite runs."""
    out, ready, stop = tmp_path / "dbzfs_zfs.prom", tmp_path / "ready", tmp_path / "stop"
    size = 300_000
    old, new = "a" * size + "\n", "b" * size + "\n"
    zm.write_atomically(str(out), old)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(out), str(ready), str(stop), str(size)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert reader.poll() is None and time.monotonic() < deadline, "the reader did not start"
            time.sleep(0.01)
        for i in range(100):
            zm.write_atomically(str(out), new if i % 2 == 0 else old)
    finally:
        stop.touch()
        output, _ = reader.communicate(timeout=30)
    assert reader.returncode == 0, output
    assert int(output.split()[0]) > 1


# --- main(), end to end with fake zpool and zfs on PATH ----------------------------------------------


def fake_commands(tmp_path, scenario="healthy", zpool_json=None, zfs=None, zpool=None):
    """tmp_path/bin with zpool and zfs scripts answering like a host in `scenario`. zpool_json,
    zfs and zpool replace the matching script bodies."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    status_json = FIXTURES / f"zpool-status-j-json-int.{scenario}.json"
    status_text = FIXTURES / f"zpool-status-p.{scenario}.txt"
    listing = FIXTURES / f"zpool-list-Hp.{scenario}.txt"
    snapshots = FIXTURES / "zfs-list-Hp-t-snapshot.txt"
    scripts = {
        "zpool": zpool
        or f"""
case "$*" in
  "status -j --json-int") {zpool_json or f"exec cat '{status_json}'"} ;;
  "status -p") exec cat '{status_text}' ;;
  "list -Hp -o name,size,allocated,free,fragmentation,capacity,health") exec cat '{listing}' ;;
  *) echo "unexpected: zpool $*" >&2; exit 99 ;;
esac
""",
        "zfs": zfs
        or f"""
case "$*" in
  "list -Hp -t snapshot -o name,creation") exec cat '{snapshots}' ;;
  *) echo "unexpected: zfs $*" >&2; exit 99 ;;
esac
""",
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return bin_dir


def run_main(tmp_path, bin_dir, *extra):
    """The script as the systemd unit runs it: python3 zfs_metrics.py --output FILE."""
    out = tmp_path / "textfile" / "dbzfs_zfs.prom"
    out.parent.mkdir(exist_ok=True)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "TZ": "UTC", "LANG": "C.UTF-8"}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--output", str(out), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    return result, out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_main_end_to_end(tmp_path, scenario):
    before = int(time.time())
    result, out = run_main(tmp_path, fake_commands(tmp_path, scenario))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    text = out.read_text()
    parsed = parse_exposition(text)
    check_with_promtool(text)
    expected = (
        status_fixture(scenario, "json")
        + zm.zpool_list_samples(fixture(f"zpool-list-Hp.{scenario}.txt"))
        + zm.zfs_snapshot_samples(fixture("zfs-list-Hp-t-snapshot.txt"))
    )
    for key, number in by_series(expected).items():
        assert parsed.pop(key) == number
    assert parsed.pop(("dbzfs_zfs_metrics_success", ())) == 1
    assert before <= parsed.pop(("dbzfs_zfs_metrics_last_success_timestamp_seconds", ())) <= time.time()
    assert parsed == {}
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert os.listdir(out.parent) == [out.name]


def test_main_reads_the_text_status_when_json_is_missing(tmp_path):
    """A ZFS older than 2.3 has no -j: the text layout gives the same metrics."""
    old_zpool = "echo \"invalid option 'j'\" >&2; echo usage: >&2; exit 2"
    result, out = run_main(tmp_path, fake_commands(tmp_path, "spare-inuse", zpool_json=old_zpool))
    assert result.returncode == 0
    assert "read zpool status -p instead" in result.stderr
    parsed = parse_exposition(out.read_text())
    for key, number in by_series(status_fixture("spare-inuse", "json")).items():
        assert parsed[key] == number
    assert parsed[("dbzfs_zfs_metrics_success", ())] == 1


def test_failing_command_writes_the_rest_with_success_0(tmp_path):
    out = tmp_path / "textfile" / "dbzfs_zfs.prom"
    out.parent.mkdir()
    out.write_text(
        "# HELP dbzfs_zfs_metrics_last_success_timestamp_seconds x\n"
        "# TYPE dbzfs_zfs_metrics_last_success_timestamp_seconds gauge\n"
        "dbzfs_zfs_metrics_last_success_timestamp_seconds 1749600000\n"
    )
    broken_zfs = "echo 'internal error: out of memory' >&2; exit 1"
    result, out = run_main(tmp_path, fake_commands(tmp_path, "degraded", zfs=broken_zfs))
    assert result.returncode == 1
    assert "zfs list -Hp -t snapshot -o name,creation exited with status 1: internal error" in result.stderr
    parsed = parse_exposition(out.read_text())
    assert parsed[("dbzfs_zfs_metrics_success", ())] == 0
    # the previous run's success time stays: an alert on its age keeps counting
    assert parsed[("dbzfs_zfs_metrics_last_success_timestamp_seconds", ())] == 1749600000
    assert parsed[("dbzfs_zpool_online", (("pool", "dbpool"),))] == 0
    assert parsed[("dbzfs_zpool_size_bytes", (("pool", "dbpool"),))] == SIZE
    assert not any(name == "dbzfs_zfs_newest_snapshot_timestamp_seconds" for name, _ in parsed)
    assert os.listdir(out.parent) == [out.name]


def test_every_status_command_failing(tmp_path):
    """No earlier file: no last-success sample at all; zpool list's metrics are still written."""
    zpool_json = "echo 'cannot open /dev/zfs' >&2; exit 1"
    bin_dir = fake_commands(tmp_path, "healthy", zpool_json=zpool_json)
    zpool = (bin_dir / "zpool").read_text().replace('"status -p") exec cat', '"status -p") exit 1; cat')
    (bin_dir / "zpool").write_text(zpool)
    result, out = run_main(tmp_path, bin_dir)
    assert result.returncode == 1
    assert "zpool status -j --json-int exited with status 1: cannot open /dev/zfs" in result.stderr
    assert "zpool status -p exited with status 1" in result.stderr
    parsed = parse_exposition(out.read_text())
    assert parsed[("dbzfs_zfs_metrics_success", ())] == 0
    assert ("dbzfs_zfs_metrics_last_success_timestamp_seconds", ()) not in parsed
    assert not any(name in POOL_METRICS for name, _ in parsed)
    assert parsed[("dbzfs_zpool_size_bytes", (("pool", "dbpool"),))] == SIZE


def test_missing_zfs_tools(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if shutil.which("zpool", path=f"{bin_dir}:/usr/bin:/bin") or shutil.which(
        "zfs", path=f"{bin_dir}:/usr/bin:/bin"
    ):
        pytest.skip("this machine has zpool/zfs in /usr/bin or /bin")
    result, out = run_main(tmp_path, bin_dir)
    assert result.returncode == 1
    assert "zpool status -j --json-int: No such file or directory" in result.stderr
    assert parse_exposition(out.read_text()) == {("dbzfs_zfs_metrics_success", ()): 0}


def test_hanging_command_times_out(tmp_path):
    bin_dir = fake_commands(tmp_path, "healthy", zfs="exec sleep 30")
    started = time.monotonic()
    result, out = run_main(tmp_path, bin_dir, "--timeout", "1")
    assert time.monotonic() - started < 20
    assert result.returncode == 1
    assert "zfs list -Hp -t snapshot -o name,creation: no answer within 1 s" in result.stderr
    assert parse_exposition(out.read_text())[("dbzfs_zfs_metrics_success", ())] == 0


def test_hanging_zpool_status_is_not_asked_twice(tmp_path):
    bin_dir = fake_commands(tmp_path, "healthy", zpool_json="exec sleep 30")
    zpool = (bin_dir / "zpool").read_text().replace('"status -p") exec', '"status -p") touch asked; exec')
    (bin_dir / "zpool").write_text(zpool)
    result, out = run_main(tmp_path, bin_dir, "--timeout", "1")
    assert result.returncode == 1
    assert "zpool status -j --json-int: no answer within 1 s" in result.stderr
    assert not (tmp_path / "asked").exists()
    parsed = parse_exposition(out.read_text())
    assert parsed[("dbzfs_zfs_metrics_success", ())] == 0
    assert parsed[("dbzfs_zpool_size_bytes", (("pool", "dbpool"),))] == SIZE


def test_unwritable_output_exits_non_zero(tmp_path):
    result, _ = run_main(tmp_path, fake_commands(tmp_path), "--output", str(tmp_path / "missing" / "x.prom"))
    assert result.returncode == 2
    assert "cannot write" in result.stderr


def test_importing_runs_nothing():
    """The unit tests import the script: main() only under __main__, nothing run at import."""
    source = SCRIPT.read_text()
    assert source.rstrip().endswith('if __name__ == "__main__":\n    sys.exit(main(sys.argv[1:]))')
    assert zm.ZPOOL_STATUS_JSON == ["zpool", "status", "-j", "--json-int"]


def test_standard_library_only():
    imported = set(re.findall(r"^(?:from|import) ([a-z_]+)", SCRIPT.read_text(), re.MULTILINE))
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


# --- Real captures from the lab's ZFS 2.3.2 VMs (fixtures/zfs_metrics/real/), when present -----------


def real(pattern):
    return sorted(REAL.glob(pattern)) if REAL.is_dir() else []


@pytest.mark.parametrize("path", real("zpool-status-j-json-int*.json"), ids=lambda p: p.name)
def test_real_status_json(path):
    samples = zm.zpool_status_json_samples(path.read_text())
    assert samples
    for name in {dict(s.labels)["pool"] for s in samples}:
        assert {s.name for s in samples if dict(s.labels)["pool"] == name} == POOL_METRICS
    parse_exposition(zm.render(samples))
    text = path.with_name(
        path.name.replace("zpool-status-j-json-int", "zpool-status-p").replace(".json", ".txt")
    )
    if text.exists():  # the same moment, read both ways (dates in the capture's local time: UTC in the lab)
        assert samples == zm.zpool_status_text_samples(text.read_text())


REAL_EXPECTED = {
    # pg1 in the lab, dbpool scrubbed at 00:04:16 UTC, no spares (zpool_spares = 0)
    "healthy": pool(devices=drives("pg1", range(24)), scrub_end=1796083456, spares=0),
    "degraded": pool(state="DEGRADED", devices=drives("pg1", range(24)), scrub_end=1796083456, spares=0),
    "resilvered": pool(devices=drives("pg1", range(24)), scrub_end=1796083456, spares=0),
}


@pytest.mark.parametrize("kind", ["json", "text"])
@pytest.mark.parametrize("state", sorted(REAL_EXPECTED))
def test_real_captures_every_metric(state, kind):
    """The lab's captures (pg1, ZFS 2.3.2) with what they show, read both ways."""
    name = f"zpool-status-j-json-int.{state}.json" if kind == "json" else f"zpool-status-p.{state}.txt"
    if not (REAL / name).exists():
        pytest.skip(f"no real/{name}")
    parse = zm.zpool_status_json_samples if kind == "json" else zm.zpool_status_text_samples
    samples = parse((REAL / name).read_text())
    want = REAL_EXPECTED[state]
    assert value(samples, "dbzfs_zpool_online", pool="dbpool") == int(want["state"] == "ONLINE")
    assert value(samples, "dbzfs_zpool_state", pool="dbpool", state=want["state"]) == 1
    devices = {dict(s.labels)["device"] for s in samples if s.name == "dbzfs_zpool_device_errors"}
    assert devices == set(want["devices"])
    assert {s.value for s in samples if s.name in ("dbzfs_zpool_errors", "dbzfs_zpool_device_errors")} == {0}
    for metric, key in [
        ("dbzfs_zpool_data_errors", "data_errors"),
        ("dbzfs_zpool_scrub_end_timestamp_seconds", "scrub_end"),
        ("dbzfs_zpool_scrub_errors", "scrub_errors"),
        ("dbzfs_zpool_scrub_in_progress", "scrub_in_progress"),
        ("dbzfs_zpool_spares", "spares"),
        ("dbzfs_zpool_spares_in_use", "spares_in_use"),
    ]:
        assert value(samples, metric, pool="dbpool") == want[key], metric


def test_real_list_and_snapshots():
    if not (REAL / "zpool-list-Hp.healthy.txt").exists():
        pytest.skip("no real captures")
    samples = zm.zpool_list_samples((REAL / "zpool-list-Hp.healthy.txt").read_text())
    assert by_series(samples) == {
        ("dbzfs_zpool_size_bytes", (("pool", "dbpool"),)): 6039797760,
        ("dbzfs_zpool_allocated_bytes", (("pool", "dbpool"),)): 11640832,
        ("dbzfs_zpool_free_bytes", (("pool", "dbpool"),)): 6028156928,
        ("dbzfs_zpool_fragmentation_percent", (("pool", "dbpool"),)): 1,
        ("dbzfs_zpool_capacity_percent", (("pool", "dbpool"),)): 0,
    }
    snapshots = zm.zfs_snapshot_samples((REAL / "zfs-list-Hp-t-snapshot.txt").read_text())
    assert {dict(s.labels)["dataset"]: s.value for s in snapshots} == {
        "dbpool/datastore": 1796083987,
        "dbpool/datastore/postgresql": 1796083992,
        "dbpool/datastore/postgresql-wal": 1796083987,
    }
    assert zm.zfs_snapshot_samples((REAL / "zfs-list-Hp-t-snapshot.none.txt").read_text()) == []


@pytest.mark.parametrize("path", real("zpool-status-p*.txt"), ids=lambda p: p.name)
def test_real_status_text(path):
    samples = zm.zpool_status_text_samples(path.read_text())
    assert samples
    parse_exposition(zm.render(samples))


@pytest.mark.parametrize("path", real("zpool-list-Hp*.txt"), ids=lambda p: p.name)
def test_real_zpool_list(path):
    samples = zm.zpool_list_samples(path.read_text())
    assert {s.name for s in samples} >= LIST_METRICS - {"dbzfs_zpool_fragmentation_percent"}
    parse_exposition(zm.render(samples))


@pytest.mark.parametrize("path", real("zfs-list-Hp*.txt"), ids=lambda p: p.name)
def test_real_snapshots(path):
    text = zm.render(zm.zfs_snapshot_samples(path.read_text()))
    if text:
        parse_exposition(text)
