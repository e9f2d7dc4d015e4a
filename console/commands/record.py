"""``enginedeck record``: record every engine, GPU and the host, headless, until stopped (a service).

The same documents ``status --json`` prints, every refresh, plus each engine's raw metrics payload
every ``--raw-every`` seconds, into the recording folder (``[console] recording_dir``, default
``recordings`` in the state dir); ``--retain`` and ``--max-size`` bound it. SIGTERM or ctrl+c write
what is in memory and exit 0; a kill loses at most the last frame (under 10 s). Exit 1: bad
arguments or configuration, or the folder is being recorded by another enginedeck.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import command_help

    p = sub.add_parser("record", **command_help(
        "record engines, GPUs and host to disk until stopped (replay, export)",
        "enginedeck record --retain 48h --max-size 1GB",
        "enginedeck record --engine vllm@http://127.0.0.1:8000 --dir ~/incidents"))
    p.add_argument("--engine", action="append", default=[], metavar="NAME|PROFILE@URL",
                   help="an engine to record (configured name or PROFILE@URL); repeatable; default: all configured")
    p.add_argument("--dir", metavar="DIR", help="recording folder (default: [console] recording_dir, else the "
                   "platform state dir's recordings)")
    p.add_argument("--retain", metavar="AGE", help="keep this much (default: [console] record_retain, 48h)")
    p.add_argument("--max-size", metavar="SIZE", help="keep at most this much on disk (default: [console] "
                   "record_max_size, 1GB)")
    p.add_argument("--raw-every", metavar="SECS", default="60s",
                   help="one raw metrics payload per engine this often (default 60s; 0 for none)")
    p.add_argument("--refresh", type=float, metavar="SECS", help="collection period (default: [console] refresh)")
    p.add_argument("--gpus", choices=["nvml", "simulated", "none"], help="GPU source (default: from config, nvml)")
    p.add_argument("--api-key-env", metavar="NAME",
                   help="environment variable holding the API key for PROFILE@URL engines")
    p.add_argument("--config", metavar="FILE", help="configuration file (default: the platform config path)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from console.config import load_config, selected_instances
    from console.errors import UserError
    from console.lifecycle.running import with_running
    from console.recording import RecordingError, RecordingWriter, default_recording_dir
    from console.recording.recorder import Recorder
    from console.secrets import Scrubber, instance_secrets
    from console.telemetry.hub import Hub
    from console.textsafe import inert
    from console.timespec import parse_duration, parse_size

    cfg = with_running(load_config(args.config))  # a running demo's engines by name, as `ps` lists them
    try:
        retain = parse_duration(args.retain or cfg.console.record_retain)
        max_bytes = parse_size(args.max_size or cfg.console.record_max_size)
        raw_every = parse_duration(args.raw_every)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    refresh = args.refresh or cfg.console.refresh
    if refresh <= 0:
        raise UserError("--refresh must be positive")
    instances = selected_instances(cfg, args.engine, api_key_env=args.api_key_env)
    if not instances:
        raise UserError("no engine to record: configure one under [engines] or pass --engine PROFILE@URL")
    directory = (Path(args.dir) if args.dir else default_recording_dir(cfg.console.recording_dir)).expanduser()
    scrubber = Scrubber(s for inst in instances for s in instance_secrets(inst))
    try:
        writer = RecordingWriter(directory, retain_s=retain, max_bytes=max_bytes, scrubber=scrubber)
    except RecordingError as exc:
        raise UserError(inert(str(exc))) from None
    from console.alerts.evaluate import evaluator_for

    # The rules the console and `status --json` evaluate: a recording replays the alerts they showed.
    hub = Hub(instances, refresh=refresh, gpu_source=args.gpus or cfg.console.gpu_source,
              alerts=evaluator_for(instances))
    done = threading.Event()
    recorder = Recorder(hub, writer, raw_every=raw_every or None, on_stop=lambda _reason: done.set())
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())
    # A PROFILE@URL engine's name is its URL: credentials in it are masked here as in the recording.
    names = inert(scrubber(", ".join(i.name for i in instances)))
    print(f"recording {names} every {refresh:g} s to {inert(str(directory))} (keeping "
          f"{args.retain or cfg.console.record_retain}, "
          f"at most {args.max_size or cfg.console.record_max_size}); ctrl+c or SIGTERM stops", file=sys.stderr,
          flush=True)
    recorder.start()
    hub.start()
    try:
        while not done.wait(1.0):
            pass
    finally:
        hub.stop()
        recorder.stop()
    if recorder.error:
        print(f"enginedeck: {inert(scrubber(recorder.error))}", file=sys.stderr)
        return 1
    print(f"recorded {recorder.documents} snapshots to {inert(str(directory))}", file=sys.stderr)
    return 0
