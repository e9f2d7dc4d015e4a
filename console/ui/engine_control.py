"""Start, stop and restart of the engine under the cursor, as the console does them: a confirmation
that says what the engine is doing, the blocking call in a worker thread, the result as a message,
and an audit entry also for a refusal (an engine that enginedeck does not manage).

``EngineControlApp`` is the part of the console app (``DeckApp``) that does this.
"""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import App

from console.config import EngineInstance
from console.model import FleetSnapshot
from console.ui.actions import Action
from console.ui.control import LifecycleControl
from console.ui.messages import LifecycleDone
from console.ui.screens.base import DeckScreen

_KINDS = {"prometheus": "Prometheus", "kubernetes": "Kubernetes"}


class EngineControlApp(App[str | None]):
    """Engine control for the console app; the app sets these attributes."""

    lifecycle: LifecycleControl | None
    instances: Mapping[str, EngineInstance]
    fleet: FleetSnapshot | None

    async def control(self, verb: str) -> None:
        """start/stop/restart the engine under the cursor, after confirmation."""
        from console.ui.screens.modals import ConfirmScreen

        s = self.screen
        engine = s.selected_engine() if isinstance(s, DeckScreen) else None
        if engine is None:
            self.notify("select an engine first", severity="warning")
            return
        snap = self.fleet.engine(engine) if self.fleet else None
        if snap is not None and snap.source:
            kind = next((h.kind for h in self.fleet.hosts if h.name == snap.source), "") if self.fleet else ""
            why = f"read-only: engine comes from {_KINDS.get(kind, 'Prometheus')} source {snap.source}"
            self.notify(f"{why} (enginedeck only reads its metrics there; {verb} it where it runs)",
                        severity="warning", timeout=15)
            self.run_worker(lambda: _audit_refusal(verb, engine, why), thread=True)
            return
        ctl = self.lifecycle
        if ctl is None or not ctl.can_control(engine):
            from console.ui.control import not_managed_message

            inst = self.instances.get(engine)
            msg = not_managed_message(engine, verb, adhoc=inst is None or inst.adhoc)
            self.notify(msg, severity="warning", timeout=15)
            self.run_worker(lambda: _audit_refusal(verb, engine, "not managed by enginedeck"), thread=True)
            return
        # Only a live count is worth a warning: an unreachable engine's last values are history.
        live = snap is not None and snap.reachable and not snap.metrics_freshness.stale
        running = snap.total.running if live and snap is not None and snap.total else None
        if verb == "start":
            extra = " It is answering already; start only acts on an engine that is not running." if live else ""
        else:
            extra = f" It is serving {running:.0f} running requests." if running else ""

        def done(ok: bool | None) -> None:
            if ok:
                self.run_worker(lambda: self._do_control(ctl, verb, engine), thread=True, group="lifecycle")

        await self.push_screen(ConfirmScreen(f"{verb.capitalize()} {engine}?{extra}"), done)

    def _do_control(self, ctl: LifecycleControl, verb: str, engine: str) -> None:
        # Worker thread: blocking lifecycle call; the result comes back as a message.
        from console.errors import UserError
        from console.lifecycle.errors import translate_docker_error

        act = {"start": ctl.start, "stop": ctl.stop, "restart": ctl.restart}[verb]
        try:
            act(engine)
        except UserError as exc:
            self.post_message(LifecycleDone(verb, engine, exc.message))
        except Exception as exc:  # a Docker/HTTP error that was not translated yet: one line, as the CLI says it
            self.post_message(LifecycleDone(verb, engine, translate_docker_error(exc, instance=engine).message))
        else:
            self.post_message(LifecycleDone(verb, engine, ""))


def _audit_refusal(verb: str, engine: str, why: str) -> None:
    """Every attempted action is audited, also one refused before it reached engine control."""
    from console.lifecycle.audit import AuditLog

    AuditLog().record(verb, engine, "refused", why)


def control_actions(app: EngineControlApp) -> list[Action]:
    screens = ("overview", "engine")
    return [
        Action("restart", "R", "Restart engine", "Engine control", lambda _: app.control("restart"),
               mutating=True, screens=screens, footer=False),
        Action("stop", "X", "Stop engine", "Engine control", lambda _: app.control("stop"),
               mutating=True, screens=screens, footer=False),
        Action("start", "U", "Start engine", "Engine control", lambda _: app.control("start"),
               mutating=True, screens=screens, footer=False),
    ]
