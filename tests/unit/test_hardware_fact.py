from roles.facts.hardware import HostHardware


def test_parses_meminfo_kb_and_nproc():
    assert HostHardware().process(["4007924", "2"]) == {"ram_bytes": 4007924 * 1024, "cpus": 2}


def test_command_leaves_arithmetic_to_python():
    # mawk (Debian's awk) prints large products in exponent notation
    assert "*" not in HostHardware().command()
