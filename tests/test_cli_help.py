"""Every subcommand's ``--help`` is enough to use it: a one-line description, help text for every
option and positional argument, and at least one example (the epilog), which parses."""

from __future__ import annotations

import argparse
import shlex

import pytest

from console.cli import build_parser

Commands = list[tuple[str, argparse.ArgumentParser]]


def _subparsers(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Commands:
    """(command line, parser) for every subcommand, nested ones (``alerts export``) included."""
    out: Commands = []
    for action in parser._actions:  # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((" ".join((*prefix, name)), sub))
                out.extend(_subparsers(sub, (*prefix, name)))
    return out


PARSER = build_parser()
COMMANDS = _subparsers(PARSER)


def test_the_walk_finds_every_command() -> None:
    names = {name for name, _ in COMMANDS}
    assert {"bench", "status", "up", "demo", "sim", "alerts export", "config"} <= names
    assert len(names) >= 22


@pytest.mark.parametrize("name,parser", COMMANDS, ids=[name for name, _ in COMMANDS])
def test_help_has_a_description_option_help_and_an_example(name: str, parser: argparse.ArgumentParser) -> None:
    problems = []
    description = (parser.description or "").strip()
    if not description:
        problems.append("no description")
    elif "\n" in description:
        problems.append(f"description is more than one line: {description!r}")
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if not action.help:  # argparse.SUPPRESS hides an option on purpose: it has a string
            problems.append(f"{'/'.join(action.option_strings) or action.dest}: no help text")
    epilog = parser.epilog or ""
    examples = [line.strip()[2:].strip() for line in epilog.splitlines() if line.strip().startswith("$ enginedeck ")]
    if not examples:
        problems.append("no example in the epilog (a line '$ enginedeck ...')")
    for example in examples:
        words = shlex.split(example)[1:]
        if words[: len(name.split())] != name.split():
            problems.append(f"example {example!r} does not run {name!r}")
            continue
        try:
            build_parser().parse_args(words)
        except SystemExit:
            problems.append(f"example {example!r} does not parse")
    assert not problems, f"enginedeck {name} --help: " + "; ".join(problems)
