"""The kit every runbook (runbooks/*.py) is built with: its arguments, the hosts it needs in the
run, its report, and what an operation printed.

Arguments. A runbook declares its parameters once, in a `Runbook` of `Parameter`s (name, what it
is, required or optional, default, how its value is parsed). `start(runbook)`, the first line of
every runbook file, reads pyinfra's `--data` overrides, which pyinfra keeps apart from the
inventory's group and host data (Inventory.get_override_data: the CLI's --data, and the
connection options --user, --port, --key... as ssh_* keys), and refuses, before the inventory is
validated and before any operation is added (all problems at once, in the shape of every other):
a key that is not one of the runbook's parameters (the fix lists them; an old name gets the new
one), a required one missing, a value that does not parse, a host argument that names no host of
the inventory or more than one, and the host the runbook acts on left out of the run (--limit,
or unreachable). Then it validates the inventory (validation/preflight.py) and returns the parsed
arguments. pyinfra's connection data (ssh_*) is no argument and passes. deploy.py is no runbook:
it keeps accepting --data overrides of host data, which validation checks.

The names. `host` is the one host a runbook acts on: the replica to seed (seed.py), the host to
restore (restore.py), the host whose drive is replaced (replace_drive.py), the host whose
datasets are rewritten (rewrite_compression.py). A runbook whose host means more says so:
switchover.py takes `new_primary` (the replica that becomes the primary; its whole group takes
part), failover.py `failed` (the primary that is gone, whose host may be down and takes no part)
and optionally `new_primary`. `wipe=yes` is spelt one way everywhere: the host acted on may lose
what it holds (a data directory with a database, a new drive with data on it); `wipe_drives`
is inventory host data and stays. The names of before (seed's `replica`, replace_drive's `on`,
restore's `target`) are refused with the new name in the fix: an argument has one name.

A parameter is never named like a host-data key (validation.KNOWN_KEYS; tests/unit/test_kit.py):
pyinfra's --data overrides that key on every host, so `--data primary=yes` would make every
host a replica of "yes".

The run: `left_out` is the one --limit check (the hosts a runbook needs that take no part);
`Report` is a runbook's report, a pyinfra state callback that reacts to the steps it is given and
reads what they printed (`output`), registered once per run by `report_once`; `op_id` is the only
reader of pyinfra's private operation hash.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pyinfra import inventory, state
from pyinfra.api import BaseStateCallback
from pyinfra.api.operation import OperationMeta
from pyinfra.connectors.ssh import connector_data_meta

from model.problems import Problem, format_problems
from operations import runtime
from roles import release
from validation import preflight

# pyinfra's connection data: the CLI puts --user, --port, --key, --password, --key-password there
# as ssh_* keys, beside --data's. Not a runbook's arguments: they pass.
CONNECTION_KEYS = frozenset(connector_data_meta)
YES = ("yes", "true", "1", "on")
NO = ("no", "false", "0", "off")


@dataclass(frozen=True)
class Parameter:
    """One argument of a runbook (`--data NAME=VALUE`)."""

    name: str
    what: str  # what it is, for the list of arguments
    required: bool = False
    default: object = None
    parse: Callable[[object], object] | None = None  # raises ValueError(what is wrong); None: as given
    example: str = "VALUE"  # the value shown in a fix: --data NAME=EXAMPLE
    host: bool = False  # names one host of the inventory
    formerly: tuple[str, ...] = ()  # names it had: refused, with this one in the fix

    def fix(self) -> str:
        return f"--data {self.name}={self.example}"


@dataclass(frozen=True)
class Runbook:
    """A runbook's file, what it does (the messages say "before the seeding"), its parameters,
    and which of them names the host it acts on (that host must take part in the run)."""

    path: str
    what: str
    parameters: tuple[Parameter, ...]
    acts_on: str | None = "host"
    # the host it acts on is moved to the release its data says (it may run the one before)
    moves_release: bool = False

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def known(self) -> str:
        """Its arguments, as a fix lists them."""
        shown = [f"{p.name} ({'required' if p.required else 'optional'}: {p.what})" for p in self.parameters]
        return f"{self.path} takes {'; '.join(shown)}"


# --- parsers --------------------------------------------------------------------------------------


def yes_no(value: object) -> bool:
    """yes/no (true/false, 1/0, on/off; pyinfra turns "true" into True and "1" into 1)."""
    text = str(value).strip().lower()
    if text in YES:
        return True
    if text in NO:
        return False
    raise ValueError("not yes or no")


def whole_seconds(value: object) -> int:
    if isinstance(value, bool) or not str(value).strip().isdigit():
        raise ValueError("not a whole number of seconds")
    return int(str(value).strip())


def one_of(*choices: str) -> Callable[[object], str]:
    def parse(value: object) -> str:
        if value not in choices:
            raise ValueError(f"not one of {', '.join(choices)}")
        return str(value)

    return parse


def text(value: object) -> str:
    """As written (pyinfra reads `--data x=2026` as the number 2026: this is the text again)."""
    return str(value)


# --- the arguments ----------------------------------------------------------------------------------


def _unknown(runbook: Runbook, key: str, value: object) -> Problem:
    renamed = next((p for p in runbook.parameters if key in p.formerly), None)
    if renamed is not None:
        shown = value if isinstance(value, str) else "yes"
        example = shown if renamed.host else renamed.example
        return Problem(
            None,
            key,
            value,
            f"renamed: {runbook.path} takes {renamed.name}= ({renamed.what})",
            f"--data {renamed.name}={example}",
        )
    close = difflib.get_close_matches(key.replace("-", "_"), runbook.names(), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return Problem(None, key, value, f"not an argument of {runbook.path}", f"{hint}{runbook.known()}")


def _host_value(p: Parameter, value: object, hosts: list[str], groups: Mapping[str, list[str]]) -> str:
    if isinstance(value, (list, tuple)) or (isinstance(value, str) and "," in value):
        raise ValueError("names more than one host: a runbook acts on one host per run")
    name = str(value)
    if name in hosts:
        return name
    if name in groups:
        members = ", ".join(groups[name]) or "none"
        raise ValueError(f"a group of the inventory, not a host (its hosts: {members})")
    raise ValueError("not a host of the inventory")


def parsed(
    runbook: Runbook,
    given: Mapping[str, object],
    hosts: list[str],
    active: set[str],
    groups: Mapping[str, list[str]] | None = None,
) -> tuple[dict[str, object], list[Problem]]:
    """The runbook's arguments from pyinfra's override data (`given`), each parsed or defaulted,
    and every problem with them (pure)."""
    groups = groups or {}
    problems = [
        _unknown(runbook, key, value)
        for key, value in given.items()
        if key not in runbook.names() and key not in CONNECTION_KEYS
    ]
    args: dict[str, object] = {}
    for p in runbook.parameters:
        value = given.get(p.name)
        if value is None or value == "":
            if p.required:
                problems.append(Problem(None, p.name, None, f"missing ({p.what})", f"run with {p.fix()}"))
            args[p.name] = p.default
            continue
        try:
            if p.host:
                value = _host_value(p, value, hosts, groups)
            args[p.name] = p.parse(value) if p.parse else value
        except ValueError as exc:
            fix = p.fix() if p.host else f"{p.fix()} ({p.what})"
            if p.host and str(exc) == "not a host of the inventory":
                fix = f"one of {', '.join(hosts)}"
            problems.append(Problem(None, p.name, value, str(exc), fix))
            args[p.name] = None
    target = args.get(runbook.acts_on) if runbook.acts_on else None
    if target is not None:
        problems += left_out(
            [str(target)], active, fix=f"include {target} (--limit), and check it answers SSH"
        )
    return args, problems


def start(runbook: Runbook) -> dict[str, object]:
    """The runbook's arguments, checked (see the module's docstring), then the inventory
    validated; stops the run before any operation when a check fails. Once per run: pyinfra
    loads a deploy file once per host."""

    def compute() -> tuple[dict[str, object], list[Problem]]:
        hosts = [h.name for h in inventory]
        groups = {name: [h.name for h in members] for name, members in inventory.groups.items()}
        return parsed(runbook, inventory.get_override_data(), hosts, active(), groups)

    args, problems = runtime.once_per_run(f"arguments of {runbook.path}", compute)
    if problems:
        raise runtime.Refused("\n" + format_problems(problems, what=f"before {runbook.what}"))
    preflight.validate_inventory(parameters=runbook.names())
    # every host runs its data's Debian release (the one a release upgrade moves: or the one before)
    release.check(upgrading=str(args[runbook.acts_on]) if runbook.moves_release and runbook.acts_on else None)
    return dict(args)


def active() -> set[str]:
    """The hosts taking part in this run: in --limit (when given) and connected."""
    return {h.name for h in inventory.get_active_hosts()}


def left_out(
    needed: Iterable[str], active_hosts: set[str], why: str = "", fix: str = "", host: str | None = None
) -> list[Problem]:
    """The --limit check: the hosts a runbook needs that take no part in the run (left out by
    --limit, or unreachable), as one problem; [] when every one does."""
    needed = list(dict.fromkeys(needed))
    missing = [n for n in needed if n not in active_hosts]
    if not missing:
        return []
    message = f"leaves out {', '.join(missing)}" + (f", {why}" if why else "")
    return [
        Problem(
            host,
            "--limit",
            ",".join(sorted(active_hosts)),
            message,
            fix or f"limit to {','.join(sorted(needed))} or more",
        )
    ]


def refuse(problems: list[Problem], what: str) -> None:
    """Stop the run before any change when there is a problem."""
    if problems:
        raise runtime.Refused("\n" + format_problems(problems, what=f"before {what}"))


# --- the drivers (./dbzfs roll, ./dbzfs upgrade): their --data, as a runbook's ----------------------


def driver_data(items: Iterable[str], runbook: Runbook, error: Callable[[str], None]) -> dict | None:
    """A driver's `--data KEY=VALUE` items parsed as `runbook`'s arguments (kit.parsed): the
    parsed values, or None once their problems are printed. `error`: argparse's, for an item that
    is not KEY=VALUE."""
    given = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            error(f"--data {item}: not KEY=VALUE")
        given[key] = value
    parsed_args, problems = parsed(runbook, given, [], set())
    if problems:
        print(format_problems(problems, what=f"in {runbook.what}'s options"), flush=True)
        return None
    return parsed_args


# --- the inventory a multi-step runbook runs with -----------------------------------------------------


def overridden_inventory_text(inventory: str, overrides: Mapping[str, Mapping[str, object]], why: str) -> str:
    """A pyinfra inventory file: `inventory` (an absolute path) with some hosts' data overridden
    (host -> keys -> values; a value None removes the key), for a driver whose steps change what
    the fleet is between pyinfra runs (`./dbzfs roll`'s switchovers, `./dbzfs upgrade`'s
    releases). Written where the driver keeps its state; `why` is its docstring."""
    return f'''"""Written by {why}"""

import runpy

_ORIGINAL = runpy.run_path({inventory!r})
_OVERRIDES = {dict(overrides)!r}


def _host(host):
    if isinstance(host, tuple) and len(host) == 2 and host[0] in _OVERRIDES:
        data = {{**host[1], **_OVERRIDES[host[0]]}}
        return (host[0], {{k: v for k, v in data.items() if v is not None}})
    return host


def _group(value):
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
        return ([_host(h) for h in value[0]], value[1])
    return [_host(h) for h in value]


for _name, _value in _ORIGINAL.items():
    if not _name.startswith("_") and isinstance(_value, (list, tuple)):
        globals()[_name] = _group(_value)
'''


# --- the report -------------------------------------------------------------------------------------


def op_id(op: OperationMeta | str) -> str:
    """pyinfra's identifier of an operation: the same on every host that calls it from the same
    place, and what pyinfra's callbacks receive. The one reader of its private `_hash`."""
    return op if isinstance(op, str) else op._hash


