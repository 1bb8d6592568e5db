"""The lab's qemu VMs: state, boot, wait for ssh, stop, drives, ssh config.

Per VM, .lab/<vm>/ holds: overlay.qcow2 (over the cached base image), drives/nvmeNN.raw (sparse),
console.log (serial console; the previous boot's is console.log.1), qemu.log (qemu's own
messages), qemu.pid, monitor.sock (human monitor, used for a clean power-down).
.lab/net/ holds the vde_switch of the private guest-to-guest network.

Networking per VM:
  eth0  qemu user netdev, restrict=on: the guest reaches nothing but ssh from 127.0.0.1:<port>
        (hostfwd) and the apt cache (guestfwd 10.0.2.100:3142 -> socat -> 127.0.0.1:3142).
  eth1  the private network: all VMs on one vde_switch (L2 on a unix socket, no host IP traffic),
        static address from lab.yaml set at boot.

Every qemu is started with -daemonize (own session: it outlives `lab up`) and found again by its
pidfile, checked against /proc/<pid>/cmdline, so a recycled pid is never signalled. `down` also
sweeps any qemu whose command line points into this checkout's .lab/ (a lost pidfile).
"""

import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .definition import REPO, SSH_CONFIG, SSH_KEY, STATE, VM, Lab

QEMU = "qemu-system-x86_64"
NET = STATE / "net"
SWITCH = NET / "switch"
SWITCH_PID = NET / "vde_switch.pid"
ACCEL_FILE = STATE / "accel"
# Where progress goes: print, or a test's collector.
Log = Callable[[str], None]

SSH_TIMEOUT = int(os.environ.get("DBZFS_LAB_SSH_TIMEOUT", "600"))  # s; TCG boots take ~40-90 s


class LabError(RuntimeError):
    pass


def rel(p: str | Path) -> str:
    """A path for messages: relative to the repo when inside it."""
    try:
        return str(Path(p).relative_to(REPO))
    except ValueError:
        return str(p)


def console_tail(vm: VM, lines: int = 25) -> str:
    try:
        text = vm.console_log.read_text(errors="replace")
    except OSError:
        return "(no console output)"
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)  # colours of systemd's status lines
    tail = [x for x in (line.strip("\r") for line in text.splitlines()) if x.strip()][-lines:]
    return "\n".join("    | " + line for line in tail) or "(console log is empty)"


def vm_error(vm: VM, what: str) -> LabError:
    qlog = vm.state_dir / "qemu.log"
    extra = ""
    if qlog.exists() and qlog.read_text(errors="replace").strip():
        extra = f"\n  qemu said ({rel(qlog)}):\n" + "\n".join(
            "    | " + x for x in qlog.read_text(errors="replace").splitlines()[-10:]
        )
    return LabError(
        f"{vm.name}: {what}\n  console log: {rel(vm.console_log)} (last lines below){extra}\n"
        f"{console_tail(vm)}"
    )


# --- processes ------------------------------------------------------------------------------------


def _cmdline(pid: int | str) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _alive(pid: int, must_contain: str) -> bool:
    args = _cmdline(pid)
    if not args:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except OSError:
        return False
    return must_contain.encode() in b" ".join(args)


def _read_pid(pidfile: str | Path, must_contain: str) -> int | None:
    try:
        pid = int(Path(pidfile).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid, must_contain) else None


def pid(vm: VM) -> int | None:
    """The pid of this VM's qemu, or None."""
    return _read_pid(vm.state_dir / "qemu.pid", str(vm.state_dir) + "/")


def stray_qemus() -> list[int]:
    """Pids of any qemu whose command line points into this checkout's .lab/ (pidfile or not)."""
    marker = (str(STATE) + "/").encode()
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            args = _cmdline(d)
            if args and b"qemu-system" in args[0] and marker in b" ".join(args):
                found.append(int(d))
    return found


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [p for p in pids if _cmdline(p)]
        if not pids:
            return []
        time.sleep(0.2)
    return [p for p in pids if _cmdline(p)]


