"""The console's incident-bundle key: a screenshot of the screen as it is, then the bundle
(``console.bundle``) written on a worker thread into the current folder; the notice says where,
and the path is sent to the terminal (OSC 52) so it can be pasted.

The bundle gets what only the console has: the screen, its latest snapshot (with its alerts), the
chart history it holds (``history.csv``: without a recording, how the engines moved over the
window), its engines' log tails in memory and the XID events its NVML reader saw. It never blocks
the UI loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.ui.actions import Action

if TYPE_CHECKING:
    from textual.app import App

    from console.bundle.make import BundleRequest, BundleResult
    from console.config import EngineInstance
    from console.ui.host import DeckHost

DEFAULT_LAST_S = 15 * 60


class BundleKey:
    """At most one bundle at a time; a second press while one is written says so."""

    def __init__(self, app: App[Any], folder: Callable[[], Path] = Path.cwd,
                 recording_dir: Callable[[], Path | None] = lambda: None) -> None:
        """``recording_dir``: the folder the console's REC writes into while it records (None: the
        default recording folder, where `enginedeck record` writes)."""
        self.app = app
        self.folder = folder
        self.recording_dir = recording_dir
        self._busy = threading.Lock()

    def action(self) -> Action:
        return Action("bundle", "ctrl+s", "Incident bundle for a bug report", "Global", self.run,
                      short="bundle", footer=False)  # fmt: skip

    def run(self, host: DeckHost) -> None:
        if not self._busy.acquire(blocking=False):
            self.app.notify("An incident bundle is being written; wait for its notice", timeout=5)
            return
        try:
            req = self.request(host)
        except Exception:
            self._busy.release()
            raise
        self.app.notify(f"Writing the incident bundle ({len(req.instances)} engines, last 15 min)...", timeout=4)
        self.app.run_worker(lambda: self._write(req), thread=True, group="bundle", exit_on_error=False)

    def request(self, host: DeckHost) -> BundleRequest:
        """What the bundle gets from the console, taken on the UI loop (nothing here blocks)."""
        from console.bundle.make import BundleRequest, default_name, free_path
        from console.bundle.window import Window

        now = time.time()
        fleet = host.fleet
        instances = _instances(host)
        lifecycle = host.lifecycle
        xids: dict[int, tuple[int, ...]] | None = None
        if fleet is not None and fleet.gpus.source == "nvml" and not fleet.gpus.unavailable_reason:
            xids = {g.index: g.xid_errors for g in fleet.gpus.gpus}

        def logs(name: str, n: int) -> list[str] | None:
            if lifecycle is None or not lifecycle.can_control(name):
                return None
            return lifecycle.log_tail(name, n)

        host_name = fleet.host.hostname if fleet is not None and fleet.host is not None else ""
        source = host.source
        return BundleRequest(
            instances=instances,
            window=Window.last(DEFAULT_LAST_S, now),
            dest=free_path(self.folder() / default_name(host_name or _hostname(), now)),
            snapshot=fleet,
            recording_dir=self.recording_dir(),
            screenshot_svg=self.app.export_screenshot(),
            logs=logs,
            xid_errors=xids,
            history=source.history if source is not None else None,
            source="enginedeck console (bundle key)",
        )

    def _write(self, req: BundleRequest) -> None:
        from console.bundle.make import make_bundle

        try:
            result = make_bundle(req)
        except Exception as exc:  # a full disk, an unwritable folder: one line, the console goes on
            message = f"Incident bundle not written: {type(exc).__name__}: {exc}"
            self.app.call_from_thread(self.app.notify, message, severity="error", timeout=10)
            return
        finally:
            self._busy.release()
        self.app.call_from_thread(self._done, result)

    def _done(self, result: BundleResult) -> None:
        path = str(result.path)
        self.app.copy_to_clipboard(path)
        masked = result.manifest.get("redaction", {}).get("masked", 0)
        rec = result.manifest.get("recording", {})
        covered = (f"{rec.get('documents')} recorded snapshots of the window" if rec.get("covers_window")
                   else "no recording covers the window")  # fmt: skip
        history = result.manifest.get("history") or {}
        if history.get("rows"):
            covered += f", {history['rows']} rows of chart history"

        # The path first: a small terminal shows only the toast's first lines.
        self.app.notify(f"Incident bundle written: {path} (path sent to the terminal, OSC 52; if nothing pastes, "
                        f"the terminal does not allow it). {result.bytes / 1024:.0f} KiB, {masked} secrets "
                        f"masked, {covered}.", timeout=15)  # fmt: skip


def _hostname() -> str:
    import socket

    return socket.gethostname()


def _instances(host: DeckHost) -> list[EngineInstance]:
    """The console's engines; when it knows only the fleet, each engine as PROFILE@URL."""
    if host.instances:
        return list(host.instances.values())
    from console.config import parse_engine_ref
    from console.errors import UserError

    out = []
    for e in host.fleet.engines if host.fleet is not None else ():
        try:
            out.append(parse_engine_ref(f"{e.profile}@{e.url}"))
        except UserError:
            continue
    return out
