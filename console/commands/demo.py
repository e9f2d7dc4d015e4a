"""`enginedeck demo`: a simulated fleet in the console, no GPU needed; everything it starts, it stops.

The fleet runs as `python -m console sim --fleet --print-json` in its own process group, which
prints one JSON line per endpoint. On quit, SIGTERM/SIGHUP, a lost terminal, or an error, the
whole group is terminated (then killed); on Linux the fleet leader also gets SIGTERM if this
process dies without cleaning up (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from console.config import EngineInstance
from console.errors import UserError
from console.ui.launch import add_console_flags

FLAVOURS = ("vllm", "sglang", "trtllm", "tgi")
GPUS_PER_ENGINE = 2
START_TIMEOUT = 60.0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="the console on a simulated fleet (vLLM, SGLang, TensorRT-LLM, TGI; 8 simulated GPUs); no GPU needed",
    )
    add_console_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_demo(args)


def _die_with_parent() -> None:
    # In the child between fork and exec: ask the kernel to SIGTERM us when our parent dies.
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class SimFleet:
    """The simulator fleet process group and the endpoints it announced."""

    def __init__(self, proc: subprocess.Popen[bytes], endpoints: list[dict[str, Any]], log_path: Path) -> None:
        self.proc = proc
        self.endpoints = endpoints
        self.log_path = log_path

    @classmethod
    def start(cls, timeout: float = START_TIMEOUT, expect: int = len(FLAVOURS)) -> SimFleet:
        log_fd, log_name = tempfile.mkstemp(prefix="enginedeck-demo-", suffix=".log")
        cmd = [sys.executable, "-m", "console", "sim", "--fleet", "--print-json"]
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_fd,
            start_new_session=True,  # its own process group: one killpg ends it all
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        os.close(log_fd)
        fleet = cls(proc, [], Path(log_name))
        try:
            assert proc.stdout is not None
            fleet.endpoints = _read_endpoints(proc, proc.stdout, timeout, expect)
        except BaseException:
            fleet.stop()
            raise
        if not fleet.endpoints:
            tail = fleet.log_tail()
            fleet.stop()
            raise UserError("the simulated fleet did not start" + (f": {tail}" if tail else "")
                            + f" (log: {log_name})")
        return fleet

    def gone(self) -> str | None:
        """Why the fleet is no longer running (it stops as a whole when one engine dies), or None."""
        code = self.proc.poll()
        if code is None:
            return None
        tail = self.log_tail(1)
        return f"simulated fleet stopped (exit {code})" + (f": {tail}" if tail else "")

    def log_tail(self, n: int = 3) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def instances(self) -> list[EngineInstance]:
        from console.config import parse_engine_ref

        out: list[EngineInstance] = []
        seen: set[str] = set()
        for i, ep in enumerate(self.endpoints):
            profile = str(ep["profile"])
            inst = parse_engine_ref(f"{profile}@{ep['url']}")
            name = f"{profile}-sim"
            k = 2
            while name in seen:
                name, k = f"{profile}-sim{k}", k + 1
            seen.add(name)
            gpus = tuple(range(GPUS_PER_ENGINE * i, GPUS_PER_ENGINE * (i + 1)))
            pid = ep.get("pid")
            out.append(dataclasses.replace(
                inst,
                name=name,
                pids=(int(pid),) if isinstance(pid, int) else (),
                gpus=gpus,
                config=inst.config.model_copy(update={"simulated": True}),
            ))
        return out

    def stop(self, grace: float = 5.0) -> None:
        """Terminate the whole group; kill what is left after ``grace`` seconds. Idempotent."""
        pgid = self.proc.pid  # session leader: its pid is the group id
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _group_alive(pgid):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        # Engines that left the group (their own session) are ended by pid when still ours.
        for ep in self.endpoints:
            pid = ep.get("pid")
            if isinstance(pid, int) and _still_a_simulator(pid, pgid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _still_a_simulator(pid: int, pgid: int) -> bool:
    try:
        import psutil

        p = psutil.Process(pid)
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                    and "console" in " ".join(p.cmdline()) and "sim" in " ".join(p.cmdline()))
    except Exception:
        return False


def _read_endpoints(proc: subprocess.Popen[bytes], out: IO[bytes], timeout: float, expect: int) -> list[dict[str, Any]]:
    """JSON lines from the fleet's stdout until ``expect`` endpoints, EOF, or the deadline."""
    endpoints: list[dict[str, Any]] = []
    sel = selectors.DefaultSelector()
    sel.register(out, selectors.EVENT_READ)
    buf = b""
    deadline = time.monotonic() + timeout
    try:
        while len(endpoints) < expect:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not sel.select(timeout=min(left, 0.5)):
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(out.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                with contextlib.suppress(ValueError):
                    obj = json.loads(line)
                    if isinstance(obj, dict) and "url" in obj and "profile" in obj:
                        endpoints.append(obj)
    finally:
        sel.close()
    return endpoints


def run_demo(args: argparse.Namespace) -> int:
    from console.config import Config, load_config
    from console.ui.launch import install_exit_signals, resolve_settings, run_console

    config = load_config(args.config) if getattr(args, "config", None) else Config(path=None)
    settings = resolve_settings(args, config)
    install_exit_signals()  # a SIGTERM while the fleet starts still runs the cleanup below
    print("enginedeck demo: starting the simulated fleet…", file=sys.stderr)
    fleet = SimFleet.start()
    try:
        instances = fleet.instances()
        run_console(
            instances,
            settings,
            simulated=True,
            gpu_source="simulated",
            gpu_assignment={i.name: i.gpus for i in instances},
            title="demo",
            check_backing=fleet.gone,
        )
    finally:
        fleet.stop()
        with contextlib.suppress(OSError):
            fleet.log_path.unlink()
    return 0