def _kill(pids: list[int], log: Log, what: str) -> None:
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        pids = _wait_gone(pids, wait)
        if not pids:
            return
    raise LabError(f"{what}: pids {pids} survive SIGKILL")


# --- ssh ------------------------------------------------------------------------------------------


def ensure_key() -> Path:
    if not SSH_KEY.exists():
        STATE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dbzfs-lab", "-f", str(SSH_KEY)], check=True
        )
    return SSH_KEY


def write_ssh_config(lab: Lab) -> Path:
    STATE.mkdir(parents=True, exist_ok=True)
    blocks = ["# Written by `python -m lab` from lab/lab.yaml: the lab's VMs on host loopback.\n"]
    for vm in lab.all_vms.values():
        blocks.append(
            f"Host {vm.name}\n  HostName 127.0.0.1\n  Port {vm.ssh_port}\n  User root\n"
            f"  IdentityFile {SSH_KEY}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
            f"  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
        )
    tmp = SSH_CONFIG.with_suffix(".tmp")
    tmp.write_text("\n".join(blocks))
    os.replace(tmp, SSH_CONFIG)
    return SSH_CONFIG


def ssh_argv(vm: VM, command: Sequence[str] = (), connect_timeout: int = 30) -> list[str]:
    # ConnectTimeout covers the banner exchange too: a busy emulated guest needs more than 10 s.
    return [
        "ssh",
        "-F",
        str(SSH_CONFIG),
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={connect_timeout}",
        vm.name,
        *command,
    ]


