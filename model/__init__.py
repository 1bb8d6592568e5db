"""The input model: host data with its defaults, sizing, ZFS property vocabulary, secrets. Pure:
it never imports pyinfra operations or facts, so offline commands (validate, render) use it."""
