"""`enginedeck restart NAME`: stop (if running) and start again; waits until ready unless --no-wait.

Exit codes as `up`: 0 ready, 1 user error, 2 engine failed, 3 timeout.
"""

from __future__ import annotations

import argparse
import time
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import add_common

    p = sub.add_parser("restart", help="restart a managed engine")
    add_common(p)
    p.add_argument(
        "--wait", action=argparse.BooleanOptionalAction, default=True, help="wait until ready (default: --wait)"
    )
    p.add_argument("--timeout", type=float, metavar="S", help="give up waiting after S seconds (exit 3)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.commands.up import _foreground
    from console.lifecycle.cli_support import PhaseReporter, fail_from_state, load
    from console.lifecycle.manager import LifecycleManager
    from console.lifecycle.process_backend import install_signal_cleanup
    from console.model import Phase

    cfg, inst = load(args)
    assert inst is not None
    is_process = inst.config.managed == "process"
    if is_process:
        install_signal_cleanup()
    manager = LifecycleManager(cfg)
    reporter = PhaseReporter(manager, inst.name)
    t0 = time.monotonic()
    try:
        manager.restart(inst.name).result()
        if args.wait or is_process:
            st = manager.wait(inst.name, timeout=args.timeout)
            if st.phase is not Phase.READY:
                raise fail_from_state(st, "restart")
            print(f"{inst.name} ready at {inst.url} ({time.monotonic() - t0:.1f} s)")
        if is_process:
            return _foreground(manager, inst.name)
        return 0
    finally:
        reporter.close()
        manager.close()
