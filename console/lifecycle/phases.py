"""The phase state machine of one engine instance: pure, no I/O, clock injected.

    pulling -> creating -> starting -> loading -> ready <-> degraded/unhealthy
                                   \\-> failed            -> stopping -> exited

Inputs are events (launch steps, readiness probe results, log lines, exits, stop requests) and
``tick()`` for the clock. Timeouts are per phase (``console.config.Timeouts``). A start that
overruns its phase timeout while the log is still moving (a line within ``progress_window``
seconds) only gets a visible warning; it is given up (``Verdict.give_up``, which the manager
turns into a stop with the reason shown) only when the log has also been silent. This avoids
killing slow but healthy loads (llama-swap #92/#789).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from console.config import Timeouts
from console.lifecycle.state import REQUESTED_EXIT_CODES, STARTING_PHASES, Backend, InstanceState
from console.model import Phase

LoadingSignal = Literal["refused", "503"]
PROGRESS_WINDOW = 60.0  # seconds: a log line this recent means "still making progress"
HISTORY_LIMIT = 32
LAST_LINES = 20


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One readiness probe of ``health.ready_path``.

    kind: "refused" (nothing listening), "timeout", "error" (other transport error) or "http".
    ``not_engine``: the answer is no engine's (a login page, a redirect, 204 with no body, JSON of
    another shape); ``detail`` says what answered.
    """

    kind: Literal["refused", "timeout", "error", "http"]
    status: int | None = None
    models: int = 0
    detail: str = ""
    not_engine: bool = False

    @property
    def ready(self) -> bool:
        return self.kind == "http" and self.status == 200 and self.models > 0


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Literal["none", "give_up"] = "none"
    reason: str = ""


NO_VERDICT = Verdict()


