"""A fleet of simulated engines: one child process per flavour, plus optional synthetic load.

    from console.sim.fleet import start_fleet
    fleet = start_fleet(["vllm", "sglang", "trtllm", "tgi"], load=True, seed=1)
    for profile, url, pid in fleet.endpoints: ...
    fleet.stop()

Each child runs ``python -m console sim --engine X --port P`` in its own process group (stopped with
killpg) and exits by itself when its parent process disappears.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from console.ports import free_port
from console.sim.engines import FLAVOURS
from console.sim.fleet_spec import FLEET_ENGINES, fleet_members
from console.sim.load import LoadTarget, LoadThread


@dataclass
class Fleet:
    endpoints: list[tuple[str, str, int]]  # (profile, url, pid)
    models: dict[str, str]  # url -> served model name
    log_dir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    load: LoadThread | None = None
    _stopped: bool = False

    def log_path(self, profile: str) -> Path:
        return self.log_dir / f"{profile}.log"

    def stop(self, timeout: float = 5.0, *, keep_logs: bool = False) -> None:
        """Stop the load and every child (SIGTERM to its process group, then SIGKILL), then remove
        the temporary log folder (``keep_logs``: leave it, e.g. for a child that failed)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self._stop_children(timeout)
        finally:
            if not keep_logs:
                shutil.rmtree(self.log_dir, ignore_errors=True)

    def _stop_children(self, timeout: float) -> None:
        if self.load is not None:
            self.load.stop()
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(2.0)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_fleet(
    engines: list[str] | tuple[str, ...] = FLEET_ENGINES,
    *,
    load: bool = True,
    seed: int = 0,
    base_port: int | None = None,
    host: str = "127.0.0.1",
    extra_args: list[str] | None = None,
    ready_timeout: float = 30.0,
) -> Fleet:
    """Start one simulated engine per name in ``engines`` and wait until each answers /v1/models."""
    for e in engines:
        if e not in FLAVOURS:
            raise ValueError(f"unknown engine {e!r} (known: {', '.join(FLAVOURS)})")
    log_dir = Path(tempfile.mkdtemp(prefix="enginedeck-fleet-"))
    fleet = Fleet(endpoints=[], models={}, log_dir=log_dir)
    try:
        # The small KV pool only under load: without it there is nothing to fill it.
        for i, member in enumerate(fleet_members(engines, seed=seed, small_kv=load)):
            engine, model = member.engine, member.model
            port = base_port + i if base_port is not None else free_port(host)
            cmd = [sys.executable, "-m", "console", *member.sim_args(host, str(port)), *(extra_args or [])]
            with open(log_dir / f"{engine}.log", "wb") as logf:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            fleet.procs.append(proc)
            url = f"http://{host}:{port}"
            fleet.endpoints.append((engine, url, proc.pid))
            fleet.models[url] = model
        for (engine, url, _), proc in zip(fleet.endpoints, fleet.procs, strict=True):
            _wait_ready(url, proc, ready_timeout, log_dir / f"{engine}.log")
        if load:
            targets = [LoadTarget(p, u, fleet.models[u]) for p, u, _ in fleet.endpoints]
            fleet.load = LoadThread(targets, seed=seed)
            fleet.load.start()
    except BaseException:
        fleet.stop()
        raise
    return fleet


def _wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-500:] if log.exists() else ""
            raise RuntimeError(f"simulated engine at {url} exited with {proc.returncode}: {tail}")
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=1.0) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"simulated engine at {url} not ready after {timeout:g} s")