def ran(state_: object, op: OperationMeta | str, host_name: str) -> OperationMeta | None:
    """The host's run of the operation once it completed and succeeded, else None (not run yet,
    failed, or not one of the host's)."""
    try:
        meta = state_.get_op_data_for_host(state_.inventory.get_host(host_name), op_id(op)).operation_meta
    except (KeyError, AttributeError):
        return None
    return meta if meta.is_complete() and meta.did_succeed() else None


def output(state_: object, op: OperationMeta | str, host_name: str) -> list[str]:
    """What the operation printed on the host (stdout lines), once it succeeded there; []."""
    meta = ran(state_, op, host_name)
    return meta.stdout_lines if meta else []


class Report(BaseStateCallback):
    """A runbook's report: pyinfra calls it as each operation starts and ends; it reacts to the
    steps it is given (name -> the step's OperationMeta) in `step_started` and `step_ended`."""

    def __init__(self, steps: Mapping[str, OperationMeta | str]) -> None:
        self.steps = {op_id(op): name for name, op in steps.items()}
        self.ids = {name: op_id(op) for name, op in steps.items()}

    def operation_start(self, state, op_hash) -> None:  # noqa: ANN001 - pyinfra's callback signature
        if op_hash in self.steps:
            self.step_started(state, self.steps[op_hash])

    def operation_end(self, state, op_hash) -> None:  # noqa: ANN001 - pyinfra's callback signature
        if op_hash in self.steps:
            self.step_ended(state, self.steps[op_hash])

    def step_started(self, state_: object, step: str) -> None:
        """The step started (on its first host)."""

    def step_ended(self, state_: object, step: str) -> None:
        """The step ended (every host of the run passed it)."""

    def output(self, state_: object, step: str, host_name: str) -> list[str]:
        return output(state_, self.ids[step], host_name)

    def succeeded(self, state_: object, step: str, host_name: str) -> bool:
        return ran(state_, self.ids[step], host_name) is not None


_reported: set[tuple[int, str]] = set()


def report_once(key: str, report: Report) -> None:
    """Register the report once per run: every host's deploy builds one, the first is kept."""
    if (id(state), key) not in _reported:
        _reported.add((id(state), key))
        state.add_callback_handler(report)
