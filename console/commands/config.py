"""`enginedeck config path|show`: where the configuration lives, and what it says (secrets masked)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("config", help="show the configuration file path or its contents (secrets masked)")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    path = csub.add_parser("path", help="print the configuration file path")
    show = csub.add_parser("show", help="print the effective configuration, secrets masked")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    for sp in (path, show):
        sp.add_argument("--config", metavar="FILE", help="configuration file (default: the platform config path)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.config import load_config, mask_secrets
    from console.paths import config_file

    if args.config_command == "path":
        print(args.config or config_file())
        return 0
    cfg = load_config(args.config)
    if cfg.path is None:
        print(f"# no configuration file at {config_file()}; nothing configured")
        return 0
    engines: dict[str, Any] = {}
    for inst in cfg.instances:
        data = inst.config.model_dump(exclude_defaults=True, mode="json")
        key_env = inst.config.api_key_env
        data["resolved_url"] = inst.url
        if key_env:
            data["credential_in_environment"] = "set" if inst.api_key else f"{key_env} is not set in the environment"
        engines[inst.name] = data
    doc = mask_secrets({"file": str(cfg.path), "console": cfg.console.model_dump(mode="json"), "engines": engines})
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"# {doc['file']}")
        print("[console]")
        for k, v in doc["console"].items():
            print(f"{k} = {json.dumps(v)}")
        for name, data in doc["engines"].items():
            print(f"\n[engines.{name}]")
            for k, v in data.items():
                print(f"{k} = {json.dumps(v)}")
    return 0
