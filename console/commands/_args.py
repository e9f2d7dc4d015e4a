"""Argument groups that several commands share. Imports nothing heavy: every command module is
imported to build `enginedeck --help`, so what they register with must stay cheap."""

from __future__ import annotations

import argparse
from typing import Any


def command_help(summary: str, *examples: str, description: str | None = None) -> dict[str, Any]:
    """``add_parser`` keywords for a command: its line in ``enginedeck --help`` (``summary``), the same
    line (or ``description``) at the top of its own ``--help``, and examples at the end, each a
    ``$ enginedeck`` line (tests/test_cli_help.py parses every one)."""
    text = "examples:\n" + "\n".join(f"  $ {line}" for line in examples)
    return {"help": summary, "description": description or summary[:1].upper() + summary[1:] + ".",
            "epilog": text, "formatter_class": argparse.RawDescriptionHelpFormatter}


def add_common(p: argparse.ArgumentParser, *, name: bool = True) -> None:
    """NAME and --config, for the lifecycle commands (up, down, restart, pull, adopt, logs, ps)."""
    if name:
        p.add_argument("name", metavar="NAME", help="engine instance name from the configuration")
    p.add_argument("--config", metavar="FILE", help="configuration file (default: the platform config path)")


def add_read_only(p: argparse.ArgumentParser) -> None:
    """--read-only for the commands that change something (up, down, restart, pull, adopt)."""
    p.add_argument("--read-only", action="store_true",
                   help="refuse to change anything (as [console] read_only = true in the configuration)")


def add_change_command(sub: Any, name: str, summary: str, *examples: str) -> argparse.ArgumentParser:
    """The parser of a command that changes an engine (up, down, restart, pull, adopt): NAME,
    --config and --read-only."""
    p: argparse.ArgumentParser = sub.add_parser(name, **command_help(summary, *examples))
    add_common(p)
    add_read_only(p)
    return p


def add_host(p: argparse.ArgumentParser) -> None:
    """--host for the commands that start or stop an engine (up, down, restart) on a remote host."""
    p.add_argument("--host", metavar="HOST",
                   help="act on HOST's Docker engine NAME ([hosts.HOST] of the configuration) through its "
                        "forwarded Docker socket; NAME may also be written HOST/NAME")


def add_yes(p: argparse.ArgumentParser) -> None:
    """--yes for the commands that ask before they act (down, restart, adopt)."""
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")


def add_wait(p: argparse.ArgumentParser) -> None:
    """--wait/--no-wait and --timeout for the commands that start an engine (up, restart)."""
    p.add_argument(
        "--wait", action=argparse.BooleanOptionalAction, default=True, help="wait until ready (default: --wait)"
    )
    p.add_argument("--timeout", type=float, metavar="S", help="give up waiting after S seconds (exit 3)")


def add_console_flags(p: argparse.ArgumentParser) -> None:
    """The flags `enginedeck`, `enginedeck demo` and `enginedeck attach` share."""
    g = p.add_argument_group("console")
    g.add_argument("--read-only", action="store_true", default=None,
                   help="no mutating action anywhere (start/stop/restart are hidden and refused)")
    g.add_argument("--layout", metavar="NAME", default=None,
                   help="auto (by terminal size), compact, default or wide (layouts/*.tcss)")
    g.add_argument("--refresh", metavar="SECS", type=float, default=None, help="collection period (default 1)")
    g.add_argument("--no-mouse", action="store_true", default=None,
                   help="do not capture the mouse (native terminal selection and copy work, e.g. over SSH)")
    g.add_argument("--config", metavar="FILE", default=None, help="configuration file (default: platform path)")
