"""`enginedeck down NAME`: stop a managed engine (SIGTERM, countdown, SIGKILL) and remove its container.

Asks for confirmation on a terminal unless --yes; without a terminal --yes is required.
Exit codes: 0 stopped (or was not running), 1 user error / not confirmed, 2 failure.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import add_change_command, add_host, add_yes

    p = add_change_command(sub, "down", "stop a managed engine and remove its container",
                           "enginedeck down qwen-sglang --yes", "enginedeck down gpu1/qwen-sglang --yes")
    add_yes(p)
    p.add_argument("--timeout", type=float, metavar="S", help="seconds between SIGTERM and SIGKILL (default: config)")
    add_host(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.lifecycle.cli_support import PhaseReporter, confirmed, manager_for_change
    from console.secrets import mask_url
    from console.textout import shown as shown_text

    with manager_for_change(args, "down") as (manager, inst, shown):
        at = mask_url(inst.url)  # a prompt shows the address, never its credentials
        where = f"{inst.config.managed}, {at}" if shown == inst.name else f"{inst.config.managed} on {shown}"
        if not confirmed(args, "down", shown, f"Stop {shown} ({where})?"):
            print("not stopped", file=sys.stderr)
            return 1
        reporter = PhaseReporter(manager, inst.name)
        try:
            st = manager.stop(inst.name, timeout=args.timeout).result()
            if inst.config.managed == "docker":
                manager.remove(inst.name).result()
            print(shown_text(f"{shown}: {st.detail or 'not running'}"))
            return 0
        finally:
            reporter.close()
