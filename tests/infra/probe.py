"""Read a live host through testinfra with the deploy's own pyinfra fact parsers."""


def fact(host, fact_cls, **kwargs):
    """Run a pyinfra fact's own command through testinfra and parse it with the fact's own
    parser, so the checks and the deploy read the host the same way."""
    instance = fact_cls()
    command = instance.command(**kwargs)
    command = command.get_raw_value() if hasattr(command, "get_raw_value") else command
    return instance.process(host.check_output(command).splitlines())