def run(vm: VM, command: str | Sequence[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run a shell command on the VM: CompletedProcess with returncode, stdout, stderr (text)."""
    if not isinstance(command, str):
        command = " ".join(command)
    return subprocess.run(
        ssh_argv(vm, [command]), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def ssh_answers(vm: VM) -> bool:
    try:
        r = subprocess.run(
            ssh_argv(vm, ["true"], connect_timeout=5),
            capture_output=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# --- the private network --------------------------------------------------------------------------


def switch_pid() -> int | None:
    return _read_pid(SWITCH_PID, str(SWITCH))


def require_qemu() -> None:
    """The lab's NVMe drives need qemu's `dbcs` switch (qemu 10.0+: bookworm-backports)."""
    try:
        argv = [QEMU, "-device", "nvme,help"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise LabError(f"{QEMU} is not installed (run scripts/bootstrap lab)") from None
    if "dbcs=" not in r.stdout:
        version = subprocess.run([QEMU, "--version"], capture_output=True, text=True, timeout=60).stdout
        raise LabError(
            f"{(version.splitlines() or ['qemu'])[0]}: its NVMe device cannot turn shadow doorbells "
            "off (dbcs=off, qemu 10.0+ from bookworm-backports), and with them the lab's drives lose "
            "I/O under TCG; run scripts/bootstrap lab"
        )


def ensure_switch() -> None:
    if switch_pid():
        return
    NET.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(SWITCH, ignore_errors=True)
    SWITCH_PID.unlink(missing_ok=True)
    exe = shutil.which("vde_switch")
    if not exe:
        raise LabError("vde_switch is not installed (Debian package vde2; run scripts/bootstrap)")
    subprocess.run(
        [exe, "-s", str(SWITCH), "-m", "700", "-p", str(SWITCH_PID), "-d"],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    for _ in range(50):
        if (SWITCH / "ctl").exists() and switch_pid():
            return
        time.sleep(0.1)
    raise LabError(f"vde_switch did not start ({SWITCH})")


def stop_switch() -> None:
    p = switch_pid()
    if p:
        _kill([p], print, "vde_switch")
    shutil.rmtree(SWITCH, ignore_errors=True)
    SWITCH_PID.unlink(missing_ok=True)


# --- acceleration ---------------------------------------------------------------------------------


def accel(image_dir: Path, log: Log = print) -> str:
    """'tcg' unless KVM is proven to boot a Debian kernel here (probed once, cached in .lab/accel).

    DBZFS_LAB_ACCEL=tcg|kvm forces a choice. The probe boots the image's kernel under KVM for at
    most 20 s and looks for "Linux version" on the serial console; a paravirtual /dev/kvm (PVM)
    aborts or hangs silently, and qemu does not fall back to TCG by itself.
    """
    forced = os.environ.get("DBZFS_LAB_ACCEL")
    if forced in ("tcg", "kvm"):
        return forced
    if ACCEL_FILE.exists():
        return ACCEL_FILE.read_text().strip()
    choice = "tcg"
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        log("==> probing KVM (20 s at most)")
        out = STATE / "kvm-probe.log"
        STATE.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            [
                QEMU,
                "-accel",
                "kvm",
                "-cpu",
                "host",
                "-m",
                "512",
                "-nodefaults",
                "-display",
                "none",
                "-kernel",
                str(image_dir / "vmlinuz"),
                "-append",
                "console=ttyS0 panic=-1",
                "-serial",
                f"file:{out}",
                "-no-reboot",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and proc.poll() is None:
                if out.exists() and "Linux version" in out.read_text(errors="replace"):
                    choice = "kvm"
                    break
                time.sleep(0.5)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        verdict = "boots a Debian kernel: using it" if choice == "kvm" else "does not work here: using TCG"
        log(f"==> KVM {verdict}")
    ACCEL_FILE.write_text(choice + "\n")
    return choice


# --- one VM ---------------------------------------------------------------------------------------


def mac(vm: VM, nic: int) -> str:
    a = [int(x) for x in vm.private_address.split(".")]
    return f"52:54:{nic:02x}:{a[1]:02x}:{a[2]:02x}:{a[3]:02x}"


def drive_path(vm: VM, i: int) -> Path:
    return vm.state_dir / "drives" / f"nvme{i:02d}.raw"


def create_drives(vm: VM) -> None:
    (vm.state_dir / "drives").mkdir(parents=True, exist_ok=True)
    for i in range(vm.drive_count):
        p = drive_path(vm, i)
        if not p.exists():
            with open(p, "wb") as f:
                f.truncate(vm.drive_size)


def reset_drives(vm: VM, log: Log = print) -> None:
    if pid(vm):
        stop([vm], log=log)
    shutil.rmtree(vm.state_dir / "drives", ignore_errors=True)
    create_drives(vm)
    log(f"==> {vm.name}: {vm.drive_count} empty drives of {vm.drive_size // 2**20} MiB")


def prepare(vm: VM, image_dir: Path, log: Log = print) -> None:
    """Overlay (recreated when the base image changed) and drives."""
    vm.state_dir.mkdir(parents=True, exist_ok=True)
    overlay = vm.state_dir / "overlay.qcow2"
    base_file = vm.state_dir / "base"
    base = str(image_dir / "root.img")
    if overlay.exists() and (not base_file.exists() or base_file.read_text().strip() != base):
        log(f"==> {vm.name}: base image changed: new root disk (the drives are kept)")
        overlay.unlink()
    if not overlay.exists():
        subprocess.run(
            ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", base, str(overlay)], check=True
        )
        base_file.write_text(base + "\n")
    create_drives(vm)


def qemu_argv(vm: VM, image_dir: Path, accel_name: str, apt_port: int, apt_guest_address: str) -> list[str]:
    d = vm.state_dir
    key = base64.b64encode((SSH_KEY.with_suffix(".pub")).read_bytes().strip()).decode()
    append = (
        # mitigations=off: test VMs run only the lab's own code, and under TCG the kernel's
        # speculation barriers (retpolines, RSB filling) are emulated instructions like any other.
        # nvme_core.multipath=N: each namespace a plain PCI disk, not a multipath head; with heads,
        # ZFS records no devid or phys_path for its vdevs and ZED's autoreplace cannot match a new
        # drive to its bay (measured: 0 phys_path with, both recorded and autoreplace done without).
        "root=/dev/vda rw console=ttyS0 net.ifnames=0 mitigations=off nvme_core.multipath=N "
        f"systemd.hostname={vm.name} "
        f"dbzfs.hostname={vm.name} dbzfs.addr={vm.private_address}/{vm.private_prefix} dbzfs.sshkey={key}"
    )
    argv = [
        QEMU,
        "-name",
        f"{vm.name},process=dbzfs-lab-{vm.name}",
        "-accel",
        "kvm" if accel_name == "kvm" else "tcg,thread=multi",
    ]
    if accel_name == "kvm":
        argv += ["-cpu", "host"]
    argv += [
        "-m",
        str(vm.memory),
        "-smp",
        str(vm.vcpus),
        "-nodefaults",
        "-display",
        "none",
        "-kernel",
        str(image_dir / "vmlinuz"),
        "-initrd",
        str(image_dir / "initrd.img"),
        "-append",
        append,
        "-drive",
        # cache=unsafe: the guest's flushes stop at the host's page cache (a throwaway root disk;
        # dpkg and the servers' initialisation fsync a lot, which costs the host's disk otherwise).
        # Killing qemu still keeps every write the guest made; only a host crash would lose them.
        f"file={d / 'overlay.qcow2'},if=virtio,format=qcow2,cache=unsafe,discard=unmap",
        "-netdev",
        f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{vm.ssh_port}-:22,"
        f"guestfwd=tcp:{apt_guest_address}:{apt_port}-cmd:socat - TCP:127.0.0.1:{apt_port}",
        "-device",
        f"virtio-net-pci,netdev=n0,mac={mac(vm, 0)}",
        "-netdev",
        f"vde,id=n1,sock={SWITCH}",
        "-device",
        f"virtio-net-pci,netdev=n1,mac={mac(vm, 1)}",
    ]
    for i, serial in enumerate(vm.serials):
        argv += [
            "-drive",
            f"file={drive_path(vm, i)},if=none,id=nv{i},format=raw,cache=unsafe,discard=unmap",
            "-device",
            # dbcs=off: no shadow doorbells. With them a submission can be missed by the emulated
            # controller (a host-side race); under TCG it showed as "I/O timeout, aborting", resets
            # that repeat, and zpool/zfs blocked for minutes to hours (docs/lab.md).
            # id: lab/hotplug.py pulls a drive by it (device_del).
            f"nvme,id=nvme{i},serial={serial},drive=nv{i},dbcs=off",
        ]
    argv += [
        "-serial",
        f"file:{vm.console_log}",
        "-monitor",
        f"unix:{d / 'monitor.sock'},server=on,wait=off",
        "-pidfile",
        str(d / "qemu.pid"),
        "-daemonize",
    ]
    return argv


def start(vm: VM, image_dir: Path, accel_name: str, apt_port: int, apt_guest_address: str) -> None:
    if vm.console_log.exists():
        os.replace(vm.console_log, vm.console_log.with_suffix(".log.1"))
    argv = qemu_argv(vm, image_dir, accel_name, apt_port, apt_guest_address)
    (vm.state_dir / "qemu.cmdline").write_text(" ".join(argv) + "\n")
    with open(vm.state_dir / "qemu.log", "w") as qlog:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=qlog, stderr=subprocess.STDOUT)
    if r.returncode != 0 or not pid(vm):
        raise vm_error(vm, f"qemu did not start (rc {r.returncode})")


def _monitor(vm: VM, command: str) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(3)
            s.connect(str(vm.state_dir / "monitor.sock"))
            s.sendall(command.encode() + b"\n")
            time.sleep(0.3)
        return True
    except OSError:
        return False


def _ask_poweroff(vm: VM) -> bool:
    """`systemctl poweroff` over ssh, and the ACPI power button as well (logind acts on it)."""
    asked = _monitor(vm, "system_powerdown")
    try:
        r = subprocess.run(
            ssh_argv(vm, ["systemctl poweroff --no-block"], connect_timeout=5),
            timeout=20,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        asked = asked or r.returncode == 0
    except subprocess.TimeoutExpired:
        pass
    return asked


def stop(vms: Iterable[VM], timeout: float = 60, log: Log = print) -> None:
    """Power the VMs off cleanly (in parallel), kill what still runs after `timeout` s (0: kill at
    once). Never leaves a qemu behind."""
    running = {vm.name: (vm, pid(vm)) for vm in vms}
    running = {n: (vm, p) for n, (vm, p) in running.items() if p}
    if not running:
        return
    t0 = time.monotonic()
    asked = []
    if timeout > 0:
        for vm, _ in running.values():
            log(f"==> {vm.name}: powering off")
        threads = {
            n: threading.Thread(target=lambda vm=vm, n=n: _ask_poweroff(vm) and asked.append(n))
            for n, (vm, _) in running.items()
        }
        for t in threads.values():
            t.start()
        for t in threads.values():
            t.join()
    asked_pids = [p for n, (_, p) in running.items() if n in asked]
    left = _wait_gone(asked_pids, max(0, timeout - (time.monotonic() - t0))) + [
        p for _, p in running.values() if p not in asked_pids
    ]
    if left:
        names = [n for n, (_, p) in running.items() if p in left]
        log(
            f"==> {', '.join(names)}: "
            + (f"still running after {timeout} s: killing" if timeout > 0 else "killing")
        )
        _kill(left, log, "qemu")
    log(f"==> stopped {', '.join(running)} in {time.monotonic() - t0:.0f} s")


def pull_plug(vms: Iterable[VM], log: Log = print) -> None:
    """Power loss: SIGKILL to each qemu at once (no guest shutdown, no drain of qemu's in-flight
    I/O). What qemu already wrote to the drive files stays, as a drive keeps what it persisted."""
    running = {vm.name: pid(vm) for vm in vms}
    pids = [p for p in running.values() if p]
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    left = _wait_gone(pids, 10)
    if left:
        raise LabError(f"qemu: pids {left} survive SIGKILL")
    log(f"==> power cut: {', '.join(n for n, p in running.items() if p)}")


def wait_ssh(vm: VM, t0: float, timeout: float = SSH_TIMEOUT, log: Log = print) -> None:
    """Wait until ssh answers; a qemu that exits or a timeout raises LabError naming the console log."""
    deadline = t0 + timeout
    next_note = t0 + 60
    while True:
        if time.monotonic() > next_note:
            next_note += 60
            last = console_tail(vm, 1).strip(" |")[:100]
            log(f"==> {vm.name}: still booting after {time.monotonic() - t0:.0f} s (console: {last})")
        if not pid(vm):
            raise vm_error(vm, "qemu exited while booting")
        if port_open(vm.ssh_port) and ssh_answers(vm):
            log(f"==> {vm.name}: ssh up after {time.monotonic() - t0:.0f} s")
            return
        if time.monotonic() > deadline:
            raise vm_error(vm, f"ssh did not answer on 127.0.0.1:{vm.ssh_port} within {timeout} s")
        time.sleep(2)


def wait_all(vms: Iterable[VM], t0: float, log: Log = print) -> None:
    """Wait for ssh on all VMs in parallel; raise one LabError listing every failure."""
    errors = {}

    def one(vm: VM) -> None:
        try:
            wait_ssh(vm, t0, log=log)
        except LabError as e:
            errors[vm.name] = e

    threads = [threading.Thread(target=one, args=(vm,), daemon=True) for vm in vms]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        err = LabError("\n".join(str(e) for e in errors.values()))
        err.failed = sorted(errors)
        raise err
