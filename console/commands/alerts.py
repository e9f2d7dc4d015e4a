"""`enginedeck alerts`: the alert rules, and the same rules as a Prometheus rules file.

``alerts list`` shows every rule (shipped and the user's ``<config dir>/alerts/*.toml``) with its
severity, hold times, condition and, per engine profile, whether it applies or is n/a there.
``alerts export --format prometheus`` writes the rules in each engine's raw metric names (one group
per profile, a GPU group on DCGM exporter names) for ``promtool check rules`` and a Prometheus.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import command_help

    p = sub.add_parser("alerts", **command_help("alert rules: list them, or export them for Prometheus",
                                                "enginedeck alerts list",
                                                "enginedeck alerts export --format prometheus -o rules.yml"))
    verbs = p.add_subparsers(dest="verb", metavar="{list,export}")
    ls = verbs.add_parser("list", **command_help("every rule, its condition, and which engine profiles it applies to",
                                                 "enginedeck alerts list"))
    ls.set_defaults(func=run_list)
    ex = verbs.add_parser("export", **command_help(
        "the rules as a Prometheus rules file in each engine's raw metric names",
        "enginedeck alerts export --format prometheus -o rules.yml",
        "enginedeck alerts export --engine vllm --job vllm=vllm-prod"))
    ex.add_argument("--format", choices=["prometheus"], default="prometheus", help="output format (prometheus)")
    ex.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")
    ex.add_argument("--engine", action="append", default=[], metavar="PROFILE",
                    help="only this engine profile (repeatable; default: every profile)")
    ex.add_argument("--job", action="append", default=[], metavar="PROFILE=JOB",
                    help="the Prometheus job scraping PROFILE, for the unreachable rule's up{job=...} "
                    "(default: the profile name)")
    ex.set_defaults(func=run_export)
    p.set_defaults(func=lambda _a: (p.print_help(), 1)[1])


def _load(engines: list[str]) -> tuple[Any, Any]:
    from console.alerts.rules import load_rules
    from console.errors import UserError
    from console.profiles import load_profiles

    profiles = load_profiles()
    unknown = [e for e in engines if e not in profiles]
    if unknown:
        raise UserError(f"unknown engine profile {unknown[0]!r} (known: {', '.join(sorted(profiles))})")
    if engines:
        profiles = {k: v for k, v in profiles.items() if k in engines}
    return load_rules(), profiles


def run_list(args: argparse.Namespace) -> int:
    from console.alerts.signals import SIGNALS
    from console.textout import shown

    # Rule ids, conditions and profile names come from files anyone may have written (the user's
    # alerts folder, profiles): each is made safe before it is padded.
    rules, profiles = _load([])
    names = sorted(profiles)
    print(f"{'RULE':<28} {'SEVERITY':<9} {'FOR':>5} {'CLEAR':>5}  " + " ".join(f"{shown(n):<8}" for n in names))
    for r in rules:
        on = ["yes" if all(SIGNALS[c.signal].available(profiles[n]) for c in r.when) else "n/a" for n in names]
        print(f"{shown(r.id):<28} {shown(r.severity.value):<9} {r.for_s:>4g}s {r.clear_for:>4g}s  "
              + " ".join(f"{o:<8}" for o in on))
        print(f"    {shown(' and '.join(c.text() for c in r.when))}")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from console.alerts.export import export_prometheus
    from console.errors import UserError

    jobs: dict[str, str] = {}
    for item in args.job:
        profile, sep, job = item.partition("=")
        if not sep or not profile or not job or '"' in job or "\\" in job:
            raise UserError(f"--job {item!r}: expected PROFILE=JOB")
        jobs[profile] = job
    rules, profiles = _load(args.engine)
    text = export_prometheus(rules, profiles, jobs)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
        print(f"wrote {text.count('- alert:')} rules to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
