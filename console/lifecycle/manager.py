"""LifecycleManager: start, watch, stop, restart, remove, pull and adopt engine instances.

The public API never blocks its caller on Docker, processes or HTTP: every action returns a
``concurrent.futures.Future`` and runs in a worker thread; ``status``/``logs`` read in-memory
state only. A UI subscribes (``subscribe``) and gets each new ``InstanceState`` in a worker
thread (hop to the UI loop with ``app.call_from_thread``). Headless commands block on the
futures or on ``wait`` (never call ``wait`` from an event loop).

The actions are here; the rest is by job: ``backend`` (the ``EngineBackend`` protocol, with
``docker_backend.DockerEngines`` and ``process_backend.ProcessEngines``: launch, find, list),
``watch`` (per running instance a supervisor thread - readiness probe, exit watch, phase timeouts -
and a log follower), ``stopping`` (SIGTERM, countdown, SIGKILL, GPU release), ``inventory`` (`ps`),
``adoption`` (the adopted-containers store) and ``slot`` (one instance's state and locks).
Mutating actions on one instance are serialised; a second one while the first runs is refused at
once (``ActionRefused``). Every mutating action is appended to the audit log, successful or not.

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
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from console.config import Config, EngineInstance
from console.errors import UserError
from console.lifecycle import adoption
from console.lifecycle.audit import AuditLog
from console.lifecycle.backend import NOT_ADOPTABLE, EngineBackend, ExitInfo, Found
from console.lifecycle.docker_backend import DockerEngines
from console.lifecycle.errors import ActionRefused, LifecycleError, LifecycleTimeout, translate_docker_error
from console.lifecycle.inventory import PsReport, PsRow, take_inventory
from console.lifecycle.launch import LaunchSpec, build_launch
from console.lifecycle.logs import LogBuffer
from console.lifecycle.phases import PhaseMachine
from console.lifecycle.process_backend import ProcessEngines
from console.lifecycle.slot import Slot
from console.lifecycle.state import RUNNING_PHASES, TERMINAL, Backend, InstanceState
from console.lifecycle.stopping import await_gpu_release, terminate
from console.lifecycle.watch import Watcher
from console.listeners import add_listener
from console.model import Phase
from console.secrets import instance_secrets

__all__ = ["LifecycleManager", "PsReport", "PsRow"]

T = TypeVar("T")
StateListener = Callable[[InstanceState], None]
ProgressCallback = Callable[[float, str], None]

READY_OR_END = frozenset({Phase.READY, Phase.EXITED, Phase.FAILED})


def _backend_of(inst: EngineInstance) -> Backend:
    return Backend(inst.config.managed) if inst.config.managed else Backend.NONE


class LifecycleManager:
    def __init__(
        self,
        config: Config,
        *,
        audit: AuditLog | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_workers: int = 8,
        log_capacity: int = 10_000,
        backends: Mapping[Backend, EngineBackend] | None = None,
        read_only: str | None = None,
    ) -> None:
        """``read_only``: why nothing may be started, stopped or changed ("--read-only"); by default
        ``[console] read_only`` of ``config``. This is the one gate every path that changes an engine
        passes (the console, the headless commands, the bench's swaps, the terminal-loss policy)."""
        self.config = config
        if read_only is None and config.console.read_only:
            read_only = f"[console] read_only = true in {config.path or 'the configuration'}"
        self.read_only = read_only or ""
        self.audit = audit if audit is not None else AuditLog()
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="enginedeck-lifecycle")
        self._listeners: list[StateListener] = []
        self._cond = threading.Condition()
        self._closed = threading.Event()
        self._audit_local = threading.local()  # entries written by this thread's current action
        self._backends: Mapping[Backend, EngineBackend] = (
            backends if backends is not None else {Backend.DOCKER: DockerEngines(), Backend.PROCESS: ProcessEngines()}
        )
        self._slots: dict[str, Slot] = {}
        for inst in config.instances:
            kind = _backend_of(inst)
            machine = PhaseMachine(
                inst.name,
                timeouts=inst.config.timeouts,
                loading=inst.profile.health.loading,
                backend=kind,
                clock=clock,
            )
            logs = LogBuffer(log_capacity)
            logs.set_secrets(instance_secrets(inst))
            self._slots[inst.name] = Slot(inst, machine, logs, self._backends.get(kind))
        self._watch = Watcher(
            publish=self._publish,
            audit=self._audit,
            give_up=self._give_up,
            closed=self._closed,
            clock=clock,
        )

    # ================================================================= reading (non-blocking)
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._slots)

    def status(self, name: str) -> InstanceState:
        return self._slot(name).state

    def logs(self, name: str) -> LogBuffer:
        return self._slot(name).logs

    def launch_spec(self, name: str) -> LaunchSpec:
        """The launch an instance would get now (for display: use ``LaunchSpec.display()``)."""
        return build_launch(self._slot(name).inst)

    def subscribe(self, listener: StateListener) -> Callable[[], None]:
        """Call ``listener(state)`` on every state change of any instance (in a worker thread)."""
        return add_listener(self._listeners, self._cond, listener)

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
        return {n: self.refresh(n) for n, s in self._slots.items() if s.backend is not None}

    def ps(self) -> Future[PsReport]:
        """Configured instances plus engine containers/processes found on this host."""
        return self._submit(self._do_ps)

    # ================================================================= blocking helpers (headless)
    def wait(self, name: str, until: Collection[Phase] = READY_OR_END, timeout: float | None = None) -> InstanceState:
        """Block until the instance reaches one of ``until`` (or a terminal phase). Not for event loops.
        Reads the published state: an ending is seen once what it leaves behind is cleaned up."""
        slot = self._slot(name)
        deadline = None if timeout is None else self._clock() + timeout
        stop_at = set(until) | set(TERMINAL)
        with self._cond:
            while True:
                with slot.lock:
                    st = slot.published or slot.machine.state
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
        for backend in self._backends.values():
            with contextlib.suppress(Exception):
                backend.close()

    # ================================================================= internals
    def _slot(self, name: str) -> Slot:
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

    def _publish(self, slot: Slot) -> None:
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

    def _audit(self, action: str, slot: Slot, result: str, detail: str = "") -> None:
        self._audit_local.n = getattr(self._audit_local, "n", 0) + 1
        secrets = slot.spec.secrets if slot.spec else ()
        self.audit.record(action, slot.inst.name, result, detail, secrets=secrets)

    def _audited(self, action: str, slot: Slot, fn: Callable[[], T]) -> T:
        """Run a mutating action so that every attempt is audited, failed or not: an error path
        that wrote no entry gets one here, and an exception that is no UserError (a Docker or HTTP
        error) becomes the CLI's one-line message, so the console shows what `enginedeck` prints."""
        before = getattr(self._audit_local, "n", 0)
        self._refuse_if_read_only(action, slot)
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

    def ending_with_console(self, name: str, timeout: float) -> None:
        """``name``'s process is about to be ended by this console itself (its own process group,
        at a lost terminal): marked stopping first, so its exit reads as the stop it is, not as a
        failed start ("exited during loading")."""
        slot = self._slot(name)
        with slot.lock:
            if slot.machine.phase not in (Phase.EXITED, Phase.FAILED):
                slot.machine.stop_requested(timeout)  # the watcher sees the exit, as a stop
        self._publish(slot)

    def check_writable(self, action: str, name: str) -> None:
        """Raise ``ActionRefused`` (audited) when ``action`` on ``name`` may not run: read-only mode.
        For callers that must know before they begin (the bench's swaps)."""
        self._refuse_if_read_only(action, self._slot(name))

    def _refuse_if_read_only(self, action: str, slot: Slot) -> None:
        if self.read_only:
            self._audit(action, slot, "refused", f"read-only mode ({self.read_only})")
            raise ActionRefused(f"{action} {slot.inst.name}: refused in read-only mode ({self.read_only})")

    def _give_up(self, slot: Slot, reason: str) -> None:
        """A start that made no progress: stop it (the supervisor's verdict), audited as give-up.
        In read-only mode nothing is stopped: the verdict is audited as refused."""
        if self.read_only:
            self._audit("give-up", slot, "refused", f"{reason}; read-only mode ({self.read_only})")
            return
        self._submit(functools.partial(self._do_stop, slot, None, reason=reason, audit_action="give-up"))

    # ----------------------------------------------------------------- attach
    def _attach(self, slot: Slot) -> None:
        """Look for a running engine of this instance we do not hold yet. Caller holds ``slot.op``."""
        if slot.handle is not None or slot.backend is None:
            return
        inst = slot.inst
        expected_hash = ""
        with contextlib.suppress(UserError):
            spec = build_launch(inst)
            expected_hash = spec.config_hash
            slot.logs.set_secrets(spec.secrets)
        found = slot.backend.attach(inst)
        slot.adopted = found is not None and found.adopted
        if found is None:
            return
        slot.handle = handle = found.handle
        slot.has_gpus = bool(found.gpus)
        with slot.lock:
            if found.running:
                slot.machine.attached(
                    Phase.STARTING,
                    container_id=handle.container_id,
                    pid=handle.pid,
                    address=found.address,
                    gpus=found.gpus,
                    config_hash=found.config_hash,
                    config_changed=bool(expected_hash and found.config_hash) and found.config_hash != expected_hash,
                    detail=found.detail,
                )
            else:
                ended = found.exit or ExitInfo(None)
                slot.machine.found_exited(
                    ended.code,
                    oom=ended.oom_killed,
                    last_lines=tuple(map(slot.logs.scrubber, handle.tail(20))),
                    container_id=handle.container_id,
                    address=found.address,
                )
        if found.running:
            self._watch.probe_once(slot)
        self._publish(slot)
        if found.running:
            self._watch.supervise(slot)

    # ----------------------------------------------------------------- start
    def _do_start(self, slot: Slot) -> InstanceState:
        slot.begin()
        try:
            return self._start_locked(slot, action="start")
        finally:
            slot.op.release()

    def _start_locked(self, slot: Slot, action: str) -> InstanceState:
        inst, backend = slot.inst, slot.backend
        if backend is None:
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
                slot.machine.reset(backend.kind)
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
            slot.machine.reset(backend.kind)
            slot.machine.creating(f"creating {backend.noun}")
        self._publish(slot)
        slot.logs.set_secrets(spec.secrets)
        slot.logs.append(f"[enginedeck] starting {inst.name}: {spec.display()}")
        try:
            handle = backend.launch(spec)
        except LifecycleError as exc:
            with slot.lock:
                slot.machine.failed(exc.message)
            self._publish(slot)
            self._audit(action, slot, "failed", exc.message)
            raise
        slot.handle = handle
        slot.has_gpus = spec.has_gpus
        with slot.lock:
            slot.machine.starting(
                container_id=handle.container_id,
                pid=handle.pid,
                address=spec.address,
                gpus=spec.gpus_text,
                config_hash=spec.config_hash,
            )
        self._publish(slot)
        self._audit(action, slot, "ok", f"{handle.ident} on {spec.address}: {spec.display()}")
        started = self.status(inst.name)  # as launched: the watcher's first probe may change it at once
        self._watch.supervise(slot)
        return started

    # ----------------------------------------------------------------- stop
    def _do_stop(self, slot: Slot, timeout: float | None, *, reason: str, audit_action: str) -> InstanceState:
        slot.begin(wait=30.0)
        try:
            return self._stop_locked(slot, timeout, reason=reason, audit_action=audit_action)
        finally:
            slot.op.release()

    def _stop_locked(self, slot: Slot, timeout: float | None, *, reason: str, audit_action: str) -> InstanceState:
        inst, backend = slot.inst, slot.backend
        if backend is None:
            raise ActionRefused(f"{inst.name} is monitor-only (url = {inst.url}); enginedeck cannot stop it")
        try:
            self._attach(slot)
        except LifecycleError as exc:
            self._audit(audit_action, slot, "failed", exc.message)
            raise
        handle = slot.handle
        if handle is None:
            foreign = backend.foreign(inst)
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
            info = terminate(slot, handle, limit, self._publish, self._clock)
            note = await_gpu_release(slot, self._publish, self._clock) if slot.has_gpus else ""
            lines = self._watch.last_lines(slot, handle)
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

    # ----------------------------------------------------------------- restart, remove
    def _do_restart(self, slot: Slot) -> InstanceState:
        slot.begin(wait=30.0)
        try:
            if slot.backend is None:
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

    def _do_remove(self, slot: Slot) -> None:
        slot.begin(wait=30.0)
        try:
            if slot.backend is None:
                raise ActionRefused(f"{slot.inst.name} is monitor-only; there is nothing to remove")
            removed = slot.backend.remove_leftovers(slot.inst)
            slot.handle = None
            self._audit("remove", slot, "ok", removed)
        except LifecycleError as exc:
            if not isinstance(exc, ActionRefused):  # (refusals are audited as such by _audited)
                self._audit("remove", slot, "failed", exc.message)
            raise
        finally:
            slot.op.release()

    # ----------------------------------------------------------------- pull
    def _do_pull(self, slot: Slot, cb: ProgressCallback | None) -> None:
        slot.begin()
        inst = slot.inst
        try:
            image = slot.backend.image(inst) if slot.backend is not None else None
            if slot.backend is None or image is None:
                raise LifecycleError(
                    f'{inst.name} does not run in a container (managed = "docker"); nothing to pull', 1
                )
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
                slot.backend.pull(image, progress)
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

    # ----------------------------------------------------------------- adopt, refresh, readopt
    def _do_adopt(self, slot: Slot, container_id: str | None) -> InstanceState:
        slot.begin()
        inst = slot.inst
        try:
            if slot.backend is None:
                raise LifecycleError(NOT_ADOPTABLE.format(name=inst.name), 1)
            what = slot.backend.adopt(inst, container_id)
            slot.handle = None
            self._attach(slot)
            self._audit("adopt", slot, "ok", what)
            return self.status(inst.name)
        except LifecycleError as exc:
            self._audit("adopt", slot, "failed", exc.message)
            raise
        finally:
            slot.op.release()

    def _do_refresh(self, slot: Slot) -> InstanceState:
        slot.begin(wait=30.0)
        try:
            self._attach(slot)
            backend = slot.backend
            # Nothing of ours, and nothing adopted: an engine on its port not started by enginedeck?
            cid = None
            if slot.handle is None and backend is not None and backend.can_adopt:
                cid = None if adoption.adopted_id(slot.inst.name) else backend.foreign(slot.inst)
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
        finally:
            slot.op.release()

    def _do_readopt(self, slot: Slot) -> InstanceState:
        with slot.lock:
            st, gen, stopping = slot.machine.state, slot.generation, slot.stopping
        if slot.backend is None or st.monitor_only or stopping:
            return st
        if st.phase not in (Phase.UNKNOWN, Phase.EXITED, Phase.FAILED):
            return st
        found: Found | None = self._watch.find_replacement(slot, slot.handle)
        if found is not None:
            self._watch.reattach(slot, found, gen, "started outside this console; watching it", wait=False)
        return self.status(slot.inst.name)

    # ----------------------------------------------------------------- ps
    def _do_ps(self) -> PsReport:
        configured = [(s.inst, s.state) for s in self._slots.values()]
        # Commands of processes found on the host may carry a configured engine's secret.
        secrets = [k for s in self._slots.values() for k in s.logs.scrubber.known]
        return take_inventory(configured, self._backends, secrets)
