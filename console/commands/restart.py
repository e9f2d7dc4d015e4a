"""`enginedeck restart NAME`: stop (if running) and start again; waits until ready unless --no-wait.

Asks for confirmation on a terminal unless --yes, as `down` does (the engine stops serving until it
is ready again); without a terminal --yes is required.
Exit codes as `up`: 0 ready, 1 user error / not confirmed, 2 engine failed, 3 timeout.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import add_common, add_read_only

    p = sub.add_parser("restart", help="restart a managed engine")
    add_common(p)
    add_read_only(p)
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument(
        "--wait", action=argparse.BooleanOptionalAction, default=True, help="wait until ready (default: --wait)"
    )
    p.add_argument("--timeout", type=float, metavar="S", help="give up waiting after S seconds (exit 3)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.commands.up import _foreground
    from console.errors import UserError
    from console.lifecycle.cli_support import (
        PhaseReporter,
        confirm,
        fail_from_state,
        key_on_command_line_note,
        load,
        refuse_if_read_only,
    )
    from console.lifecycle.manager import LifecycleManager
    from console.lifecycle.process_backend import install_signal_cleanup
    from console.model import Phase

    cfg, inst = load(args)
    assert inst is not None
    refuse_if_read_only(args, cfg, "restart", inst.name)
    if not args.yes:
        if not sys.stdin.isatty():
            raise UserError(f"restart {inst.name}: not on a terminal; add --yes to confirm")
        if not confirm(f"Restart {inst.name} ({inst.config.managed}, {inst.url})? It stops serving until ready again."):
            print("not restarted", file=sys.stderr)
            return 1
    is_process = inst.config.managed == "process"
    if is_process:
        install_signal_cleanup()
    manager = LifecycleManager(cfg)
    reporter = PhaseReporter(manager, inst.name)
    t0 = time.monotonic()
    try:
        manager.restart(inst.name).result()
        if note := key_on_command_line_note(manager, inst.name):
            print(note, file=sys.stderr)
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
