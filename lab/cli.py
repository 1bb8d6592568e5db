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
  up [NAME...]        build the image if needed, start the apt cache, boot the VMs (in parallel),
                      wait until ssh answers; VMs already running are left alone. Without
                      names: the lab's VMs; joining_vms, bare_vms and backup_vms (lab.yaml) boot
                      only when named
  status              the image, the apt cache and each VM
  ssh NAME [CMD...]   a shell (or a command) on a VM as root
  reset-drives NAME   stop the VM if running, recreate its empty NVMe drive files
  down [NAME...]      power VMs off (all by default: no qemu is left behind; --timeout S before
                      killing, default 60; --cache also stops the apt cache, which is otherwise
                      left running on 127.0.0.1:3142 for the next `up`)
  wipe [NAME...]      stopped VMs only: fresh root disks (new overlays) and empty drives
  converge [--with-backup]
                      up, then pyinfra inventories/lab.py deploy.py, then the tests/infra checks;
                      --with-backup: the backup VM too (lab.yaml backup_vms), with
                      inventories/lab_backup.py
  ssh-config          (re)write .lab/ssh_config and print its path
  vagrant-box [--apt-proxy URL]
                      a Vagrant box for libvirt from the bare image (vagrant box add --name
                      dbzfs/bookworm FILE; DBZFS_VAGRANT_BOX=dbzfs/bookworm vagrant up)
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab", usage=USAGE, add_help=True)
    p.add_argument("command")
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
        if x == "--down-on-error":
            a.down_on_error = True
        elif x == "--with-backup" and a.command == "converge":
            a.with_backup = True
        elif x == "--cache" and a.command == "down":
            a.cache = True
        elif x == "--timeout" and a.command == "down":
            a.timeout = int(next(it))
        else:
            rest.append(x)
    a.args = rest if a.command != "ssh" else a.args
    t0 = time.monotonic()

    def log(msg: str) -> None:
        print(msg, flush=True)

    try:
        lab = load()
        if a.command == "image":
            variant = a.args[0] if a.args else "zfs"
            if variant not in image.VARIANTS:
                raise LabError(f"image: unknown variant {variant!r} (have: {', '.join(image.VARIANTS)})")
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
            if not a.args:
                p.error("ssh NAME [CMD...]")
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
            if len(a.args) != 1:
                p.error("reset-drives NAME")
            vmmod.reset_drives(lab.vm(a.args[0]), log=log)
        elif a.command == "wipe":
            control.wipe(lab, a.args, log=log)
        elif a.command == "vagrant-box":
            proxy = None
            if a.args[:1] == ["--apt-proxy"] and len(a.args) == 2:
                proxy = a.args[1]
            elif a.args:
                p.error("vagrant-box [--apt-proxy URL]")
            print(vagrant_box.build(lab, proxy, log=log))
        elif a.command == "ssh-config":
            vmmod.ensure_key()
            print(vmmod.write_ssh_config(lab))
        else:
            p.error(f"unknown command {a.command!r}")
    except (LabError, LabDefinitionError, image.ImageBuildError) as e:
        print(f"lab: error: {e}", file=sys.stderr, flush=True)
        print(f"lab: failed after {time.monotonic() - t0:.0f} s", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lab: interrupted (VMs already started keep running: python -m lab down)", file=sys.stderr)
        return 130
    return 0
