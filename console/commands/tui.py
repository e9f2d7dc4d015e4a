"""`enginedeck` (no subcommand): the console on the configured engines."""

from __future__ import annotations

import argparse
from typing import Any

from console.commands._args import add_console_flags, command_help


def register(sub: Any) -> None:
    p = sub.add_parser("tui", **command_help("the console on the configured engines (the default command)",
                                             "enginedeck tui --read-only",
                                             "enginedeck tui --config my.toml --refresh 2"))
    add_console_flags(p)
    p.set_defaults(func=run, paints=True)  # resumes garbage collection before its first frame


def run(args: argparse.Namespace) -> int:
    from console.config import load_config
    from console.paths import config_file
    from console.ui.launch import resolve_settings, run_console, run_setup

    config = load_config(args.config)
    settings = resolve_settings(args, config)
    if not config.instances and not config.hosts and not config.sources:
        result = run_setup(settings, str(config.path or config_file()), keys=config.keys)
        if result == "demo":
            from console.commands.demo import run_demo

            return run_demo(args)
        return 0
    run_console(config.instances, settings, config=config, hosts=config.hosts, sources=config.sources,
                simulated=bool(config.instances) and all(i.config.simulated for i in config.instances))
    return 0
