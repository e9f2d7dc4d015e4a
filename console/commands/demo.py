"""`enginedeck demo`: a simulated fleet in the console, no GPU needed; everything it starts, it stops.

The four simulated engines (vLLM, SGLang, TensorRT-LLM, TGI flavours) are managed engines of the
lifecycle's process backend, exactly like a `managed = "process"` engine of a user's
configuration: the console can stop, start and restart them, shows their phases and logs, and
killing one leaves the others running. A separate process (`enginedeck sim --load ...`) sends the
synthetic client load, so the console process only watches. On quit, SIGTERM/SIGHUP, a lost
terminal, or an error, the load process and every engine are stopped: the demo's terminal-loss
policy is always "stop" (an audit entry ``terminal-loss`` says so), carried out within the
console's shutdown deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console import gc_control
from console.commands._args import add_console_flags, command_help
from console.errors import UserError
from console.sim.fleet_spec import FLEET_ENGINES, fleet_members

if TYPE_CHECKING:  # the config module reads profiles from disk: only when the demo runs, not for --help
    from typing import BinaryIO

    from console.config import Config, EngineInstance
    from console.lifecycle.manager import LifecycleManager

FLAVOURS = FLEET_ENGINES
GPUS_PER_ENGINE = 2
START_TIMEOUT = 60.0
# On quit the simulators get this long to end by themselves before SIGKILL: they hold nothing worth
# a graceful drain, and the shell should be back at once (a simulator drains its streams for 1 s).
QUIT_GRACE = 0.5


def register(sub: Any) -> None:
    p = sub.add_parser("demo", **command_help(
        "the console on a simulated fleet (vLLM, SGLang, TensorRT-LLM, TGI; 8 simulated GPUs); no GPU needed",
        "enginedeck demo", "enginedeck demo --read-only --layout compact"))
    add_console_flags(p)
    p.set_defaults(func=run, paints=True)  # resumes garbage collection before its first frame


def run(args: argparse.Namespace) -> int:
    return run_demo(args)


def _die_with_parent() -> None:
    # In the child between fork and exec: ask the kernel to SIGTERM us when our parent dies.
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def demo_config(ports: dict[str, int], seed: int = 1, suffix: str = "") -> Config:
    """The demo fleet as a configuration: one process-managed simulator per flavour (the members of
    ``sim --fleet``: same models, KV pool and seeds), named ``vllm-sim{suffix}``..."""
    from console.config import parse_config

    engines: dict[str, Any] = {}
    for member in fleet_members(FLAVOURS, seed=seed):
        engines[f"{member.engine}-sim{suffix}"] = {
            "profile": member.engine,
            "managed": "process",
            "port": ports[member.engine],
            "model": member.model,
            "command": ["{python}", "-m", "console", *member.sim_args("127.0.0.1", "{port}", "{model}")],
            "simulated": True,
            "timeouts": {"loading": 60, "stopping": 5},
        }
    return parse_config({"engines": engines}, "<enginedeck demo>")


class DemoFleet:
    """The simulated engines (through a LifecycleManager) and the process sending them load."""

    def __init__(self, config: Config, manager: Any, log_path: Path) -> None:
        self.config = config
        self.manager = manager
        self.load_proc: subprocess.Popen[bytes] | None = None
        self.log_path = log_path
        self.slot = 1
        self.slot_lock: BinaryIO | None = None  # held while this demo runs (console/commands/_demo_slots.py)

    @classmethod
    def start(cls, timeout: float = START_TIMEOUT, seed: int = 1) -> DemoFleet:
        from console.commands._demo_slots import claim_slot, slot_suffix
        from console.lifecycle.manager import LifecycleManager
        from console.ports import free_port

        # A demo already running for this user keeps its engines: this one runs its own, side by side.
        slot, lock = claim_slot(lambda n: [f"{f}-sim{slot_suffix(n)}" for f in FLAVOURS])
        try:
            config = demo_config({f: free_port() for f in FLAVOURS}, seed=seed, suffix=slot_suffix(slot))
            manager = LifecycleManager(config)
        except BaseException:
            lock.close()
            raise
        log_fd, log_name = tempfile.mkstemp(prefix="enginedeck-demo-load-", suffix=".log")
        os.close(log_fd)
        fleet = cls(config, manager, Path(log_name))
        fleet.slot, fleet.slot_lock = slot, lock
        try:
            futures = [manager.start(i.name) for i in config.instances]
            for f in futures:
                f.result(timeout=timeout)
            for inst in config.instances:
                st = manager.wait(inst.name, timeout=timeout)
                if st.phase.value != "ready":
                    raise UserError(f"demo engine {inst.name} did not start: {st.one_line()}")
            fleet.start_load(seed)
        except BaseException:
            fleet.stop()
            raise
        return fleet

    def start_load(self, seed: int) -> None:
        refs = [f"{i.profile.name}@{i.url}" for i in self.config.instances]
        cmd = [sys.executable, "-m", "console", "sim", "--seed", str(seed)]
        for ref in refs:
            cmd += ["--load", ref]
        with open(self.log_path, "wb") as log:
            self.load_proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )

    def pids_of(self, name: str) -> tuple[int, ...]:
        pid = self.manager.status(name).pid
        return (int(pid),) if pid else ()

    def instances(self) -> list[EngineInstance]:
        import dataclasses

        out = []
        for i, inst in enumerate(self.config.instances):
            gpus = tuple(range(GPUS_PER_ENGINE * i, GPUS_PER_ENGINE * (i + 1)))
            out.append(dataclasses.replace(inst, gpus=gpus, pids=self.pids_of(inst.name)))
        return out

    def gone(self) -> str | None:
        """Why the synthetic load stopped, or None while it runs (engines report through phases)."""
        if self.load_proc is None or self.load_proc.poll() is None:
            return None
        return f"synthetic load stopped (exit {self.load_proc.returncode}; log {self.log_path})"

    def on_terminal_loss(self, reason: str, done_by: float) -> None:
        """The terminal is gone: stop the load and the simulators by ``done_by`` (monotonic), audited."""
        from console.lifecycle.terminal_loss import carry_out

        proc = self.load_proc
        load = {proc.pid: "synthetic load"} if proc is not None and proc.poll() is None else {}
        carry_out(self.manager, "stop", reason, done_by, also=load)

    def _stop_load(self, grace: float) -> None:
        proc = self.load_proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=2)

    def stop(self, grace: float = 5.0) -> None:
        """Stop the load and every engine this process started, all at once. Idempotent."""
        from console.lifecycle.process_backend import cleanup_all

        proc = self.load_proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)  # it ends while the engines do
        cleanup_all(grace=grace)
        self._stop_load(grace)
        with contextlib.suppress(Exception):
            self.manager.close()
        with contextlib.suppress(OSError):
            self.log_path.unlink()
        if self.slot_lock is not None:
            self.slot_lock.close()
            self.slot_lock = None


def engines_running(manager: LifecycleManager) -> int:
    """How many of the manager's engines have not ended (one stopped from the console has)."""
    from console.model import Phase

    ended = (Phase.EXITED, Phase.FAILED)
    count = 0
    for name in manager.names:
        with contextlib.suppress(Exception):  # a state that cannot be read counts as running: it is stopped too
            if manager.status(name).phase in ended:
                continue
        count += 1
    return count


