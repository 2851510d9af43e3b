"""Group 7, CLI usage: every ``slate-ops`` command without ``--path``, without each required argument,
and with each typed or multiple-choice argument given a bad value -- generated from the argparse
parser, so a new command or argument gets its cases without an edit here (a new argument type needs
an entry in :data:`SAMPLES` and :data:`MALFORMED`)."""

from __future__ import annotations

import argparse

from slate_ops.cli import build_parser
from tests.reliability.bad_inputs.catalogue import HEX_FIX, Cli, case, cli
from tests.reliability.bad_inputs.states import nothing

COMMON = {"help", "store", "path", "format"}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    # Each command once, by its own name (an alias maps to the same parser).
    return {name: sub for name, sub in action.choices.items() if sub.prog.split()[-1] == name}


def arguments(sub: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in sub._actions if a.dest not in COMMON]


def positionals(sub: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in arguments(sub) if not a.option_strings]


def type_name(action: argparse.Action) -> str:
    kind = action.type
    if kind is None:
        return "str"
    return f"{getattr(kind, '__module__', '')}.{getattr(kind, '__qualname__', kind)}"


# A valid value of each argument type, to fill in the other required arguments.
SAMPLES = {
    "str": "x",
    "slate_ops.cli.args.checkpoint_id": "01234567-89ab-cdef-0123-456789abcdef",
    "slate_ops.cli.args.parse_key": "k",
    "slate_ops.cli.args.parse_bytes": "v",
    "slate_ops.cli.args.positive_int": "2",
}
# A malformed value of each argument type and what its usage error says.
MALFORMED = {
    "slate_ops.cli.args.checkpoint_id": ("not-a-uuid", "is not a checkpoint id (a UUID"),
    "slate_ops.cli.args.parse_key": ("hex:0", HEX_FIX),
    "slate_ops.cli.args.parse_bytes": ("hex:zz", HEX_FIX),
    "slate_ops.cli.args.positive_int": ("0", "is not a positive integer"),
    "slate_ops.cli.args.count": ("-1", "is not a count"),
    "slate_ops.cli.args.duration": ("7 parsecs", "unknown unit"),
    "slate_ops.cli.args.manifest_id": ("0", "is not a manifest id"),
    "slate_ops.cli.args.min_age": ("1s", "below the minimum age floor"),
    "slate_ops.cli.args.time_of_day": ("25:00", "is not a time of day"),
}


def display(action: argparse.Action) -> str:
    return "/".join(action.option_strings) if action.option_strings else str(action.metavar or action.dest)


def command_line(
    name: str,
    sub: argparse.ArgumentParser,
    leave_out: argparse.Action | None = None,
    replace: tuple[argparse.Action, str] | None = None,
) -> list[str]:
    """``name`` with every required argument (a sample value), minus ``leave_out``; ``replace``
    gives one argument (required or not) another value."""
    argv = [name]
    for action in arguments(sub):
        if action is leave_out:
            continue
        if replace is not None and action is replace[0]:
            value = replace[1]
        elif action.required:
            value = SAMPLES[type_name(action)]
        else:
            continue
        argv += [action.option_strings[0], value] if action.option_strings else [value]
    return argv


for name, sub in subcommands().items():
    if sub.get_default("needs_path") is False:  # list-dbs: without --path it lists the whole store
        case("CLI usage", f"{name}: no --path", nothing, Cli(tuple(command_line(name, sub))), 0)
    else:
        case(
            "CLI usage",
            f"{name}: no --path",
            nothing,
            Cli(tuple(command_line(name, sub))),
            2,
            "--path is required",
        )
    for action in arguments(sub):
        if action.required:
            argv = command_line(name, sub, leave_out=action)
            # Without one positional, the later ones move up: argparse reports the last one missing.
            reported = action if action.option_strings else positionals(sub)[-1]
            case(
                "CLI usage",
                f"{name}: missing {display(action)}",
                nothing,
                cli("--path", "db", *argv),
                2,
                f"usage: slate-ops {name}",
                f"required: {display(reported)}",
            )
        if action.choices is not None and action.nargs is None:
            argv = command_line(name, sub, replace=(action, "bogus"))
            case(
                "CLI usage",
                f"{name}: {display(action)} bogus",
                nothing,
                cli("--path", "db", *argv),
                2,
                f"argument {display(action)}",
                "invalid choice",
            )
        elif action.type is not None:
            bad, hint = MALFORMED[type_name(action)]
            argv = command_line(name, sub, replace=(action, bad))
            case(
                "CLI usage",
                f"{name}: malformed {display(action)}",
                nothing,
                cli("--path", "db", *argv),
                2,
                f"usage: slate-ops {name}",
                f"argument {display(action)}",
                hint,
            )
