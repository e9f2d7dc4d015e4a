"""`enginedeck bundle [--last 15m] [-o FILE]`: one archive with what a bug report needs.

Writes ``enginedeck-bundle-<host>-<time>.tar.gz`` (in the current folder, or FILE, or into FILE when
it is a folder): manifest with sha256 per file and a redaction report, the window's recording,
each engine's raw metrics, version and models answers, launch commands, container inspect data,
log tails, GPU and host facts, and a Markdown summary shaped like the vLLM/SGLang bug templates.
Every file passes through the one secret rule. Prints the archive's path.

Exit codes: 0 written, 1 configuration error or the archive could not be written.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

SNAPSHOT_WAIT_S = 2.0  # how long the fresh snapshot may take (engines probed once, host read)


def register(sub: Any) -> None:
    from console.commands._args import command_help

    p = sub.add_parser("bundle", **command_help(
        "write an incident bundle (.tar.gz) for a bug report: recording, metrics, "
        "launch commands, logs, GPU and host facts, secrets masked",
        "enginedeck bundle --last 15m -o /tmp/", "enginedeck bundle --engine vllm@http://127.0.0.1:8000 --gpus none"))
    p.add_argument("--last", default="15m", metavar="DURATION",
                   help="the window before now the recording covers: 90s, 15m, 2h (default 15m)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the archive to write, a folder to write it into (default: the current folder), or '-' "
                        "for standard output; a symlink, FIFO or device is written through, never replaced")
    p.add_argument("--engine", action="append", default=[], metavar="NAME|PROFILE@URL",
                   help="an engine to include (configured name or PROFILE@URL); repeatable; default every configured")
    p.add_argument("--recording", metavar="DIR", help="the recording folder to cut the window from "
                   "(default: [console] recording_dir, else where `enginedeck record` writes)")  # fmt: skip
    p.add_argument("--log-lines", type=int, default=500, metavar="N", help="log lines per engine (default 500)")
    p.add_argument("--gpus", choices=["nvml", "simulated", "none"], help="GPU source of the snapshot "
                   "(default: from config, nvml)")  # fmt: skip
    p.add_argument("--api-key-env", metavar="NAME",
                   help="environment variable holding the API key for PROFILE@URL engines")
    p.add_argument("--config", metavar="FILE", help="configuration file (default: the platform config path)")
    p.set_defaults(func=run)


def _dest(output: str | None, now: float) -> Any:
    import os
    import socket
    from pathlib import Path

    from console.bundle.make import default_name, free_path

    name = default_name(socket.gethostname(), now)
    if output is None:
        return free_path(Path.cwd() / name)
    if output == "-":
        return Path(output)
    path = Path(output).expanduser()
    if path.is_dir() or output.endswith(("/", "\\")):
        return free_path(path / name)
    if os.path.lexists(path):  # an existing file, link, FIFO or device is written as named
        return path
    if not path.name.endswith(".tar.gz"):
        path = path.with_name(path.name + ".tar.gz")
    return path


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from console.bundle.make import BundleRequest, make_bundle
    from console.bundle.window import Window, parse_duration
    from console.commands.status import EXIT_CONFIG
    from console.config import load_config, selected_instances
    from console.errors import UserError
    from console.recording import default_recording_dir
    from console.recording.opening import cleanup_on_signals
    from console.textout import shown
    from console.textsafe import inert

    last = parse_duration(args.last)
    if args.log_lines < 0:
        raise UserError("--log-lines must be >= 0")
    try:
        from console.lifecycle.running import with_running

        cfg = with_running(load_config(args.config))  # a running demo's engines by name, as `ps` lists them
        instances = selected_instances(cfg, args.engine, api_key_env=args.api_key_env)
    except UserError as exc:
        print(f"enginedeck: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    now = time.time()
    dest = _dest(args.output, now)
    gpu_source = args.gpus or cfg.console.gpu_source
    req = BundleRequest(instances=instances, window=Window.last(last, now), dest=dest,
                        snapshot=lambda: _fresh_snapshot(instances, gpu_source),
                        recording_dir=(Path(args.recording) if args.recording
                                       else default_recording_dir(cfg.console.recording_dir)).expanduser(),
                        log_lines=args.log_lines)  # fmt: skip
    try:
        # SIGTERM or SIGHUP unwind as ctrl+c does: the window's cut and the archive's partial file are
        # temporary, and go with the process.
        with cleanup_on_signals():
            result = make_bundle(req)
    except OSError as exc:
        print(f"enginedeck: cannot write {inert(str(dest))}: {inert(str(exc.strerror or exc))}", file=sys.stderr)
        return EXIT_CONFIG
    rec = result.manifest.get("recording", {})
    if str(result.path) != "-":  # on standard output the archive is the output
        print(f"{inert(str(result.path))}")
    print(f"  {result.bytes / 1024:.0f} KiB, {len(result.manifest.get('files', []))} files, "
          f"{result.manifest['redaction']['masked']} secrets masked, {result.seconds:.1f} s; "
          f"{shown(str(rec.get('note')))}", file=sys.stderr)  # fmt: skip
    return 0


def _fresh_snapshot(instances: list[Any], gpu_source: Any) -> Any:
    """One snapshot of the engines, GPUs and host, as `status --sample 0` takes it."""
    from console.commands.status import wait_until_collected
    from console.telemetry.hub import Hub

    if not instances:
        return None
    from console.alerts.evaluate import evaluator_for

    # The rules the console evaluates: the bundle's snapshot carries their verdicts as status --json does.
    hub = Hub(instances, refresh=1.0, gpu_source=gpu_source, alerts=evaluator_for(instances))
    hub.start()
    try:
        hub.wait_published(timeout=SNAPSHOT_WAIT_S)
        wait_until_collected(hub, time.monotonic() + SNAPSHOT_WAIT_S)
        return hub.latest()
    finally:
        hub.stop()
