"""Command-line entry point. Each subcommand lives in ``console/commands/<name>.py``.

A command module exposes ``register(subparsers)`` which adds its parser and sets
``func=<callable(args) -> int>``. Modules must import heavy things (Textual, docker) inside
their functions so that ``enginedeck status`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import signal
import sys
from collections.abc import Sequence

from console import __version__, commands, startup_gc
from console.errors import UserError

# The command run when none is given (the console on the configured engines).
DEFAULT_COMMAND = "tui"
_TOP_FLAGS = ("-h", "--help", "--version")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="enginedeck",
        description="A terminal console for running, watching and comparing LLM inference engines.",
    )
    parser.add_argument("--version", action="version", version=f"enginedeck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"console.commands.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    startup_gc.pause()
    try:
        return _main(argv)
    finally:  # whatever way out (--help, a bad argument, an error): collection is on again
        startup_gc.resume()


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    choices = _subcommand_names(parser)
    # `enginedeck` and `enginedeck --read-only` mean the default console command.
    first = args_list[0] if args_list else ""
    if DEFAULT_COMMAND in choices and (not first or (first.startswith("-") and first not in _TOP_FLAGS)):
        args_list = [DEFAULT_COMMAND, *args_list]
    args = parser.parse_args(args_list)
    if not getattr(args, "paints", False):  # a console command resumes it before its first frame
        startup_gc.resume()
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except UserError as exc:
        print(f"enginedeck: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `enginedeck status --json | head` must not print a traceback.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        return 0


def _subcommand_names(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
