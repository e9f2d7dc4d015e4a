"""`enginedeck restart NAME`: stop (if running) and start again; waits until ready unless --no-wait.

Asks for confirmation on a terminal unless --yes, as `down` does (the engine stops serving until it
is ready again); without a terminal --yes is required.
Exit codes as `up`: 0 ready, 1 user error / not confirmed, 2 engine failed, 3 timeout.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import add_change_command, add_host, add_wait, add_yes

    p = add_change_command(sub, "restart", "restart a managed engine", "enginedeck restart qwen-sglang --yes",
                           "enginedeck restart qwen-sglang --host gpu1 --yes --no-wait")
    add_yes(p)
    add_wait(p)
    add_host(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.lifecycle.cli_support import bring_up, confirmed, manager_for_change
    from console.secrets import mask_url

    with manager_for_change(args, "restart") as (manager, inst, shown):
        at = mask_url(inst.url)  # a prompt shows the address, never its credentials
        where = f"{inst.config.managed}, {at}" if shown == inst.name else f"{inst.config.managed} on {shown}"
        prompt = f"Restart {shown} ({where})? It stops serving until ready again."
        if not confirmed(args, "restart", shown, prompt):
            print("not restarted", file=sys.stderr)
            return 1
        return bring_up(manager, inst, "restart", wait=args.wait, timeout=args.timeout, shown=shown)
