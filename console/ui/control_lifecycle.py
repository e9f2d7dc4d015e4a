"""The console's LifecycleControl (console/ui/control.py), backed by console.lifecycle's
LifecycleManager (managed engines only)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Literal

from console.config import Config
from console.lifecycle.errors import LifecycleError, LifecycleTimeout
from console.lifecycle.manager import LifecycleManager
from console.lifecycle.state import InstanceState
from console.model import LifecycleView, Phase

READOPT_EVERY = 3.0  # seconds between looks for an engine started outside this console


class ManagerControl:
    """Blocking calls, meant for a worker thread; the manager itself never blocks its caller."""

    def __init__(self, manager: LifecycleManager, config: Config) -> None:
        self.manager = manager
        self._managed = {i.name for i in config.instances if i.managed}
        self._closed = False
        self._readopt: dict[str, tuple[float, Future[InstanceState] | None]] = {}

    @classmethod
    def from_config(cls, config: Config, *, read_only: str = "") -> ManagerControl:
        manager = LifecycleManager(config, read_only=read_only or None)
        manager.refresh_all()  # engines started earlier (containers by label, process records)
        return cls(manager, config)

    def can_control(self, engine: str) -> bool:
        return engine in self._managed

    def start(self, engine: str) -> None:
        self.manager.start(engine).result()
        self._until_ready(engine, "start")

    def stop(self, engine: str) -> None:
        self.manager.stop(engine).result()

    def restart(self, engine: str) -> None:
        self.manager.restart(engine).result()
        self._until_ready(engine, "restart")

    def _until_ready(self, engine: str, verb: str) -> None:
        """A start is done when the engine is ready, not when its process is launched; one that
        ends first raises with the reason, as the headless command says it."""
        while True:
            try:
                st = self.manager.wait(engine, timeout=1.0)
                break
            except LifecycleTimeout:
                if self._closed:  # the console quits: stop waiting
                    raise LifecycleError(f"{engine}: {verb}: not ready yet when the console closed") from None
        if st.phase is not Phase.READY:
            raise LifecycleError(f"{engine}: {verb} failed: {st.detail or st.phase.value}")

    def launch_command(self, engine: str) -> str | None:
        if engine not in self._managed:
            return None
        try:
            return self.manager.launch_spec(engine).display()  # masked by the lifecycle layer
        except Exception as exc:  # a spec that cannot be built is shown as such, not raised in the UI
            return f"(cannot build the launch command: {exc})"

    def log_tail(self, engine: str, n: int) -> list[str] | None:
        """In-memory read only (no Docker call): the last ``n`` lines, or None when not managed."""
        if engine not in self._managed:
            return None
        return [line.text for line in self.manager.logs(engine).tail(n)]

    def phase_of(self, engine: str) -> LifecycleView | None:
        """The lifecycle's view of a managed engine, for the hub to show while it starts or stops."""
        if engine not in self._managed:
            return None
        st = self.manager.status(engine)
        if st.phase in (Phase.UNKNOWN, Phase.EXITED, Phase.FAILED) and not st.monitor_only:
            self._look_for_outside_start(engine)
        if st.phase is Phase.UNKNOWN:
            return None
        return view_of(st, wall_since=time.time() - (time.monotonic() - st.since))

    def _look_for_outside_start(self, engine: str) -> None:
        """Every few seconds while it shows no engine: one started outside this console (a headless
        `up`/`restart`, `docker start`) is watched again (never blocks the caller)."""
        now = time.monotonic()
        last, fut = self._readopt.get(engine, (0.0, None))
        if (fut is not None and not fut.done()) or now - last < READOPT_EVERY:
            return
        self._readopt[engine] = (now, self.manager.readopt(engine))

    def pids_of(self, engine: str) -> tuple[int, ...]:
        if engine not in self._managed:
            return ()
        pid = self.manager.status(engine).pid
        return (int(pid),) if pid else ()

    def on_terminal_loss(self, policy: Literal["keep", "stop"], reason: str, done_by: float) -> None:
        from console.lifecycle.terminal_loss import carry_out

        carry_out(self.manager, policy, reason, done_by)

    def close(self) -> None:
        self._closed = True
        self.manager.close()


def view_of(st: InstanceState, *, wall_since: float | None) -> LifecycleView:
    """The console's view of a lifecycle state: one detail line, each fact once."""
    detail = st.detail
    if st.phase is Phase.STOPPING and st.countdown is not None:
        # The machine's detail names the full timeout; the countdown is the news.
        reason = detail.split("; SIGTERM sent", 1)[0] if "; SIGTERM sent" in detail else ""
        detail = (f"{reason}; " if reason else "") + (
            f"SIGTERM sent; SIGKILL in {st.countdown} s" if st.countdown else "stop timeout reached: sent SIGKILL")
    elif st.phase in (Phase.STARTING, Phase.LOADING) and st.evidence:
        detail = f"{detail} · {st.evidence}" if detail else st.evidence
    elif st.phase is Phase.PULLING and st.progress is not None:
        detail = f"{st.progress:.0f}% · {detail}" if detail else f"{st.progress:.0f}%"
    if st.warning:
        detail = f"{detail} · WARNING: {st.warning}" if detail else f"WARNING: {st.warning}"
    return LifecycleView(phase=st.phase, detail=detail, ended=st.ended, exit_code=st.exit_code,
                         oom_killed=st.oom_killed, since=wall_since, countdown=st.countdown)
