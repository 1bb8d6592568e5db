"""`python -m lab COMMAND` (also `./dbzfs lab COMMAND`, `./dbzfs converge`)."""

import argparse
import os
import sys
import time

from . import aptcache, control, image, vagrant_box, vm as vmmod
from .definition import LabDefinitionError, load
from .vm import LabError

USAGE = """python -m lab COMMAND

  image [bare]        build the guest image if needed (cached in /var/cache/dbzfs-lab/images);
                      bare: the variant without ZFS that bare_vms boot from
  up [--down-on-error] [NAME...]
                      build the image if needed, start the apt cache, boot the VMs (in parallel),
                      wait until ssh answers; VMs already running are left alone. Without
                      names: the lab's VMs; joining_vms, bare_vms and backup_vms (lab.yaml) boot
                      only when named; --down-on-error: power the whole lab off if anything fails
  status              the image, the apt cache and each VM
  ssh NAME [CMD...]   a shell (or a command) on a VM as root; CMD's words go to the VM as typed
                      (`ssh db1 zfs --help` is zfs's help), the exit status is CMD's (ssh's)
  reset-drives NAME   stop the VM if running, recreate its empty NVMe drive files
  down [--timeout S] [--cache] [NAME...]
                      power VMs off (all by default: no qemu is left behind; --timeout S before
                      killing, default 60; --cache also stops the apt cache, which is otherwise
                      left running on 127.0.0.1:3142 for the next `up`)
  wipe [NAME...]      stopped VMs only: fresh root disks (new overlays) and empty drives
  converge [--with-backup] [--down-on-error]
                      up, then pyinfra inventories/lab.py deploy.py, then the tests/infra checks;
                      --with-backup: the backup VM too (lab.yaml backup_vms), with
                      inventories/lab_backup.py
  ssh-config          (re)write .lab/ssh_config and print its path
  vagrant-box [--apt-proxy URL]
                      a Vagrant box for libvirt from the bare image (vagrant box add --name
                      dbzfs/SUITE FILE, the lab's suite; DBZFS_VAGRANT_BOX=dbzfs/SUITE vagrant up)

COMMAND -h (or --help, anywhere but in ssh's CMD after its first word) prints the command's usage
and does nothing else.
Exit status: 0 done, 1 failed (interrupted too), 2 refused or misused (a bad argument, an unknown
command or VM, a lab.yaml that does not load: refused before anything ran); `ssh NAME CMD`: CMD's.
"""

HELP = ("-h", "--help")


def _blocks(usage: str) -> dict[str, str]:
    """Each command's paragraph of USAGE by its name: a line indented two spaces starts one, lines
    indented further continue it, anything else ends it."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in usage.splitlines()[1:]:
        if line.startswith("  ") and line[2:3] not in ("", " "):
            current = blocks.setdefault(line.split()[0], [])
            current.append(line)
        elif line.startswith("   ") and current is not None:
            current.append(line)
        else:
            current = None
    return {name: "\n".join(lines) for name, lines in blocks.items()}


COMMANDS = _blocks(USAGE)


def synopsis(command: str) -> str:
    """The command's first words in USAGE, e.g. `reset-drives NAME`."""
    return COMMANDS[command].splitlines()[0].strip().partition("  ")[0]


def command_usage(command: str) -> str:
    """`usage: python -m lab SYNOPSIS` and the command's description, from USAGE."""
    first, *rest = COMMANDS[command].splitlines()
    description = first.strip().partition("  ")[2]
    lines = [description.strip(), *(line.strip() for line in rest)]
    body = "\n".join(f"  {line}" for line in lines if line)
    return f"usage: python -m lab {synopsis(command)}\n\n{body}\n"


