"""`enginedeck logs NAME [-f] [--tail N]`: an engine's output (container logs, or the process log copy).

Exit codes: 0 ok, 1 user error (nothing to show), 2 Docker unreachable.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.secrets import LineScrubber


def register(sub: Any) -> None:
    from console.commands._args import add_common, command_help

    p = sub.add_parser("logs", **command_help("show an engine's log output", "enginedeck logs qwen-sglang -f",
                                              "enginedeck logs qwen-sglang --tail 50"))
    add_common(p)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    p.add_argument("--tail", type=int, default=200, metavar="N", help="lines from the end to show (default 200)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.lifecycle.cli_support import load

    _cfg, inst = load(args)
    assert inst is not None
    if args.tail < 0:
        from console.errors import UserError

        raise UserError("--tail must be >= 0")
    from console.secrets import LineScrubber, instance_scrubber

    # An engine that logs its own arguments must not show its key here; lines are scrubbed whole,
    # so a secret split across two reads is still caught (and made inert as they are written).
    out = LineScrubber(instance_scrubber(inst))
    try:
        if inst.config.managed == "docker":
            return _docker_logs(inst.name, args.tail, args.follow, out)
        return _process_logs(inst.name, args.tail, args.follow, out)
    finally:
        _write(out.flush())


def _write(text: str) -> None:
    """Write scrubbed log text (``LineScrubber`` output) made inert: an engine's own escape
    sequences show as placeholders. Each character is replaced on its own, so a sequence split
    across two reads is as harmless as a whole one."""
    if text:
        from console.textsafe import inert

        sys.stdout.write(inert(text, multiline=True))
        sys.stdout.flush()


def _docker_logs(name: str, tail: int, follow: bool, out: LineScrubber) -> int:
    import codecs

    from console.errors import UserError
    from console.lifecycle import docker_backend
    from console.lifecycle.errors import translate_docker_error

    client = docker_backend.connect()
    handle = docker_backend.attach(client, name)
    if handle is None:
        raise UserError(f"{name} has no container (not started, or removed by `down`)")
    try:
        if not follow:
            data: bytes = handle.container.logs(tail=tail, stdout=True, stderr=True)
            _write(out.feed(data.decode("utf-8", "replace")))
            return 0
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for chunk in handle.container.logs(stream=True, follow=True, tail=tail, stdout=True, stderr=True):
            _write(out.feed(decoder.decode(chunk)))
    except KeyboardInterrupt:
        return 0
    except Exception as exc:
        import docker.errors
        import requests.exceptions

        if isinstance(exc, docker.errors.DockerException | requests.exceptions.RequestException):
            raise translate_docker_error(exc, instance=name) from None
        raise
    return 0


def _process_logs(name: str, tail: int, follow: bool, out: LineScrubber) -> int:
    import threading

    from console.errors import UserError
    from console.lifecycle import process_backend

    path = process_backend.log_path(name)
    if not path.exists():
        raise UserError(f"{name} has no log yet (it has not been started as a process here)")
    for line in process_backend.tail_file(path, tail):
        _write(out.feed(line + "\n"))
    if not follow:
        return 0
    rec = process_backend.read_record(name)
    if rec is None or not rec.alive():
        return 0
    stop = threading.Event()
    try:
        for chunk in process_backend.follow_file(path, stop, alive=rec.alive):
            _write(out.feed(chunk))
    except KeyboardInterrupt:
        return 0
    return 0
