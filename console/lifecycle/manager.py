"""LifecycleManager: start, watch, stop, restart, remove, pull and adopt engine instances.

The public API never blocks its caller on Docker, processes or HTTP: every action returns a
``concurrent.futures.Future`` and runs in a worker thread; ``status``/``logs`` read in-memory
state only. A UI subscribes (``subscribe``) and gets each new ``InstanceState`` in a worker
thread (hop to the UI loop with ``app.call_from_thread``). Headless commands block on the
futures or on ``wait`` (never call ``wait`` from an event loop).

Per running instance two daemon threads work: a supervisor (readiness probe, exit watch,
phase timeouts) and a log follower (output -> ``LogBuffer``). Mutating actions on one instance
are serialised; a second one while the first runs fails at once with a clear message.
Every mutating action is appended to the audit log, successful or not.

A console uses it like this::

    manager = LifecycleManager(config)            # audit log in state_dir()/audit.log
    install_signal_cleanup()                      # main thread: SIGTERM/SIGHUP end process engines too
    manager.subscribe(lambda st: app.call_from_thread(update_row, st))
    manager.refresh_all()                         # find engines started earlier (containers, records)
    manager.start("vllm-a")                       # Future; errors arrive as LifecycleError (one line)
    manager.logs("vllm-a").subscribe(on_log_update)   # at most ~10 notices a second
    manager.stop("vllm-a")                        # state.countdown ticks down, then SIGKILL
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from console.config import Config, EngineInstance
from console.errors import UserError
from console.lifecycle import docker_backend, process_backend
from console.lifecycle.audit import AuditLog
from console.lifecycle.backend import ExitInfo, Handle
from console.lifecycle.errors import (
    ActionRefused,
    DockerUnreachable,
    LifecycleError,
    LifecycleTimeout,
    translate_docker_error,
)
from console.lifecycle.gpu_release import NvmlUnavailable, gpu_pids
from console.lifecycle.launch import LaunchSpec, build_launch
from console.lifecycle.logs import LogBuffer
from console.lifecycle.phases import PhaseMachine, Verdict, ending_of
from console.lifecycle.probe import probe_ready
from console.lifecycle.state import RUNNING_PHASES, STARTING_PHASES, TERMINAL, Backend, InstanceState
from console.model import Phase
from console.paths import private_dir
from console.profiles import EngineProfile
from console.secrets import Scrubber, instance_secrets

T = TypeVar("T")
StateListener = Callable[[InstanceState], None]
ProgressCallback = Callable[[float, str], None]

PROBE_INTERVAL_STARTING = 0.5
PROBE_INTERVAL_READY = 2.0
PROBE_TIMEOUT = 2.0
READY_OR_END = frozenset({Phase.READY, Phase.EXITED, Phase.FAILED})
# How long an engine that ended without us asking (SIGTERM, exit 0, container removed) is watched
# for a restart from outside this enginedeck (a headless `restart` takes a few seconds to launch
# the new one) before it counts as stopped from outside.
OUTSIDE_RESTART_GRACE = 10.0


@dataclass(frozen=True, slots=True)
class PsRow:
    """One line of `enginedeck ps`: a configured instance, or a container/process found running."""

    name: str  # instance name; for unconfigured finds the container name or "pid N"
    backend: str  # docker | process | url
    phase: str
    managed: bool  # started by enginedeck (or adopted)
    monitor_only: bool  # found running, not ours: watch only until adopted
    ident: str = ""  # container short id or "pid N"
    address: str = ""  # published host:port(s)
    gpus: str = ""
    image: str = ""  # image, or the (masked) command for processes
    profile: str = ""
    detail: str = ""
    config_changed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": self.backend,
            "phase": self.phase,
            "managed": self.managed,
            "monitor_only": self.monitor_only,
            "id": self.ident,
            "address": self.address,
            "gpus": self.gpus,
            "image": self.image,
            "profile": self.profile,
            "detail": self.detail,
            "config_changed": self.config_changed,
        }


@dataclass(frozen=True, slots=True)
class PsReport:
    rows: tuple[PsRow, ...]
    docker_error: str | None = None  # why Docker could not be asked (rows for docker then lack runtime data)


class _Slot:
    def __init__(self, inst: EngineInstance, machine: PhaseMachine, logs: LogBuffer) -> None:
        self.inst = inst
        self.machine = machine
        self.logs = logs
        self.lock = threading.RLock()
        self.op = threading.Lock()
        self.handle: Handle | None = None
        self.spec: LaunchSpec | None = None
        self.generation = 0
        self.stopping = False
        self.has_gpus = False
        self.gpu_pids: set[int] = set()
        self.log_thread: threading.Thread | None = None
        self.log_stop = threading.Event()
        self.adopted = False  # an adopted container is stopped but never removed by enginedeck
        self.published: InstanceState | None = None


def _backend_of(inst: EngineInstance) -> Backend:
    if inst.config.managed == "docker":
        return Backend.DOCKER
    if inst.config.managed == "process":
        return Backend.PROCESS
    return Backend.NONE


class LifecycleManager:
    def __init__(
        self,
        config: Config,
        *,
        audit: AuditLog | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_workers: int = 8,
        log_capacity: int = 10_000,
    ) -> None:
        self.config = config
        self.audit = audit if audit is not None else AuditLog()
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="enginedeck-lifecycle")
        self._listeners: list[StateListener] = []
        self._cond = threading.Condition()
        self._docker: Any = None
        self._docker_lock = threading.Lock()
        self._closed = threading.Event()
        self._audit_local = threading.local()  # entries written by this thread's current action
        self._slots: dict[str, _Slot] = {}
        for inst in config.instances:
            machine = PhaseMachine(
                inst.name,
                timeouts=inst.config.timeouts,
                loading=inst.profile.health.loading,
                backend=_backend_of(inst),
                clock=clock,
            )
            logs = LogBuffer(log_capacity)
            logs.set_secrets(instance_secrets(inst))
            self._slots[inst.name] = _Slot(inst, machine, logs)

    # ================================================================= reading (non-blocking)
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._slots)

    def status(self, name: str) -> InstanceState:
        slot = self._slot(name)
        with slot.lock:
            return slot.machine.state

    def states(self) -> dict[str, InstanceState]:
        return {n: self.status(n) for n in self._slots}

    def logs(self, name: str) -> LogBuffer:
        return self._slot(name).logs

    def launch_spec(self, name: str) -> LaunchSpec:
        """The launch an instance would get now (for display: use ``LaunchSpec.display()``)."""
        return build_launch(self._slot(name).inst)

    def subscribe(self, listener: StateListener) -> Callable[[], None]:
        """Call ``listener(state)`` on every state change of any instance (in a worker thread)."""
        with self._cond:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._cond:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    # ================================================================= actions (return futures)
    def start(self, name: str) -> Future[InstanceState]:
        """Launch the instance (never pulls). Resolves once it is launched (phase starting)."""
        slot = self._slot(name)
        return self._submit(lambda: self._audited("start", slot, lambda: self._do_start(slot)))

    def stop(self, name: str, timeout: float | None = None) -> Future[InstanceState]:
        """SIGTERM, a countdown (``state.countdown``), SIGKILL after ``timeout`` (default: the
        instance's stopping timeout); resolves when the engine ended (and, with GPUs, released them)."""
        slot = self._slot(name)
        return self._submit(
            lambda: self._audited("stop", slot, lambda: self._do_stop(slot, timeout, reason="", audit_action="stop"))
        )

    def restart(self, name: str) -> Future[InstanceState]:
        slot = self._slot(name)
        return self._submit(lambda: self._audited("restart", slot, lambda: self._do_restart(slot)))

    def remove(self, name: str) -> Future[None]:
        """Remove what a stopped or crashed instance left (its container, its process record)."""
        slot = self._slot(name)
        return self._submit(lambda: self._audited("remove", slot, lambda: self._do_remove(slot)))

    def pull(self, name: str, progress_cb: ProgressCallback | None = None) -> Future[None]:
        """Pull the instance's image explicitly; ``progress_cb(percent, status)`` from a worker thread."""
        slot = self._slot(name)
        return self._submit(lambda: self._audited("pull", slot, lambda: self._do_pull(slot, progress_cb)))

    def adopt(self, name: str, container_id: str | None = None) -> Future[InstanceState]:
        """Take control of a recognised container not started by enginedeck (monitor-only until now)."""
        slot = self._slot(name)
        return self._submit(lambda: self._audited("adopt", slot, lambda: self._do_adopt(slot, container_id)))

    def refresh(self, name: str) -> Future[InstanceState]:
        """Find an engine started earlier (container by label, process record) and watch it."""
        slot = self._slot(name)
        return self._submit(lambda: self._do_refresh(slot))

    def readopt(self, name: str) -> Future[InstanceState]:
        """While an instance shows no running engine, look once for one started outside this
        enginedeck (a headless `up` or `restart`, `docker start`) and watch it. Cheap (a record
        read or one container lookup) and never waits for an action in progress."""
        slot = self._slot(name)
        return self._submit(lambda: self._do_readopt(slot))

    def refresh_all(self) -> dict[str, Future[InstanceState]]:
        """``refresh`` every managed instance (a console does this once at start-up)."""
        return {n: self.refresh(n) for n, s in self._slots.items() if s.inst.config.managed is not None}

    def ps(self) -> Future[PsReport]:
        """Configured instances plus engine containers/processes found on this host."""
        return self._submit(self._do_ps)

    # ================================================================= blocking helpers (headless)
    def wait(self, name: str, until: Collection[Phase] = READY_OR_END, timeout: float | None = None) -> InstanceState:
        """Block until the instance reaches one of ``until`` (or a terminal phase). Not for event loops."""
        slot = self._slot(name)
        deadline = None if timeout is None else self._clock() + timeout
        stop_at = set(until) | set(TERMINAL)
        with self._cond:
            while True:
                with slot.lock:
                    st = slot.machine.state
                if st.phase in stop_at:
                    return st
                left = None if deadline is None else deadline - self._clock()
                if left is not None and left <= 0:
                    raise LifecycleTimeout(f"{name}: still {st.one_line()} after {timeout:.0f} s")
                self._cond.wait(timeout=0.5 if left is None else min(0.5, left))

    def close(self) -> None:
        """Stop watching (supervisors, log followers). Engines keep running, except process
        engines, which end with this enginedeck process (see process_backend)."""
        self._closed.set()
        for slot in self._slots.values():
            slot.log_stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._docker is not None:
            with contextlib.suppress(Exception):
                self._docker.close()

    # ================================================================= internals
    def _slot(self, name: str) -> _Slot:
        try:
            return self._slots[name]
        except KeyError:
            known = ", ".join(self._slots) or "none configured"
            raise UserError(f"no engine named {name!r} (known: {known})") from None

    def _submit(self, fn: Callable[[], T]) -> Future[T]:
        if self._closed.is_set():
            fut: Future[T] = Future()
            fut.set_exception(LifecycleError("the lifecycle manager is closed"))
            return fut
        return self._pool.submit(fn)

    def _publish(self, slot: _Slot) -> None:
        with slot.lock:
            st = slot.machine.state
            if st is slot.published:
                return
            slot.published = st
        with self._cond:
            listeners = list(self._listeners)
            self._cond.notify_all()
        for cb in listeners:
            try:
                cb(st)
            except Exception:  # a broken listener must not break the lifecycle
                pass

    def _client(self) -> Any:
        with self._docker_lock:
            if self._docker is None:
                self._docker = docker_backend.connect()
            return self._docker

    def _drop_client(self) -> None:
        with self._docker_lock:
            self._docker = None

    def _audit(self, action: str, slot: _Slot, result: str, detail: str = "") -> None:
        self._audit_local.n = getattr(self._audit_local, "n", 0) + 1
        secrets = slot.spec.secrets if slot.spec else ()
        self.audit.record(action, slot.inst.name, result, detail, secrets=secrets)

    def _audited(self, action: str, slot: _Slot, fn: Callable[[], T]) -> T:
        """Run a mutating action so that every attempt is audited, failed or not: an error path
        that wrote no entry gets one here, and an exception that is no UserError (a Docker or HTTP
        error) becomes the CLI's one-line message, so the console shows what `enginedeck` prints."""
        before = getattr(self._audit_local, "n", 0)
        try:
            return fn()
        except UserError as exc:
            if getattr(self._audit_local, "n", 0) == before:
                self._audit(action, slot, "refused" if isinstance(exc, ActionRefused) else "failed", exc.message)
            raise
        except Exception as exc:
            err = translate_docker_error(exc, instance=slot.inst.name)
            if getattr(self._audit_local, "n", 0) == before:
                self._audit(action, slot, "failed", err.message)
            raise err from exc

    def _op(self, slot: _Slot, action: str, wait: float = 0.0) -> None:
        if not slot.op.acquire(timeout=wait) if wait > 0 else not slot.op.acquire(blocking=False):
            st = slot.machine.state
            raise ActionRefused(f"{slot.inst.name}: another action is in progress ({st.phase.value}); try again")

    # ----------------------------------------------------------------- attach
    def _attach(self, slot: _Slot) -> None:
        """Look for a running engine of this instance we do not hold yet. Caller holds ``slot.op``."""
        if slot.handle is not None:
            return
        inst = slot.inst
        expected_hash = ""
        with contextlib.suppress(UserError):
            spec = build_launch(inst)
            expected_hash = spec.config_hash
            slot.logs.set_secrets(spec.secrets)
        if inst.config.managed == "process":
            ph = process_backend.attach(inst.name)
            if ph is None:
                return
            slot.handle = ph
            slot.has_gpus = bool(ph.rec.gpus)
            with slot.lock:
                slot.machine.attached(
                    Phase.STARTING,
                    pid=ph.rec.pid,
                    address=ph.rec.address,
                    gpus=ph.rec.gpus,
                    config_hash=ph.rec.config_hash,
                    config_changed=bool(expected_hash) and ph.rec.config_hash != expected_hash,
                    detail=f"running (started by enginedeck pid {ph.rec.owner_pid})",
                )
            self._probe_once(slot)
            self._publish(slot)
            self._supervise(slot)
            return
        if inst.config.managed != "docker":
            return
        client = self._client()
        dh = docker_backend.attach(client, inst.name)
        slot.adopted = False
        if dh is None:
            adopted = _adopted().get(inst.name)
            if adopted:
                with contextlib.suppress(Exception):
                    dh = docker_backend.DockerHandle(client.containers.get(adopted))
                    slot.adopted = True
        if dh is None:
            return
        info = docker_backend.describe(dh.container)
        slot.handle = dh
        slot.has_gpus = bool(info.gpus)
        running = info.status in ("running", "restarting")
        with slot.lock:
            if running:
                slot.machine.attached(
                    Phase.STARTING,
                    container_id=info.id,
                    address=", ".join(info.ports),
                    gpus=info.gpus,
                    config_hash=info.config_hash or "",
                    config_changed=bool(expected_hash and info.config_hash) and info.config_hash != expected_hash,
                    detail="running (found by label)",
                )
            else:
                slot.machine.found_exited(
                    info.exit_code,
                    oom=info.oom_killed,
                    last_lines=tuple(map(slot.logs.scrubber, dh.tail(20))),
                    container_id=info.id,
                    address=", ".join(info.ports),
                )
        if running:
            self._probe_once(slot)
        self._publish(slot)
        if running:
            self._supervise(slot)

    # ----------------------------------------------------------------- start
    def _do_start(self, slot: _Slot) -> InstanceState:
        self._op(slot, "start")
        try:
            return self._start_locked(slot, action="start")
        finally:
            slot.op.release()

    def _start_locked(self, slot: _Slot, action: str) -> InstanceState:
        inst = slot.inst
        if inst.config.managed is None:
            raise ActionRefused(f"{inst.name} is monitor-only (url = {inst.url}); there is nothing to start")
        try:
            spec = build_launch(inst)
        except UserError as exc:
            self._audit(action, slot, "failed", exc.message)
            raise
        slot.spec = spec
        try:
            self._attach(slot)
        except LifecycleError as exc:
            with slot.lock:
                slot.machine.reset(_backend_of(inst))
                slot.machine.failed(exc.message)
            self._publish(slot)
            self._audit(action, slot, "failed", exc.message)
            raise
        if slot.handle is not None and slot.handle.poll() is None:
            st = self.status(inst.name)
            self._audit(action, slot, "ok", f"already running ({slot.handle.ident})")
            return st
        if slot.handle is not None:  # an ended run we attached to: clear it away first
            if not slot.adopted:  # (an adopted container is the user's: never removed)
                with contextlib.suppress(LifecycleError):
                    slot.handle.remove()
            slot.handle = None
        with slot.lock:
            slot.generation += 1
            slot.machine.reset(_backend_of(inst))
            slot.machine.creating(f"creating {'container' if spec.backend == 'docker' else 'process'}")
        self._publish(slot)
        slot.logs.set_secrets(spec.secrets)
        slot.logs.append(f"[enginedeck] starting {inst.name}: {spec.display()}")
        try:
            handle: Handle
            if spec.backend == "docker":
                handle = docker_backend.launch(self._client(), spec)
            else:
                handle = process_backend.launch(spec)
        except LifecycleError as exc:
            if isinstance(exc, DockerUnreachable):
                self._drop_client()
            with slot.lock:
                slot.machine.failed(exc.message)
            self._publish(slot)
            self._audit(action, slot, "failed", exc.message)
            raise
        slot.handle = handle
        slot.has_gpus = spec.has_gpus
        with slot.lock:
            slot.machine.starting(
                container_id=handle.ident if spec.backend == "docker" else None,
                pid=handle.pid,
                address=spec.address,
                gpus=spec.gpus_text,
                config_hash=spec.config_hash,
            )
        self._publish(slot)
        self._audit(action, slot, "ok", f"{handle.ident} on {spec.address}: {spec.display()}")
        self._supervise(slot)
        return self.status(inst.name)

    # ----------------------------------------------------------------- watching
    def _probe_once(self, slot: _Slot) -> None:
        import httpx

        inst = slot.inst
        with httpx.Client(timeout=PROBE_TIMEOUT, trust_env=False) as http:
            result = probe_ready(http, inst.url, inst.profile.health.ready_path, _ready_key(inst.profile, inst.api_key))
        with slot.lock:
            slot.machine.probe(result)

    def _supervise(self, slot: _Slot) -> None:
        handle = slot.handle
        if handle is None:
            return
        gen = slot.generation
        slot.log_stop = threading.Event()

        probe_mark = f"GET {slot.inst.profile.health.ready_path}"

        def on_chunk() -> None:
            last = slot.logs.last_text()
            # The engine's access-log line for our own readiness probe is no sign of progress.
            if probe_mark in last:
                return
            with slot.lock:
                if slot.generation == gen:
                    slot.machine.log_line(last)

        slot.log_thread = threading.Thread(
            target=handle.follow_logs,
            args=(slot.logs, on_chunk, slot.log_stop),
            name=f"enginedeck-logs-{slot.inst.name}",
            daemon=True,
        )
        slot.log_thread.start()
        threading.Thread(
            target=self._supervisor, args=(slot, handle, gen), name=f"enginedeck-watch-{slot.inst.name}", daemon=True
        ).start()

    def _supervisor(self, slot: _Slot, handle: Handle, gen: int) -> None:
        import httpx

        inst = slot.inst
        key = _ready_key(inst.profile, slot.spec.api_key if slot.spec else inst.api_key)
        with httpx.Client(timeout=PROBE_TIMEOUT, trust_env=False) as http:
            while not self._closed.is_set() and slot.generation == gen:
                with slot.lock:
                    stopping = slot.stopping
                if not stopping:
                    try:
                        info = handle.poll()
                    except LifecycleError as exc:
                        with slot.lock:
                            slot.machine.note(warning=f"cannot check the engine: {exc.message}")
                        self._publish(slot)
                        self._closed.wait(2.0)
                        continue
                    if info is not None:
                        self._on_exit(slot, handle, info, gen)
                        return
                    phase = self.status(inst.name).phase
                    if phase in STARTING_PHASES or phase in RUNNING_PHASES:
                        result = probe_ready(http, inst.url, inst.profile.health.ready_path, key)
                        with slot.lock:
                            if slot.generation == gen and not slot.stopping:
                                slot.machine.probe(result)
                    with slot.lock:
                        verdict = slot.machine.tick() if not slot.stopping else Verdict()
                    if verdict.action == "give_up":
                        self._submit(
                            functools.partial(self._do_stop, slot, None, reason=verdict.reason, audit_action="give-up")
                        )
                self._publish(slot)
                self._closed.wait(self._probe_interval(slot))

    def _probe_interval(self, slot: _Slot) -> float:
        """Fast polls right after launch (a llama.cpp 503 window can be 100 ms), slower later."""
        with slot.lock:
            st = slot.machine.state
        if st.phase in (Phase.READY, Phase.DEGRADED, Phase.UNHEALTHY):
            return PROBE_INTERVAL_READY
        started = next((t for p, t in reversed(st.history) if p is Phase.STARTING), st.since)
        age = self._clock() - started
        if age < 2.0:
            return 0.05
        if age < 10.0:
            return 0.2
        return PROBE_INTERVAL_STARTING

    def _last_lines(self, slot: _Slot, handle: Handle) -> tuple[str, ...]:
        if slot.log_thread is not None:
            slot.log_thread.join(timeout=3.0)
        lines = tuple(
            ln.text for ln in slot.logs.tail(40) if ln.text.strip() and not ln.text.startswith("[enginedeck]")
        )
        return lines[-20:] if lines else tuple(map(slot.logs.scrubber, handle.tail(20)))

    def _on_exit(self, slot: _Slot, handle: Handle, info: ExitInfo, gen: int) -> None:
        """The engine ended on its own (not through stop). A requested exit nobody here asked for
        (SIGTERM, exit 0, a removed container) after it was ready is first watched for a restart
        from outside: one found is watched again, not reported as a crash or audited as an exit."""
        with slot.lock:
            if slot.generation != gen or slot.stopping:
                return
            watch = slot.machine.state.saw(Phase.READY) and ending_of(info.code, info.oom_killed) != "crashed"
            if watch:
                slot.machine.ended_outside(info.code)
        if watch:
            self._publish(slot)
            if self._await_replacement(slot, handle, gen):
                return
        with slot.op:
            with slot.lock:
                if slot.generation != gen or slot.stopping:
                    return
            lines = self._last_lines(slot, handle)
            with slot.lock:
                slot.machine.exited(info.code, oom=info.oom_killed, last_lines=lines)
                st = slot.machine.state
            # A failed start leaves nothing behind; a crash after ready keeps the container for
            # inspection (`enginedeck logs`, `docker inspect`) until `down`/`remove`.
            if st.phase is Phase.FAILED or not isinstance(handle, docker_backend.DockerHandle):
                with contextlib.suppress(LifecycleError):
                    handle.remove()
                slot.handle = None
            self._publish(slot)
            self._audit("exit", slot, "failed" if st.phase is Phase.FAILED else "exited", st.detail)

    def _await_replacement(self, slot: _Slot, old: Handle, gen: int) -> bool:
        """Watch up to OUTSIDE_RESTART_GRACE for the engine started again outside this enginedeck;
        True when it was found (and is watched now) or something here took over."""
        deadline = time.monotonic() + OUTSIDE_RESTART_GRACE
        while not self._closed.is_set():
            with slot.lock:
                if slot.generation != gen:
                    return True  # a start or stop from here took over
            found = self._find_replacement(slot, old)
            if found is not None:
                return self._reattach(slot, found, gen, "restarted outside this console; watching it again")
            if time.monotonic() >= deadline:
                return False
            self._closed.wait(0.25)
        return True

    def _find_replacement(self, slot: _Slot, old: Handle | None) -> Handle | None:
        """A running engine of this instance other than ``old``'s ended run: a newer process
        record, the same container running again (`docker restart`) or a newer labelled one."""
        inst = slot.inst
        try:
            if inst.config.managed == "process":
                rec = process_backend.read_record(inst.name)
                if rec is None or not rec.alive() or (old is not None and old.pid == rec.pid):
                    return None
                return process_backend.ForeignProcessHandle(rec)
            if inst.config.managed == "docker":
                if isinstance(old, docker_backend.DockerHandle) and old.poll() is None:
                    return old
                if slot.adopted:
                    return None  # an adopted container is only ever that container
                dh = docker_backend.attach(self._client(), inst.name)
                if dh is not None and dh.poll() is None:
                    return dh
        except Exception:  # Docker gone, a record half written: nothing found this time
            return None
        return None

    def _reattach(self, slot: _Slot, handle: Handle, gen: int, detail: str, *, wait: bool = True) -> bool:
        """Watch ``handle``, an engine of this instance started outside this enginedeck."""
        if not slot.op.acquire(blocking=wait):
            return False
        try:
            with slot.lock:
                if slot.generation != gen:
                    return True
            old = slot.handle
            if old is not None and old is not handle and isinstance(old, process_backend.ProcessHandle):
                with contextlib.suppress(LifecycleError):
                    old.remove()  # reap what is left of our ended child; its record only, not the new one
            slot.handle = handle
            address, container_id, gpus = "", None, ""
            if isinstance(handle, docker_backend.DockerHandle):
                info = docker_backend.describe(handle.container)
                address, container_id, gpus = ", ".join(info.ports), info.id, info.gpus
            elif isinstance(handle, process_backend.ForeignProcessHandle):
                address, gpus = handle.rec.address, handle.rec.gpus
            slot.has_gpus = bool(gpus)
            with slot.lock:
                slot.generation += 1
                slot.machine.reset(_backend_of(slot.inst))
                slot.machine.attached(Phase.STARTING, pid=handle.pid, container_id=container_id, address=address,
                                      gpus=gpus, detail=detail)
            self._publish(slot)
            self._probe_once(slot)
            self._publish(slot)
            self._supervise(slot)
            return True
        finally:
            slot.op.release()

    def _do_readopt(self, slot: _Slot) -> InstanceState:
        with slot.lock:
            st, gen, stopping = slot.machine.state, slot.generation, slot.stopping
        if slot.inst.config.managed is None or st.monitor_only or stopping:
            return st
        if st.phase not in (Phase.UNKNOWN, Phase.EXITED, Phase.FAILED):
            return st
        found = self._find_replacement(slot, slot.handle)
        if found is not None:
            self._reattach(slot, found, gen, "started outside this console; watching it", wait=False)
        return self.status(slot.inst.name)

    # ----------------------------------------------------------------- stop
    def _do_stop(self, slot: _Slot, timeout: float | None, *, reason: str, audit_action: str) -> InstanceState:
        self._op(slot, audit_action, wait=30.0)
        try:
            return self._stop_locked(slot, timeout, reason=reason, audit_action=audit_action)
        finally:
            slot.op.release()

    def _stop_locked(self, slot: _Slot, timeout: float | None, *, reason: str, audit_action: str) -> InstanceState:
        inst = slot.inst
        if inst.config.managed is None:
            raise ActionRefused(f"{inst.name} is monitor-only (url = {inst.url}); enginedeck cannot stop it")
        try:
            self._attach(slot)
        except LifecycleError as exc:
            self._audit(audit_action, slot, "failed", exc.message)
            raise
        handle = slot.handle
        if handle is None and inst.config.managed == "docker":
            foreign = _find_monitor_only(self._client(), inst)
            if foreign is not None:
                msg = f"{inst.name}: container {foreign} was not started by enginedeck; adopt it first to control it"
                self._audit(audit_action, slot, "refused", msg)
                raise ActionRefused(msg)
        if handle is None or handle.poll() is not None:
            if handle is not None and not slot.adopted:  # a crashed container: clean it away
                with contextlib.suppress(LifecycleError):
                    handle.remove()
                slot.handle = None
            st = self.status(inst.name)
            self._audit(audit_action, slot, "ok", "not running")
            return st
        limit = inst.config.timeouts.stopping if timeout is None else timeout
        if slot.has_gpus:
            slot.gpu_pids = handle.host_pids()
        with slot.lock:
            slot.stopping = True
            slot.machine.stop_requested(limit, reason)
        self._publish(slot)
        try:
            info = self._terminate(slot, handle, limit)
            note = self._await_gpu_release(slot) if slot.has_gpus else ""
            lines = self._last_lines(slot, handle)
            with slot.lock:
                slot.machine.exited(info.code, oom=info.oom_killed, last_lines=lines, note=note)
            try:
                if not slot.adopted:
                    handle.remove()
            except LifecycleError as exc:
                with slot.lock:
                    slot.machine.note(warning=f"could not remove the stopped container: {exc.message}")
            slot.handle = None
        except LifecycleError as exc:
            with slot.lock:
                slot.machine.note(warning=f"stop failed: {exc.message}")
            self._publish(slot)
            self._audit(audit_action, slot, "failed", exc.message)
            raise
        finally:
            with slot.lock:
                slot.stopping = False
                slot.generation += 1  # the old supervisor ends
        self._publish(slot)
        st = self.status(inst.name)
        self._audit(audit_action, slot, "ok" if not reason else "gave up", st.detail)
        return st

    def _terminate(self, slot: _Slot, handle: Handle, limit: float) -> ExitInfo:
        handle.terminate()
        deadline = self._clock() + limit
        while True:
            info = handle.poll()
            if info is not None:
                return info
            left = deadline - self._clock()
            if left <= 0:
                break
            with slot.lock:
                slot.machine.countdown(left)
            self._publish(slot)
            time.sleep(min(0.2, left))
        with slot.lock:
            slot.machine.killing()
        self._publish(slot)
        handle.kill()
        end = self._clock() + 15.0
        while self._clock() < end:
            info = handle.poll()
            if info is not None:
                return info
            time.sleep(0.1)
        raise LifecycleError(f"{slot.inst.name} did not exit 15 s after SIGKILL ({handle.ident})")

    def _await_gpu_release(self, slot: _Slot) -> str:
        pids = slot.gpu_pids
        limit = slot.inst.config.timeouts.gpu_release
        with slot.lock:
            slot.machine.waiting_for_gpu("exited; waiting until NVML shows its GPU memory released")
        self._publish(slot)
        deadline = self._clock() + limit
        while True:
            try:
                held = gpu_pids() & pids if pids else set()
            except NvmlUnavailable as exc:
                return f"GPU release not verified ({exc})"
            if not pids:
                return "GPU release not verified (the engine's process ids were unknown)"
            if not held:
                return "GPU memory released"
            if self._clock() >= deadline:
                return f"GPU memory still held by {_pids_text(held)} after {limit:.0f} s"
            time.sleep(0.5)

    # ----------------------------------------------------------------- restart, remove
    def _do_restart(self, slot: _Slot) -> InstanceState:
        self._op(slot, "restart", wait=30.0)
        try:
            if slot.inst.config.managed is None:
                raise ActionRefused(f"{slot.inst.name} is monitor-only; enginedeck cannot restart it")
            self._attach(slot)
            if slot.handle is not None and slot.handle.poll() is None:
                self._stop_locked(slot, None, reason="", audit_action="restart-stop")
                with slot.lock:
                    ended = slot.machine.state
                if ended.phase is Phase.FAILED:
                    raise LifecycleError(f"{slot.inst.name}: restart: the stop failed: {ended.detail}")
            return self._start_locked(slot, action="restart")
        finally:
            slot.op.release()

    def _do_remove(self, slot: _Slot) -> None:
        self._op(slot, "remove", wait=30.0)
        try:
            inst = slot.inst
            if inst.config.managed == "docker":
                client = self._client()
                found = docker_backend.find_managed(client, inst.name)
                running = [c for c in found if c.status in ("running", "restarting", "paused")]
                if running:
                    raise LifecycleError(f"{inst.name} is running ({running[0].short_id}); stop it first", 1)
                n = docker_backend.remove_by_label(client, inst.name)
                slot.handle = None
                self._audit("remove", slot, "ok", f"removed {n} container(s)")
            elif inst.config.managed == "process":
                rec = process_backend.read_record(inst.name)
                if rec is not None and rec.alive():
                    raise LifecycleError(f"{inst.name} is running (pid {rec.pid}); stop it first", 1)
                process_backend.drop_record(inst.name)
                self._audit("remove", slot, "ok", "process record removed" if rec else "nothing to remove")
            else:
                raise ActionRefused(f"{inst.name} is monitor-only; there is nothing to remove")
        except LifecycleError as exc:
            if not isinstance(exc, ActionRefused):  # (refusals are audited as such by _audited)
                self._audit("remove", slot, "failed", exc.message)
            raise
        finally:
            slot.op.release()

    # ----------------------------------------------------------------- pull
    def _do_pull(self, slot: _Slot, cb: ProgressCallback | None) -> None:
        self._op(slot, "pull")
        inst = slot.inst
        try:
            if inst.config.managed != "docker":
                raise LifecycleError(
                    f'{inst.name} does not run in a container (managed = "docker"); nothing to pull', 1
                )
            image = inst.config.image or f"{inst.profile.container.image}:{inst.profile.container.tag}"
            client = self._client()
            before = self.status(inst.name)
            last = [0.0]

            def progress(pct: float, status: str) -> None:
                now = self._clock()
                if pct >= 100.0 or now - last[0] >= 0.2:
                    last[0] = now
                    with slot.lock:
                        slot.machine.pulling(pct, f"pulling {image}: {status}")
                    self._publish(slot)
                if cb is not None:
                    cb(pct, status)

            try:
                docker_backend.pull(client, image, progress)
            except LifecycleError as exc:
                with slot.lock:
                    slot.machine.failed(exc.message)
                self._publish(slot)
                self._audit("pull", slot, "failed", exc.message)
                raise
            with slot.lock:
                slot.machine.reset()
                slot.machine.note(detail=f"image {image} pulled")
                if before.phase in RUNNING_PHASES:
                    slot.machine.note(warning="pulled while running: restart to use the new image")
            self._publish(slot)
            self._audit("pull", slot, "ok", image)
        finally:
            slot.op.release()

    # ----------------------------------------------------------------- adopt, refresh
    def _do_adopt(self, slot: _Slot, container_id: str | None) -> InstanceState:
        import docker.errors

        self._op(slot, "adopt")
        inst = slot.inst
        try:
            if inst.config.managed != "docker":
                raise LifecycleError(f'{inst.name}: only containers can be adopted (set managed = "docker")', 1)
            client = self._client()
            if container_id is None:
                container_id = _find_monitor_only(client, inst)
                if container_id is None:
                    raise LifecycleError(
                        f"{inst.name}: no running container of {inst.profile.name} publishes {inst.url}", 1
                    )
            try:
                container = client.containers.get(container_id)
            except docker.errors.NotFound:
                raise LifecycleError(f"no container {container_id!r}", 1) from None
            _save_adopted(inst.name, str(container.id))
            slot.handle = None
            self._attach(slot)
            self._audit("adopt", slot, "ok", f"container {container.short_id} ({container.name})")
            return self.status(inst.name)
        except LifecycleError as exc:
            self._audit("adopt", slot, "failed", exc.message)
            raise
        finally:
            slot.op.release()

    def _do_refresh(self, slot: _Slot) -> InstanceState:
        self._op(slot, "refresh", wait=30.0)
        try:
            if slot.inst.config.managed == "docker" and slot.handle is None:
                client = self._client()
                if docker_backend.attach(client, slot.inst.name) is None and slot.inst.name not in _adopted():
                    cid = _find_monitor_only(client, slot.inst)
                    if cid is not None:
                        with slot.lock:
                            slot.machine.attached(
                                Phase.UNKNOWN,
                                container_id=cid[:12],
                                address=slot.inst.url,
                                monitor_only=True,
                                detail="a container not started by enginedeck serves this port: adopt it to control it",
                            )
                        self._publish(slot)
                        return self.status(slot.inst.name)
            self._attach(slot)
            return self.status(slot.inst.name)
        finally:
            slot.op.release()

    # ----------------------------------------------------------------- ps
    def _do_ps(self) -> PsReport:
        rows: list[PsRow] = []
        docker_error: str | None = None
        containers: list[tuple[docker_backend.ContainerInfo, str | None]] = []
        # Docker is asked even without docker instances: `ps` also lists engines it recognises.
        images: dict[str, str] = {}
        for slot_ in self._slots.values():
            prof_ = slot_.inst.profile
            if slot_.inst.config.image:
                images.setdefault(docker_backend.image_repo(slot_.inst.config.image), prof_.name)
            images.setdefault(prof_.container.image, prof_.name)
        from console.profiles import load_profiles

        profiles: dict[str, EngineProfile] = {s.inst.profile.name: s.inst.profile for s in self._slots.values()}
        with contextlib.suppress(UserError):
            for prof in load_profiles().values():
                images.setdefault(prof.container.image, prof.name)
                profiles.setdefault(prof.name, prof)
        try:
            containers = docker_backend.list_containers(self._client(), images)
        except LifecycleError as exc:
            docker_error = exc.message
            self._drop_client()
        by_instance = {c.instance: c for c, _ in containers if c.managed and c.instance}
        seen_ids: set[str] = set()
        adopted = {v[:12]: k for k, v in _adopted().items()}
        for name, slot in self._slots.items():
            inst = slot.inst
            st = self.status(name)
            if inst.config.managed == "docker":
                c = by_instance.get(name)
                if c is None:
                    cid = next((i for i, n in adopted.items() if n == name), None)
                    c = next((ci for ci, _ in containers if ci.id == cid), None) if cid else None
                if c is not None:
                    seen_ids.add(c.id)
                    rows.append(self._container_row(name, c, st, inst.profile.name, managed=True))
                else:
                    rows.append(
                        PsRow(
                            name,
                            "docker",
                            st.phase.value
                            if st.phase is not Phase.UNKNOWN
                            else ("unknown" if docker_error else "not running"),
                            True,
                            False,
                            profile=inst.profile.name,
                            image=inst.config.image or f"{inst.profile.container.image}:{inst.profile.container.tag}",
                            detail=docker_error or st.detail,
                        )
                    )
            elif inst.config.managed == "process":
                rec = process_backend.read_record(name)
                alive = rec is not None and rec.alive()
                phase = st.phase.value
                if alive and st.phase in (Phase.UNKNOWN, Phase.EXITED, Phase.FAILED):
                    phase = _quick_phase(inst)
                elif not alive and st.phase in (Phase.UNKNOWN,):
                    phase = "not running"
                rows.append(
                    PsRow(
                        name,
                        "process",
                        phase,
                        True,
                        False,
                        ident=f"pid {rec.pid}" if rec and alive else "",
                        address=rec.address if rec and alive else f"{inst.config.bind}:{inst.config.port or ''}",
                        gpus=rec.gpus if rec else "",
                        image=" ".join(rec.command) if rec else "",
                        profile=inst.profile.name,
                        detail=st.detail,
                    )
                )
            else:
                rows.append(
                    PsRow(name, "url", st.phase.value, False, True, address=inst.url, profile=inst.profile.name)
                )
        for c, profile in containers:
            if c.id in seen_ids:
                continue
            if c.managed:
                rows.append(
                    self._container_row(
                        c.instance or c.name, c, None, profile or "", managed=True, note="not in this configuration"
                    )
                )
            else:
                rows.append(
                    self._container_row(
                        c.name,
                        c,
                        None,
                        profile or "",
                        managed=False,
                        note="monitor-only: not started by enginedeck (adopt to control)",
                    )
                )
        configured = set(self._slots)
        for rec in process_backend.all_records():
            if rec.name in configured or not rec.alive():
                continue
            rows.append(
                PsRow(
                    rec.name,
                    "process",
                    "running",
                    True,
                    False,
                    ident=f"pid {rec.pid}",
                    address=rec.address,
                    gpus=rec.gpus,
                    image=" ".join(rec.command),
                    profile=rec.profile,
                    detail="not in this configuration",
                )
            )
        for fp in process_backend.find_engine_processes(profiles):
            url = _url_from_ports(tuple(f"{a}->" for a in fp.listen))
            rows.append(
                PsRow(
                    f"pid {fp.pid}",
                    "process",
                    _quick_phase_url(url, fp.profile, self._key_for(None, url)) if url else "running",
                    False,
                    True,
                    ident=f"pid {fp.pid}",
                    address=", ".join(fp.listen),
                    image=" ".join(fp.command),
                    profile=fp.profile,
                    detail="monitor-only: not started by enginedeck",
                )
            )
        # Commands of processes found on the host may carry a configured engine's secret.
        hide = Scrubber(s for slot in self._slots.values() for s in slot.logs.scrubber.known)
        rows = [replace(r, image=hide(r.image), detail=hide(r.detail)) for r in rows]
        return PsReport(tuple(rows), docker_error)

    def _key_for(self, name: str | None, url: str | None) -> str | None:
        """The API key of the configured engine ``name``, or of the one that answers at ``url``:
        a keyed engine found on the host is probed with its key, not reported as 401."""
        for slot in self._slots.values():
            inst = slot.inst
            if inst.name == name or (url and _same_address(inst.url, url)):
                return inst.api_key
        return None

    def _container_row(
        self,
        name: str,
        c: docker_backend.ContainerInfo,
        st: InstanceState | None,
        profile: str,
        *,
        managed: bool,
        note: str = "",
    ) -> PsRow:
        if c.status == "running":
            if st is not None and st.phase in RUNNING_PHASES | {Phase.STOPPING}:
                phase = st.phase.value
            else:
                url = _url_from_ports(c.ports)
                phase = _quick_phase_url(url, profile, self._key_for(name, url)) if url else "running"
        elif c.status == "exited":
            phase = f"exited ({c.exit_code}{', OOMKilled' if c.oom_killed else ''})"
        else:
            phase = c.status
        changed = False
        if managed and st is not None and c.config_hash:
            with contextlib.suppress(UserError, KeyError):
                changed = build_launch(self._slot(name).inst).config_hash != c.config_hash
        return PsRow(
            name,
            "docker",
            phase,
            managed,
            not managed,
            ident=c.id,
            address=", ".join(c.ports),
            gpus=c.gpus,
            image=c.image,
            profile=profile,
            detail=note or (st.detail if st else ""),
            config_changed=changed,
        )


# ===================================================================== module helpers
def _pids_text(pids: Collection[int]) -> str:
    ids = ", ".join(map(str, sorted(pids)))
    return f"pid {ids}" if len(pids) == 1 else f"pids {ids}"


def _url_from_ports(ports: tuple[str, ...]) -> str | None:
    for p in ports:
        hostpart = p.split("->", 1)[0]
        host, _, port = hostpart.rpartition(":")
        if port:
            if host in ("", "0.0.0.0", "::"):
                host = "127.0.0.1"
            return f"http://{host}:{port}"
    return None


def _ready_key(profile: EngineProfile, key: str | None) -> str | None:
    """The key for the readiness probe only where the profile says the engine checks it there."""
    return key if key and profile.path_needs_key(profile.health.ready_path) else None


def _same_address(a: str, b: str) -> bool:
    """Whether two base URLs reach the same listener (localhost, 127.0.0.1 and 0.0.0.0 are one)."""
    from urllib.parse import urlsplit

    def key(url: str) -> tuple[str, int | None]:
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            port = parts.port
        except ValueError:
            port = None
        return ("127.0.0.1" if host in ("localhost", "0.0.0.0", "::", "::1") else host), port

    return key(a) == key(b)


def _quick_phase_url(url: str, profile_name: str, key: str | None = None) -> str:
    from console.profiles import get_profile

    try:
        prof = get_profile(profile_name)
    except UserError:
        return "running"
    return _probe_phase(url, prof.health.ready_path, prof.health.loading, _ready_key(prof, key))


def _quick_phase(inst: EngineInstance) -> str:
    prof = inst.profile
    return _probe_phase(inst.url, prof.health.ready_path, prof.health.loading, _ready_key(prof, inst.api_key))


def _probe_phase(url: str, ready_path: str, loading: tuple[str, ...], key: str | None) -> str:
    import httpx

    with httpx.Client(timeout=1.0, trust_env=False) as http:
        r = probe_ready(http, url, ready_path, key)
    if r.ready:
        return Phase.READY.value
    if r.kind == "http" and r.status in (401, 403):
        return f"answering ({r.status}: API key needed)"
    if r.kind == "refused" and "refused" not in loading:
        return Phase.STARTING.value
    if r.kind == "refused" or (r.kind == "http" and r.status in (200, 503)):
        return Phase.LOADING.value
    return Phase.UNHEALTHY.value


def _adopted_path() -> Any:
    from console.paths import state_dir

    return state_dir() / "adopted.json"


def _adopted() -> dict[str, str]:
    try:
        data = json.loads(_adopted_path().read_text())
        return {str(k): str(v) for k, v in data.items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _save_adopted(name: str, container_id: str) -> None:
    data = _adopted()
    data[name] = container_id
    path = _adopted_path()
    private_dir(path.parent)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(data))
    tmp.replace(path)


def _find_monitor_only(client: Any, inst: EngineInstance) -> str | None:
    """A running, non-enginedeck container of this profile's image publishing the instance's port."""
    port = str(inst.config.port or inst.profile.container.port)
    repo = docker_backend.image_repo(inst.config.image or inst.profile.container.image)
    for c, _ in docker_backend.list_containers(client, {repo: inst.profile.name}):
        if c.managed:
            continue
        if any(p.split("->", 1)[0].rsplit(":", 1)[-1] == port for p in c.ports):
            return c.id
    return None


def state_with(st: InstanceState, **changes: Any) -> InstanceState:
    """A copy of ``st`` with changes (for UI code that annotates states)."""
    return replace(st, **changes)
