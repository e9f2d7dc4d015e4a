"""Watching running engines: per engine a supervisor thread (readiness probes, exit watch, phase
timeouts) and a log follower (output -> ``LogBuffer``); an engine that ends without being asked
to is reported, or, when it was restarted from outside this enginedeck, followed to its new run.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from console.lifecycle.backend import ExitInfo, Found, Handle
from console.lifecycle.errors import LifecycleError
from console.lifecycle.phases import Verdict, ending_of
from console.lifecycle.probe import ReadyProbe, probe_ready, ready_key
from console.lifecycle.slot import Slot
from console.lifecycle.state import RUNNING_PHASES, STARTING_PHASES
from console.model import Phase

PROBE_INTERVAL_STARTING = 0.5
PROBE_INTERVAL_READY = 2.0
PROBE_TIMEOUT = 2.0
# How long an engine that ended without us asking (SIGTERM, exit 0, container removed) is watched
# for a restart from outside this enginedeck (a headless `restart` takes a few seconds to launch
# the new one) before it counts as stopped from outside.
OUTSIDE_RESTART_GRACE = 10.0


class Watcher:
    """Watches the engines of the manager's slots. ``publish`` announces a slot's new state,
    ``audit(action, slot, result, detail)`` records, ``give_up(slot, reason)`` has the manager
    stop an engine whose start made no progress; ``closed`` ends every watch."""

    def __init__(
        self,
        *,
        publish: Callable[[Slot], None],
        audit: Callable[[str, Slot, str, str], None],
        give_up: Callable[[Slot, str], None],
        closed: threading.Event,
        clock: Callable[[], float],
    ) -> None:
        self._publish = publish
        self._audit = audit
        self._give_up = give_up
        self._closed = closed
        self._clock = clock

    # ----------------------------------------------------------------- probes and supervision
    def probe_once(self, slot: Slot) -> None:
        inst = slot.inst
        key = ready_key(inst.profile, inst.api_key)
        result = probe_ready(inst.url, inst.profile.health.ready_path, key, timeout=PROBE_TIMEOUT)
        with slot.lock:
            slot.machine.probe(result)

    def supervise(self, slot: Slot) -> None:
        """Start following ``slot.handle``'s output and watching it (two daemon threads)."""
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

    def _supervisor(self, slot: Slot, handle: Handle, gen: int) -> None:
        inst = slot.inst
        key = ready_key(inst.profile, slot.spec.api_key if slot.spec else inst.api_key)
        with ReadyProbe(inst.url, inst.profile.health.ready_path, key, timeout=PROBE_TIMEOUT) as probe:
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
                    phase = slot.state.phase
                    if phase in STARTING_PHASES or phase in RUNNING_PHASES:
                        result = probe.probe()
                        with slot.lock:
                            if slot.generation == gen and not slot.stopping:
                                slot.machine.probe(result)
                    with slot.lock:
                        verdict = slot.machine.tick() if not slot.stopping else Verdict()
                    if verdict.action == "give_up":
                        self._give_up(slot, verdict.reason)
                self._publish(slot)
                self._closed.wait(self._probe_interval(slot))

    def _probe_interval(self, slot: Slot) -> float:
        """Fast polls right after launch (a llama.cpp 503 window can be 100 ms), slower later."""
        st = slot.state
        if st.phase in (Phase.READY, Phase.DEGRADED, Phase.UNHEALTHY):
            return PROBE_INTERVAL_READY
        started = next((t for p, t in reversed(st.history) if p is Phase.STARTING), st.since)
        age = self._clock() - started
        if age < 2.0:
            return 0.05
        if age < 10.0:
            return 0.2
        return PROBE_INTERVAL_STARTING

    def last_lines(self, slot: Slot, handle: Handle) -> tuple[str, ...]:
        """The engine's last output lines (for an exit report), once its log follower is done."""
        if slot.log_thread is not None:
            slot.log_thread.join(timeout=3.0)
        lines = tuple(
            ln.text for ln in slot.logs.tail(40) if ln.text.strip() and not ln.text.startswith("[enginedeck]")
        )
        return lines[-20:] if lines else tuple(map(slot.logs.scrubber, handle.tail(20)))

    # ----------------------------------------------------------------- an engine that ended
    def _on_exit(self, slot: Slot, handle: Handle, info: ExitInfo, gen: int) -> None:
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
            lines = self.last_lines(slot, handle)
            with slot.lock:
                slot.machine.exited(info.code, oom=info.oom_killed, last_lines=lines)
                st = slot.machine.state
            # A failed start leaves nothing behind; a crash after ready keeps the container for
            # inspection (`enginedeck logs`, `docker inspect`) until `down`/`remove`.
            if st.phase is Phase.FAILED or slot.backend is None or not slot.backend.keeps_crashed:
                with contextlib.suppress(LifecycleError):
                    handle.remove()
                slot.handle = None
            self._publish(slot)
            self._audit("exit", slot, "failed" if st.phase is Phase.FAILED else "exited", st.detail)

    def _await_replacement(self, slot: Slot, old: Handle, gen: int) -> bool:
        """Watch up to OUTSIDE_RESTART_GRACE for the engine started again outside this enginedeck;
        True when it was found (and is watched now) or something here took over."""
        deadline = time.monotonic() + OUTSIDE_RESTART_GRACE
        while not self._closed.is_set():
            with slot.lock:
                if slot.generation != gen:
                    return True  # a start or stop from here took over
            found = self.find_replacement(slot, old)
            if found is not None:
                return self.reattach(slot, found, gen, "restarted outside this console; watching it again")
            if time.monotonic() >= deadline:
                return False
            self._closed.wait(0.25)
        return True

    def find_replacement(self, slot: Slot, old: Handle | None) -> Found | None:
        """A running engine of this instance other than ``old``'s ended run (see
        ``EngineBackend.replacement``); None also when the backend cannot be asked right now."""
        if slot.backend is None:
            return None
        try:
            return slot.backend.replacement(slot.inst, old, adopted=slot.adopted)
        except Exception:  # Docker gone, a record half written: nothing found this time
            return None

    def reattach(self, slot: Slot, found: Found, gen: int, detail: str, *, wait: bool = True) -> bool:
        """Watch ``found``, an engine of this instance started outside this enginedeck."""
        if not slot.op.acquire(blocking=wait):
            return False
        try:
            with slot.lock:
                if slot.generation != gen:
                    return True
            old, handle = slot.handle, found.handle
            if old is not None and old is not handle and slot.backend is not None:
                slot.backend.release(old)
            slot.handle = handle
            slot.has_gpus = bool(found.gpus)
            with slot.lock:
                slot.generation += 1
                slot.machine.reset(slot.backend.kind if slot.backend else None)
                slot.machine.attached(Phase.STARTING, pid=handle.pid, container_id=handle.container_id,
                                      address=found.address, gpus=found.gpus, config_hash=found.config_hash,
                                      detail=detail)  # fmt: skip
            self._publish(slot)
            self.probe_once(slot)
            self._publish(slot)
            self.supervise(slot)
            return True
        finally:
            slot.op.release()