def _help_for(argv: list[str]) -> str | None:
    """What -h/--help in argv asks for: a command's name, "" for the whole usage, None if not asked.
    It counts anywhere in the arguments but in ssh's CMD after its first word: that goes to the VM."""
    command = next((x for x in argv if x in COMMANDS), "")
    scope = argv[: argv.index("ssh") + 3] if command == "ssh" else argv
    return command if any(x in HELP for x in scope) else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m lab", usage=USAGE, add_help=True)
    asked = _help_for(argv)
    if asked == "":
        print(f"usage: {USAGE}", end="")
        return 0
    if asked:
        print(command_usage(asked), end="")
        return 0
    p.add_argument("command", choices=list(COMMANDS), metavar="COMMAND")
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.add_argument(
        "--down-on-error", action="store_true", help="up/converge: stop the whole lab if anything fails"
    )
    p.add_argument("--timeout", type=int, default=60, help="down: seconds to wait for a clean power-off")
    p.add_argument("--cache", action="store_true", help="down: also stop the lab's apt-cacher-ng")
    p.add_argument("--with-backup", action="store_true", help="converge: the backup VM too")
    a = p.parse_args(argv)
    # Options may also come after the command (`up --down-on-error`, `down --timeout 0`).
    rest = []
    it = iter(a.args)
    for x in it:
        if x == "--down-on-error" and a.command in ("up", "converge"):
            a.down_on_error = True
        elif x == "--with-backup" and a.command == "converge":
            a.with_backup = True
        elif x == "--cache" and a.command == "down":
            a.cache = True
        elif x == "--timeout" and a.command == "down":
            value = next(it, "")
            if not value.isdigit():
                p.error(f"down: --timeout takes seconds, not {value!r}")
            a.timeout = int(value)
        else:
            rest.append(x)
    a.args = rest if a.command != "ssh" else a.args
    # Misuse is refused here, before the lab is loaded or anything is touched.
    usage = f"usage: python -m lab {synopsis(a.command)}"
    options = [x for x in a.args if x.startswith("-")]
    if a.command in ("up", "down", "wipe", "reset-drives", "image") and options:
        p.error(f"{a.command}: unknown option {options[0]} ({usage})")
    if a.command in ("status", "converge", "ssh-config") and a.args:
        p.error(f"{a.command}: unexpected {a.args[0]!r} ({usage})")
    if a.command == "image" and (len(a.args) > 1 or (a.args and a.args[0] not in image.VARIANTS)):
        p.error(f"image: unknown variant {' '.join(a.args)!r} (have: {', '.join(image.VARIANTS)})")
    if (a.command == "ssh" and not a.args) or (a.command == "reset-drives" and len(a.args) != 1):
        p.error(usage)
    if a.command == "vagrant-box" and a.args and (a.args[0] != "--apt-proxy" or len(a.args) != 2):
        p.error(usage)
    named = {"ssh": a.args[:1], "up": a.args, "down": a.args, "wipe": a.args, "reset-drives": a.args}
    t0 = time.monotonic()

    def log(msg: str) -> None:
        print(msg, flush=True)

    try:
        lab = load()
        for name in named.get(a.command, []):
            lab.vm(name)
    except LabDefinitionError as e:
        print(f"lab: error: {e}", file=sys.stderr, flush=True)
        print("lab: refused: nothing was started or stopped", file=sys.stderr)
        return 2
    try:
        if a.command == "image":
            variant = a.args[0] if a.args else "zfs"
            d = image.ensure(lab, variant, log=log)
            m = image.manifest(lab, variant)
            log(
                f"==> image {d}: kernel {m['kernel']}, zfs {m['zfs'] or 'none'}"
                f" (built in {m['build_seconds']} s)"
            )
        elif a.command in ("up", "converge"):
            try:
                if a.command == "up":
                    control.up(lab, a.args, log=log)
                else:
                    control.converge(lab, log=log, with_backup=a.with_backup)
            except BaseException:
                if a.down_on_error:
                    control.down(lab, log=log)
                raise
        elif a.command == "down":
            control.down(lab, a.args, timeout=a.timeout, log=log)
            if a.cache:
                aptcache.stop()
                log("==> apt cache stopped")
        elif a.command == "status":
            control.status(lab, log=log)
        elif a.command == "ssh":
            vm = lab.vm(a.args[0])
            vmmod.ensure_key()
            vmmod.write_ssh_config(lab)
            if not vmmod.pid(vm):
                raise LabError(f"{vm.name} is not running (python -m lab up {vm.name})")
            argv = [
                "ssh",
                "-F",
                str(vmmod.SSH_CONFIG),
                *(["-t"] if len(a.args) == 1 and sys.stdin.isatty() else []),
                vm.name,
                *a.args[1:],
            ]
            os.execvp("ssh", argv)
        elif a.command == "reset-drives":
            vmmod.reset_drives(lab.vm(a.args[0]), log=log)
        elif a.command == "wipe":
            control.wipe(lab, a.args, log=log)
        elif a.command == "vagrant-box":
            print(vagrant_box.build(lab, a.args[1] if a.args else None, log=log))
        elif a.command == "ssh-config":
            vmmod.ensure_key()
            print(vmmod.write_ssh_config(lab))
    except (LabError, LabDefinitionError, image.ImageBuildError) as e:
        print(f"lab: error: {e}", file=sys.stderr, flush=True)
        print(f"lab: failed after {time.monotonic() - t0:.0f} s", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lab: interrupted (VMs already started keep running: python -m lab down)", file=sys.stderr)
        return 1
    return 0
