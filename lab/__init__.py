"""The local VM lab: Debian guests (lab.yaml image.suite: Debian 13 by default) with ZFS and 24
NVMe drives each, under qemu.

One definition (lab/lab.yaml) drives everything. Modules:
  definition  load and check lab.yaml; paths of the lab's state
  aptcache    the host's apt-cacher-ng on 127.0.0.1 (the guests' only way out)
  image       the cached Debian guest image (debootstrap + kernel + ZFS DKMS)
  vm          qemu processes: boot, wait for ssh, stop, drives, ssh config
  cli         `python -m lab COMMAND`
"""
