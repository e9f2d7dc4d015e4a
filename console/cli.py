"""Command-line entry point. Each subcommand lives in ``console/commands/<name>.py``.

A command module exposes ``register(subparsers)`` which adds its parser and sets
``func=<callable(args) -> int>``. Modules must import heavy things (Textual, docker) inside
their functions so that ``enginedeck status`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import signal
import sys
from collections.abc import Sequence

from console import __version__, commands, gc_control
from console.errors import UserError

# The command run when none is given (the console on the configured engines).
DEFAULT_COMMAND = "tui"
_TOP_FLAGS = ("-h", "--help", "--version")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with ``only`` the parser of the command module of that name."""
    parser = argparse.ArgumentParser(
        prog="enginedeck",
        description="A terminal console for running, watching and comparing LLM inference engines.",
    )
    parser.add_argument("--version", action="version", version=f"enginedeck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or (only is not None and info.name != only):
            continue
        module = importlib.import_module(f"console.commands.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(sub)
    return parser


def _parser_for(command: str) -> argparse.ArgumentParser:
    """The parser that reads ``command``'s arguments: only that command's (building every
    subcommand's parser is a tenth of a second of each start), else the whole one (``--help``,
    a mistyped command, one whose module has another name)."""
    module = command.replace("-", "_")
    if module and not module.startswith("_") and module.isidentifier():
        names = {info.name for info in pkgutil.iter_modules(commands.__path__)}
        if module in names:
            parser = build_parser(only=module)
            if command in _subcommand_names(parser):
                return parser
    return build_parser()


def _skip_unused_imports() -> None:
    """What the console would import and never use. httpx imports its command-line client (click,
    pygments, rich.progress: about 0.1 s) whenever click is installed, as uvicorn installs it: a
    None in ``sys.modules`` makes that import fail, and httpx falls back to its stub ``main``.
    pydantic (the simulator's request models) looks for plugins in every installed package's entry
    points at its first model."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def main(argv: Sequence[str] | None = None) -> int:
    gc_control.startup_pause()
    _skip_unused_imports()
    try:
        return _main(argv)
    finally:  # whatever way out (--help, a bad argument, an error): collection is on again
        gc_control.startup_resume()


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # `enginedeck` and `enginedeck --read-only` mean the default console command.
    first = args_list[0] if args_list else ""
    if not first or (first.startswith("-") and first not in _TOP_FLAGS):
        args_list = [DEFAULT_COMMAND, *args_list]
    parser = _parser_for(args_list[0])
    args = parser.parse_args(args_list)
    if not getattr(args, "paints", False):  # a console command resumes it before its first frame
        gc_control.startup_resume()
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except UserError as exc:
        from console.textsafe import inert  # made safe when raised; inert again for a subclass that set its own

        print(f"enginedeck: {inert(exc.message)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `enginedeck status --json | head` must not print a traceback.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        return 0
    except Exception as exc:
        from console import crashlog

        if not isinstance(exc, crashlog.ConsoleCrashed):  # the console printed its own line
            # A bug: one line naming the log that holds the traceback, and a status that says so.
            print(crashlog.one_line(exc, crashlog.write(exc)), file=sys.stderr)
        return crashlog.CRASH_EXIT


def _subcommand_names(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
