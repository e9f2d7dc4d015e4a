"""`enginedeck config path|show|keys`: where the configuration lives, what it says (secrets masked),
and every console action with its keys after the file's ``[keys]``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the config module reads profiles from disk: only when the command runs
    from console.config import Config


def register(sub: Any) -> None:
    from console.commands._args import command_help

    p = sub.add_parser("config", **command_help("show the configuration file path or its contents (secrets masked)",
                                                "enginedeck config path", "enginedeck config show --json"))
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    path = csub.add_parser("path", **command_help("print the configuration file path", "enginedeck config path"))
    show = csub.add_parser("show", **command_help("print the effective configuration, secrets masked",
                                                  "enginedeck config show", "enginedeck config show --config my.toml"))
    show.add_argument("--json", action="store_true", help="machine-readable output")
    keys = csub.add_parser("keys", **command_help("list the console's actions: id (for [keys]), keys, what it does",
                                                  "enginedeck config keys", "enginedeck config keys --json"))
    keys.add_argument("--json", action="store_true", help="machine-readable output")
    for sp in (path, show, keys):
        sp.add_argument("--config", metavar="FILE", help="configuration file (default: the platform config path)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.config import load_config, mask_secrets
    from console.paths import config_file
    from console.schema import dump

    if args.config_command == "path":
        print(args.config or config_file())
        return 0
    cfg = load_config(args.config)
    if args.config_command == "keys":
        return _keys(cfg, as_json=args.json)
    if cfg.keys:
        from console.ui.launch import check_keys

        check_keys(cfg)  # the console would refuse them: say so here too
    if cfg.path is None:
        print(f"# no configuration file at {config_file()}; nothing configured")
        return 0
    from console.lifecycle.cli_support import literal_secret_warning

    for inst in cfg.instances:
        if warning := literal_secret_warning(inst):
            print(warning, file=sys.stderr)
    engines: dict[str, Any] = {}
    for inst in cfg.instances:
        data = dump(inst.config, exclude_defaults=True)
        key_env = inst.config.api_key_env
        data["resolved_url"] = inst.url
        if key_env:
            data["credential_in_environment"] = "set" if inst.api_key else f"{key_env} is not set in the environment"
        engines[inst.name] = data
    doc = mask_secrets({"file": str(cfg.path), "console": dump(cfg.console), "engines": engines})
    if cfg.keys:
        doc["keys"] = {aid: list(keys) for aid, keys in cfg.keys.items()}
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"# {doc['file']}")
        print("[console]")
        for k, v in doc["console"].items():
            print(f"{k} = {json.dumps(v)}")
        from console.textout import shown

        for name, data in doc["engines"].items():
            print(f"\n[engines.{shown(name)}]")  # values are json.dumps'd: their controls escaped
            for k, v in data.items():
                print(f"{k} = {json.dumps(v)}")
        if "keys" in doc:
            print("\n[keys]")
            for k, v in doc["keys"].items():
                print(f"{k} = {json.dumps(v)}")
    return 0


def _keys(cfg: Config, *, as_json: bool) -> int:
    """Every action of the console, as help lists them, with the keys in effect."""
    from console.ui.actions import display_key
    from console.ui.launch import action_registry, check_keys

    check_keys(cfg)
    registry = action_registry(cfg.keys)
    rows: list[dict[str, Any]] = [
        {"id": a.id, "keys": a.key_list, "shown": display_key(a.keys), "action": a.description,
         "where": list(a.screens), "changes_engines": a.mutating, "remapped": a.id in cfg.keys}
        for a in registry
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["id"]) for r in rows)
    for r in rows:
        keys = ", ".join(r["keys"]) or "(unbound)"
        where = f"  [{', '.join(r['where'])}]" if r["where"] else ""
        mark = " *" if r["remapped"] else ""
        print(f"{r['id']:<{width}}  {keys:<28} {r['action']}{where}{mark}")
    if cfg.keys:
        print(f"\n* from [keys] in {cfg.path}")
    return 0
