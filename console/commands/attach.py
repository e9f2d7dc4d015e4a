"""`enginedeck attach PROFILE@URL ...`: watch running endpoints, no configuration file needed."""

from __future__ import annotations

import argparse
from typing import Any

from console.commands._args import add_console_flags


def register(sub: Any) -> None:
    p = sub.add_parser("attach", help="watch existing endpoints: enginedeck attach vllm@http://127.0.0.1:8000 ...")
    p.add_argument("refs", nargs="+", metavar="PROFILE@URL", help="e.g. vllm@http://127.0.0.1:8000")
    p.add_argument("--api-key-env", metavar="NAME", default=None,
                   help="name of the environment variable holding the engines' API key")
    p.add_argument("--gpus", choices=("nvml", "simulated", "none"), default=None,
                   help="GPU source (default: the config's, else nvml)")
    add_console_flags(p)
    p.set_defaults(func=run, paints=True)  # resumes garbage collection before its first frame


def run(args: argparse.Namespace) -> int:
    from console.config import Config, load_config, parse_engine_ref
    from console.errors import UserError
    from console.ui.launch import resolve_settings, run_console

    config = load_config(args.config) if args.config else Config(path=None)
    settings = resolve_settings(args, config)
    instances = [parse_engine_ref(r, api_key_env=args.api_key_env) for r in args.refs]
    names = [i.name for i in instances]
    if len(set(names)) != len(names):
        raise UserError("the same PROFILE@URL is given twice")
    run_console(instances, settings, gpu_source=args.gpus, keys=config.keys)
    return 0
