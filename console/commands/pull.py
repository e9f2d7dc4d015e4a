"""`enginedeck pull NAME`: pull the engine's image explicitly (start never pulls), with progress.

Exit codes: 0 pulled, 1 user error (not a container engine), 2 pull failed / Docker unreachable.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import add_change_command

    p = add_change_command(sub, "pull", "pull a container engine's image (with progress)",
                           "enginedeck pull qwen-sglang")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.lifecycle.cli_support import load_for_change
    from console.lifecycle.manager import LifecycleManager
    from console.textout import shown as shown_text

    cfg, inst = load_for_change(args, "pull")
    image = inst.config.image or f"{inst.profile.container.image}:{inst.profile.container.tag}"
    tty = sys.stderr.isatty()
    shown = [-10.0]

    def progress(pct: float, status: str) -> None:
        status = shown_text(status)  # the registry's words
        if tty:
            bar = "#" * int(pct / 5)
            sys.stderr.write(f"\rpulling {image} [{bar:<20}] {pct:5.1f}% {status[:30]:<30}")
            sys.stderr.flush()
        elif pct >= shown[0] + 10 or pct >= 100:
            shown[0] = pct
            print(f"pulling {image}: {pct:.0f}%", file=sys.stderr)

    manager = LifecycleManager(cfg)
    try:
        manager.pull(inst.name, progress).result()
    finally:
        if tty:
            sys.stderr.write("\n")
        manager.close()
    print(f"{image} pulled")
    return 0
