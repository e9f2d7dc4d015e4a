"""``enginedeck replay FILE|DIR|BUNDLE``: the console on a recording, with a timeline.

Read-only (every action that would change an engine, and the playground and bench, say "replay:
... is disabled"); the top bar shows REPLAY and the recorded time. ``-t`` starts at a time:
``10m ago`` (counted from now while the recording reaches now, else from its end), ``19:05``, a
date and time, or a unix time. Keys: space play/pause, ``,`` ``.`` step, ``<`` ``>`` a minute,
``t`` go to a time, ``+`` ``-`` speed.

What the recording says about itself (its damage notes, file names) is shown inert. Exit 0; 1 for
bad arguments or nothing to replay; 3 when the recording is damaged inside (each loss is named on
the screen and, after it, on stderr). A bundle is unpacked within a decompression budget, and its
temporary copy removed on SIGTERM, SIGHUP and SIGINT (``console.recording.opening``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import command_help

    p = sub.add_parser("replay", **command_help(
        "the console on a recording (enginedeck record, a cut or a bundle)",
        "enginedeck replay -t '10m ago'", "enginedeck replay incident.tar.gz --speed 2"))
    p.add_argument("path", metavar="FILE|DIR|BUNDLE", nargs="?",
                   help="a recording folder, a cut .edrec file or a bundle (default: the recording folder)")
    p.add_argument("-t", "--time", metavar="TIME", help="start here: '10m ago', '19:05', '2026-12-01 19:05:30'")
    p.add_argument("--speed", type=float, default=1.0, metavar="X", help="playback speed (default 1)")
    p.add_argument("--paused", action="store_true", help="start paused (space plays)")
    p.add_argument("--layout", metavar="NAME", default=None, help="auto, compact, default or wide")
    p.add_argument("--no-mouse", action="store_true", default=None, help="do not capture the mouse")
    p.add_argument("--config", metavar="FILE", default=None, help="configuration file (default: platform path)")
    p.set_defaults(func=run, paints=True)  # resumes garbage collection before its first frame


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from console.config import load_config
    from console.errors import UserError
    from console.profiles import load_profiles
    from console.recording import RecordingError, default_recording_dir
    from console.recording.opening import open_any
    from console.recording.replay import ReplaySource
    from console.textsafe import inert
    from console.ui.launch import check_keys, run_replay
    from console.ui.timeline import replay_time

    if args.speed <= 0:
        raise UserError("--speed must be positive")
    config = load_config(args.config)
    check_keys(config)
    settings = config.console
    updates: dict[str, Any] = {}
    if args.layout is not None:
        updates["layout"] = args.layout
    if args.no_mouse:
        updates["mouse"] = False
    settings = dataclasses.replace(settings, **updates)
    path = Path(args.path) if args.path else default_recording_dir(settings.recording_dir).expanduser()
    try:
        rec = open_any(path)
        src = ReplaySource(rec, playing=not args.paused)
        if args.time:
            try:
                start = replay_time(args.time, src)
            except ValueError as exc:
                raise UserError(str(exc)) from None
            src = ReplaySource(rec, start=start, playing=not args.paused)
    except RecordingError as exc:
        raise UserError(inert(str(exc))) from None
    src.set_speed(args.speed)
    first = src.latest()
    simulated = any(e.simulated for e in first.engines) or first.gpus.source == "simulated"
    notes = [inert(note) for note in rec.damage_notes()]
    run_replay(src, settings, profiles=load_profiles(), simulated=simulated,
               title=f"replay of {inert(path.name)}", keys=config.keys, notices=notes)
    notes = [inert(note) for note in rec.damage_notes()]  # with what playing it found
    if src.bad_documents:
        notes.append(f"{src.bad_documents} recorded document(s) that are not status documents skipped")
    for note in notes:  # also after the screen is gone, where the terminal keeps it
        print(f"enginedeck: {note}", file=sys.stderr)
    return 3 if rec.damaged_inside or src.bad_documents else 0
