from facts.hardware import HostHardware

GIB = 1024**3


def test_ram_is_the_online_memory_blocks():
    # a 4 GiB lab VM: 32 blocks of 128 MiB (hex in sysfs); MemTotal is 3914 MiB
    out = ["blocks 8000000 32", "memtotal 4008456", "cpus 2"]
    assert HostHardware().process(out) == {"ram_bytes": 4 * GIB, "cpus": 2}


def test_ram_does_not_move_with_memtotal():
    # MemTotal shrank by 12 kB once the zfs module was loaded on a fresh host: same sizing input
    before = HostHardware().process(["blocks 8000000 32", "memtotal 4008456", "cpus 2"])
    after = HostHardware().process(["blocks 8000000 32", "memtotal 4008444", "cpus 2"])
    assert before == after


def test_large_host_blocks():
    # 2 TiB in 2 GiB blocks
    out = ["blocks 80000000 1024", "memtotal 2112000000", "cpus 128"]
    assert HostHardware().process(out) == {"ram_bytes": 2048 * GIB, "cpus": 128}


def test_without_memory_blocks_memtotal_rounded_down_to_128_mib():
    out = ["memtotal 4008456", "cpus 2"]
    assert HostHardware().process(out) == {"ram_bytes": 3840 * 1024**2, "cpus": 2}


def test_offline_blocks_or_odd_sysfs_fall_back_to_memtotal():
    # fewer online blocks than MemTotal (should not happen): never size above what the kernel has
    out = ["blocks 8000000 8", "memtotal 4008456", "cpus 2"]
    assert HostHardware().process(out)["ram_bytes"] == 3840 * 1024**2


def test_command_leaves_arithmetic_to_python():
    # mawk (Debian's awk) prints large products in exponent notation
    assert "*" not in HostHardware().command().replace("memory*/state", "")
