"""`enginedeck down NAME`: stop a managed engine (SIGTERM, countdown, SIGKILL) and remove its container.

Asks for confirmation on a terminal unless --yes; without a terminal --yes is required.
Exit codes: 0 stopped (or was not running), 1 user error / not confirmed, 2 failure.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import add_change_command, add_yes

    p = add_change_command(sub, "down", "stop a managed engine and remove its container")
    add_yes(p)
    p.add_argument("--timeout", type=float, metavar="S", help="seconds between SIGTERM and SIGKILL (default: config)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.lifecycle.cli_support import PhaseReporter, confirmed, load_for_change
    from console.lifecycle.manager import LifecycleManager

    cfg, inst = load_for_change(args, "down")
    if not confirmed(args, "down", inst.name, f"Stop {inst.name} ({inst.config.managed}, {inst.url})?"):
        print("not stopped", file=sys.stderr)
        return 1
    manager = LifecycleManager(cfg)
    reporter = PhaseReporter(manager, inst.name)
    try:
        st = manager.stop(inst.name, timeout=args.timeout).result()
        if inst.config.managed == "docker":
            manager.remove(inst.name).result()
        print(f"{inst.name}: {st.detail or 'not running'}")
        return 0
    finally:
        reporter.close()
        manager.close()
