"""Engines read from a Kubernetes source in the console: control is refused naming the source's
kind, and the logs tab shows what the source's kubectl read (or why there is nothing)."""

from __future__ import annotations

from dataclasses import replace

from console.model import HostView
from console.ui.app import DeckApp
from console.ui.screens.modals import ConfirmScreen
from tests.ui.conftest import AppFactory
from tests.ui.frozen import FrozenSource, frozen_fleet


class KubeFrozenSource(FrozenSource):
    """Every engine from source "k8s" (kind kubernetes); ``log_tail`` answers kubectl's reason."""

    def __init__(self) -> None:
        fleet = frozen_fleet()
        fleet = replace(fleet, engines=tuple(replace(e, source="k8s", host="k8s") for e in fleet.engines),
                        hosts=(HostView(name="k8s", destination="https://api:6443", kind="kubernetes"),))
        super().__init__(fleet)

    def source_of(self, engine: str) -> str | None:
        return "k8s"

    def log_tail(self, engine: str, n: int = 200) -> tuple[list[str], str] | None:
        return [], "kubectl not found ('kubectl' is not on PATH): logs of Kubernetes pods need it"


def _notes(app: DeckApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_control_of_a_kubernetes_engine_is_refused_with_why(make_app: AppFactory) -> None:
    app = make_app(KubeFrozenSource())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for key in ("R", "X", "U"):
            await pilot.press(key)
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
        notes = _notes(app)
        assert sum("read-only: engine comes from Kubernetes source k8s" in n for n in notes) == 3, notes
