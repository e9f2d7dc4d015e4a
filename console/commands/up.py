"""`enginedeck up NAME`: start a configured engine (container or process) and wait until it is ready.

Exit codes: 0 ready (or started with --no-wait), 1 configuration/user error (also: image not
present, port in use), 2 the engine failed or Docker is unreachable, 3 timed out waiting.
Process engines (managed = "process") belong to the enginedeck that started them: `up` stays in
the foreground until Ctrl-C (or SIGTERM), then stops the engine.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import add_change_command, add_host, add_wait

    p = add_change_command(sub, "up", "start a configured engine and wait until it is ready",
                           "enginedeck up qwen-sglang", "enginedeck up qwen-sglang --host gpu1 --timeout 1800")
    add_wait(p)
    add_host(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.lifecycle.cli_support import bring_up, manager_for_change

    with manager_for_change(args, "up") as (manager, inst, shown):
        return bring_up(manager, inst, "start", wait=args.wait, timeout=args.timeout, shown=shown)
