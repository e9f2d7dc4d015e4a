"""`enginedeck attach PROFILE@URL|ssh://[user@]HOST[:PORT] ...`: watch running endpoints, or the
engines of remote hosts over SSH (their own `enginedeck status` through the user's ssh), no
configuration file needed."""

from __future__ import annotations

import argparse
from typing import Any

from console.commands._args import add_console_flags, command_help


def register(sub: Any) -> None:
    p = sub.add_parser("attach", **command_help(
        "watch existing endpoints: enginedeck attach vllm@http://127.0.0.1:8000 ... "
        "or hosts over SSH: enginedeck attach ssh://gpu@node1",
        "enginedeck attach vllm@http://127.0.0.1:8000 sglang@http://127.0.0.1:30000",
        "enginedeck attach ssh://gpu@node1 ssh://node2:2222 --read-only",
        description="Watch engines that are already running, or remote hosts over your own ssh, without a "
                    "configuration file."))
    p.add_argument("refs", nargs="+", metavar="PROFILE@URL|ssh://[user@]HOST[:PORT]",
                   help="e.g. vllm@http://127.0.0.1:8000, or ssh://gpu@node1 (runs `enginedeck status --json "
                   "--watch` there with your ssh)")
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
    from console.hosts import parse_ssh_url

    period = settings.refresh
    hosts = [parse_ssh_url(r, period=period) for r in args.refs if r.startswith("ssh://")]
    instances = [parse_engine_ref(r, api_key_env=args.api_key_env) for r in args.refs if not r.startswith("ssh://")]
    names = [i.name for i in instances]
    if len(set(names)) != len(names):
        raise UserError("the same PROFILE@URL is given twice")
    host_names = [h.name for h in hosts]
    if len(set(host_names)) != len(host_names):
        raise UserError("the same ssh:// host is given twice")
    run_console(instances, settings, gpu_source=args.gpus, keys=config.keys, hosts=hosts)
    return 0
