"""`enginedeck ps [--json]`: managed engines (containers and processes) and recognised,
monitor-only engine containers, with phase, address, GPUs and image or command.

Exit codes: 0 listed (Docker being unreachable is reported, not fatal), 1 bad configuration.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import add_common, command_help

    p = sub.add_parser("ps", **command_help("list managed and recognised engine containers and processes",
                                            "enginedeck ps", "enginedeck ps --json"))
    add_common(p, name=False)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.lifecycle.cli_support import load
    from console.lifecycle.manager import LifecycleManager

    cfg, _ = load(args)
    manager = LifecycleManager(cfg)
    try:
        report = manager.ps().result()
    finally:
        manager.close()
    if args.json:
        from console.textout import scrubbed_data

        doc = {"engines": [r.as_dict() for r in report.rows], "docker_error": report.docker_error}
        print(json.dumps(scrubbed_data(doc), indent=2))
        return 0
    from console.textout import shown

    if report.docker_error:
        print(f"enginedeck: docker: {shown(report.docker_error)}", file=sys.stderr)
    headers = ("NAME", "BACKEND", "PHASE", "ID", "ADDRESS", "GPUS", "IMAGE/COMMAND", "NOTE")
    rows = []
    for r in report.rows:
        note = r.detail
        if r.monitor_only and r.backend == "docker":
            note = note or "monitor-only"
        if r.config_changed:
            note = ("config changed: restart to apply; " + note).rstrip("; ")
        # Container names, images, commands and details come from Docker and the engines: made safe
        # before they are cut and padded (a placeholder is wider than the character it stands for).
        image, note = shown(r.image), shown(note)
        image = image if len(image) <= 48 else image[:45] + "..."
        fields = (r.name, r.backend, r.phase, r.ident, r.address, r.gpus or "-")
        rows.append((*(shown(f) for f in fields), image, note[:80]))
    if not rows:
        print("no engines configured or found")
        return 0
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    print(fmt.format(*headers).rstrip())
    for row in rows:
        print(fmt.format(*row).rstrip())
    return 0