def run_demo(args: argparse.Namespace) -> int:
    from console.config import Config, load_config
    from console.ui.control_lifecycle import ManagerControl
    from console.ui.launch import install_exit_signals, resolve_settings, run_console

    config = load_config(args.config) if getattr(args, "config", None) else Config(path=None)
    settings = resolve_settings(args, config)
    install_exit_signals()  # a SIGTERM while the fleet starts still runs the cleanup below
    print("enginedeck demo: starting the simulated fleet…", file=sys.stderr)
    started = time.monotonic()
    fleet = DemoFleet.start()
    side = f" (another demo is running: this one is slot {fleet.slot}, its own engines)" if fleet.slot > 1 else ""
    print(f"enginedeck demo: fleet ready in {time.monotonic() - started:.1f} s{side}", file=sys.stderr)
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
            lifecycle=ManagerControl(fleet.manager, fleet.config),  # also gives the hub current pids
            on_terminal_loss=fleet.on_terminal_loss,
            keys=config.keys,
        )
    finally:
        running = engines_running(fleet.manager)
        _say(f"enginedeck demo: stopping {running} engine{'' if running == 1 else 's'} and the load…")
        stopping = time.monotonic()
        fleet.stop(grace=QUIT_GRACE)
        _say(f"enginedeck demo: stopped in {time.monotonic() - stopping:.1f} s")
        # The console leaves many small objects (history, snapshots); the collection the interpreter
        # runs at exit took 1.8 s of the shell's wait here. They die with the process anyway. A
        # counted pause, never resumed: a digest still finishing cannot turn collection back on.
        gc_control.off_until_exit()
    return 0


def _say(line: str) -> None:
    """One line on stderr, only if the terminal takes it now: a lost or stalled terminal must not
    keep the fleet running."""
    import select

    try:
        fd = sys.stderr.fileno()
        if select.select([], [fd], [], 0.1)[1]:
            os.write(fd, (line + "\n").encode())
    except (OSError, ValueError):
        pass