class PhaseMachine:
    def __init__(
        self,
        name: str,
        *,
        timeouts: Timeouts,
        loading: tuple[LoadingSignal, ...] = ("refused",),
        backend: Backend = Backend.NONE,
        clock: Callable[[], float],
        progress_window: float = PROGRESS_WINDOW,
    ) -> None:
        self.timeouts = timeouts
        self.loading = loading
        self.progress_window = progress_window
        self._clock = clock
        now = clock()
        self._state = InstanceState(name=name, backend=backend, since=now, updated=now)
        self._last_log_at: float | None = None
        self._stop_reason = ""
        self._outside_stop = False  # the engine ended without us asking; watching for a restart

    # ----------------------------------------------------------------- reading
    @property
    def state(self) -> InstanceState:
        return self._state

    @property
    def phase(self) -> Phase:
        return self._state.phase

    def last_log_age(self) -> float | None:
        return None if self._last_log_at is None else self._clock() - self._last_log_at

    # ----------------------------------------------------------------- helpers
    def _set(self, phase: Phase | None = None, **changes: Any) -> None:
        now = self._clock()
        st = self._state
        if phase is not None and phase is not st.phase:
            hist = (*st.history, (phase, now))[-HISTORY_LIMIT:]
            changes.setdefault("warning", "")
            st = replace(st, phase=phase, since=now, history=hist)
        self._state = replace(st, updated=now, **changes)

    # ----------------------------------------------------------------- launch events
    def reset(self, backend: Backend | None = None) -> None:
        """A new start begins: forget the previous run's outcome, keep the name."""
        now = self._clock()
        self._state = InstanceState(
            name=self._state.name, backend=backend or self._state.backend, since=now, updated=now
        )
        self._last_log_at = None
        self._stop_reason = ""
        self._outside_stop = False

    def pulling(self, percent: float | None, detail: str = "") -> None:
        self._set(Phase.PULLING, progress=percent, detail=detail or "pulling image")

    def creating(self, detail: str = "") -> None:
        self._set(Phase.CREATING, progress=None, detail=detail or "creating")

    def starting(
        self,
        *,
        container_id: str | None = None,
        pid: int | None = None,
        address: str = "",
        gpus: str = "",
        config_hash: str = "",
    ) -> None:
        self._set(
            Phase.STARTING,
            detail="started; waiting for the engine to answer",
            container_id=container_id,
            pid=pid,
            address=address,
            gpus=gpus,
            config_hash=config_hash,
            exit_code=None,
            oom_killed=False,
            countdown=None,
            ended="",
        )

    def attached(
        self,
        phase: Phase,
        *,
        container_id: str | None = None,
        pid: int | None = None,
        address: str = "",
        gpus: str = "",
        config_hash: str = "",
        config_changed: bool = False,
        monitor_only: bool = False,
        detail: str = "",
    ) -> None:
        """Found an engine already running (started earlier or elsewhere)."""
        self._set(
            phase,
            detail=detail,
            container_id=container_id,
            pid=pid,
            address=address,
            gpus=gpus,
            config_hash=config_hash,
            config_changed=config_changed,
            monitor_only=monitor_only,
            ended="",
        )

    def found_exited(
        self,
        code: int | None,
        *,
        oom: bool = False,
        last_lines: tuple[str, ...] = (),
        container_id: str | None = None,
        address: str = "",
    ) -> None:
        """Found the engine's container already ended (a crash while nobody watched)."""
        text = f"exit code {code}" if code is not None else "no exit code"
        if oom:
            text += ", OOMKilled"
        self._set(
            Phase.EXITED,
            detail=f"found exited ({text})",
            exit_code=code,
            oom_killed=oom,
            last_log_lines=last_lines[-LAST_LINES:],
            container_id=container_id,
            address=address,
            countdown=None,
            ended=ending_of(code, oom),
        )

    def log_line(self, text: str) -> None:
        """A new log line arrived: evidence of progress."""
        self._last_log_at = self._clock()
        self._state = replace(self._state, evidence=text[:300], updated=self._last_log_at)

    # ----------------------------------------------------------------- probe
    def probe(self, r: ProbeResult) -> None:
        ph = self.phase
        if r.not_engine and ph in (Phase.STARTING, Phase.LOADING, Phase.READY, Phase.DEGRADED, Phase.UNHEALTHY):
            # Something else answers on the engine's address: no engine loads that way.
            self._set(Phase.UNHEALTHY, detail=f"not an engine: {r.detail}")
        elif ph in (Phase.STARTING, Phase.LOADING):
            if r.ready:
                self._set(Phase.READY, detail=_models_listed(r.models))
            elif r.kind == "refused":
                if "refused" in self.loading:
                    self._set(Phase.LOADING, detail="connection refused (model loading)")
                else:
                    self._set(detail="not listening yet")
            elif r.kind == "http" and r.status == 503:
                msg = f"503 {r.detail}".strip()
                self._set(Phase.LOADING, detail=msg if "503" in self.loading else f"{msg} (unexpected for this engine)")
            elif r.kind == "http" and r.status == 200:
                self._set(Phase.LOADING, detail="answering, but no model listed yet")
            elif r.kind == "http" and r.status in (401, 403):
                self._set(
                    Phase.DEGRADED, detail=f"{r.status} on the ready path: API key missing or wrong (api_key_env)"
                )
            else:
                self._set(detail=_probe_text(r))
        elif ph in (Phase.READY, Phase.DEGRADED, Phase.UNHEALTHY):
            if r.ready:
                self._set(Phase.READY, detail=_models_listed(r.models))
            elif r.kind == "http" and r.status in (200, 401, 403):
                what = "no model listed" if r.status == 200 else f"{r.status}: API key missing or wrong"
                self._set(Phase.DEGRADED, detail=what)
            else:
                self._set(Phase.UNHEALTHY, detail=_probe_text(r))
        # Probes during pulling/creating/stopping or after the end change nothing.

    # ----------------------------------------------------------------- time
    def tick(self) -> Verdict:
        """Check the phase timeouts. Returns give_up when a start is stuck without progress."""
        st = self._state
        now = self._clock()
        limit = {
            Phase.CREATING: self.timeouts.creating,
            Phase.STARTING: self.timeouts.starting,
            Phase.LOADING: self.timeouts.loading,
        }.get(st.phase)
        if limit is None:
            return NO_VERDICT
        spent = now - st.since
        if spent <= limit:
            return NO_VERDICT
        log_age = self.last_log_age()
        name = st.phase.value
        if log_age is not None and log_age <= self.progress_window:
            warning = (
                f"{name} for {spent:.0f} s (timeout {limit:.0f} s) but the log is still moving "
                f"(last line {log_age:.0f} s ago): not stopping it"
            )
            if warning.split(" (last line")[0] != st.warning.split(" (last line")[0] or now - st.updated >= 1:
                self._set(warning=warning)
            return NO_VERDICT
        silent = "no log output yet" if log_age is None else f"no log output for {log_age:.0f} s"
        return Verdict("give_up", f"{name} timed out after {spent:.0f} s (limit {limit:.0f} s) with {silent}")

    # ----------------------------------------------------------------- stopping and the end
    def stop_requested(self, timeout: float, reason: str = "") -> None:
        self._stop_reason = reason
        detail = f"SIGTERM sent; killing in {timeout:.0f} s if still running"
        if reason:
            detail = f"{reason}; {detail}"
        self._set(Phase.STOPPING, detail=detail, countdown=round(timeout))

    def countdown(self, seconds_left: float) -> None:
        left = max(0, int(seconds_left + 0.999))
        if left != self._state.countdown:
            self._set(countdown=left)

    def killing(self) -> None:
        self._set(countdown=0, detail="stop timeout reached: sent SIGKILL")

    def waiting_for_gpu(self, detail: str) -> None:
        self._set(Phase.STOPPING, countdown=None, detail=detail)

    def ended_outside(self, code: int | None) -> None:
        """The engine ended with a requested exit code nobody here asked for: someone stopped or is
        restarting it outside this enginedeck. Shown as stopping until a restart is found or not."""
        self._outside_stop = True
        text = f"exit code {code}" if code is not None else "no exit code"
        self._set(Phase.STOPPING, detail=f"ended outside this console ({text}); watching for a restart",
                  countdown=None)

    def exited(self, code: int | None, *, oom: bool = False, last_lines: tuple[str, ...] = (), note: str = "") -> None:
        """The engine's process ended. Before it was ever ready that is a failed start."""
        was = self.phase
        text = f"exit code {code}" if code is not None else "no exit code"
        if oom:
            text += " (OOMKilled)"
        tail = last_lines[-LAST_LINES:]
        outside = self._outside_stop
        stopped_here = was is Phase.STOPPING and not outside
        # Never ready in this run (a 401/other server answering on the port does not count).
        never_ready = not self._state.saw(Phase.READY)
        if (was in STARTING_PHASES or never_ready) and not stopped_here and not outside and not self._stop_reason:
            last = f": {tail[-1]}" if tail else ""
            reason = f"exited during {was.value} with {text}{last}"
            self._set(Phase.FAILED, detail=reason, exit_code=code, oom_killed=oom, last_log_lines=tail, countdown=None,
                      ended="failed")
            return
        if self._stop_reason:
            detail, phase, ended = f"{self._stop_reason}; {text}", Phase.FAILED, "gave-up"
        elif stopped_here:
            detail, phase, ended = f"stopped ({text})", Phase.EXITED, "stopped"
        elif code == 143:
            detail, phase, ended = ("terminated by SIGTERM from outside this enginedeck (exit code 143)",
                                    Phase.EXITED, "outside")
        else:
            ended, phase = ending_of(code, oom), Phase.EXITED
            if ended == "unknown":
                detail = "ended with no exit code to tell why (it is not a child of this enginedeck)"
            elif ended == "outside":
                detail = f"stopped outside this console with {text}"
            else:
                detail = f"exited unexpectedly with {text}"
        if note:
            detail = f"{detail}; {note}"
        self._outside_stop = False
        self._set(phase, detail=detail, exit_code=code, oom_killed=oom, last_log_lines=tail, countdown=None,
                  ended=ended)

    def failed(self, reason: str, *, exit_code: int | None = None, last_lines: tuple[str, ...] = ()) -> None:
        self._set(
            Phase.FAILED,
            ended="failed",
            detail=reason,
            exit_code=exit_code,
            last_log_lines=last_lines[-LAST_LINES:],
            countdown=None,
            progress=None,
        )

    def note(self, detail: str | None = None, warning: str | None = None) -> None:
        changes: dict[str, Any] = {}
        if detail is not None:
            changes["detail"] = detail
        if warning is not None:
            changes["warning"] = warning
        self._set(**changes)


def _models_listed(n: int) -> str:
    return "1 model listed" if n == 1 else f"{n} models listed"


def ending_of(code: int | None, oom: bool = False) -> str:
    """How an exit nobody here asked for reads: a requested code is a stop from outside, no code
    tells nothing, anything else (an error code, a signal, OOMKilled) is a crash."""
    if oom:
        return "crashed"
    if code is None:
        return "unknown"
    return "outside" if code in REQUESTED_EXIT_CODES else "crashed"


def _probe_text(r: ProbeResult) -> str:
    if r.kind == "http":
        return f"HTTP {r.status} {r.detail}".strip()
    if r.kind == "refused":
        return "connection refused"
    return f"{r.kind}: {r.detail}" if r.detail else r.kind
