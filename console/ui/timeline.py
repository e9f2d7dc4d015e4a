"""Recording and replay in the console: the REC toggle, the replay keys, the seek box, the top-bar badges.

Recording runs a ``console.recording.recorder.Recorder`` on the console's own source (the folder
is ``[console] recording_dir``); starting and stopping it touch the disk, so they run in a worker
thread. In a replay (``ReplaySource``) the console is read-only with the reason "replay", space
plays and pauses, ``+``/``-`` change the speed, ``,``/``.`` step one snapshot, ``<``/``>`` skip a
minute and ``t`` seeks to a time; recording and the screens that talk to live engines are off.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeGuard

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from console.timespec import TIME_HELP, parse_duration, parse_time
from console.ui.actions import Action

if TYPE_CHECKING:
    from console.recording.recorder import Recorder
    from console.recording.replay import ReplaySource
    from console.recording.writer import RecordingWriter
    from console.telemetry.source import FleetSource
    from console.ui.host import DeckHost

# Screens that send requests to live engines: a replay has none to send them to.
LIVE_ONLY = frozenset({"playground", "bench", "bundle"})  # the bundle probes live engines
REPLAY_GROUP = "Replay"


class RecordingControl:
    """The console's recorder: off until toggled; ``notify(text, error)`` is called from any thread."""

    def __init__(self, source: FleetSource, make_writer: Callable[[], RecordingWriter],
                 notify: Callable[[str, bool], None]) -> None:
        self.source = source
        self.make_writer = make_writer
        self.notify = notify
        self.recorder: Recorder | None = None

    @property
    def active(self) -> bool:
        return self.recorder is not None and self.recorder.active

    @property
    def directory(self) -> Path | None:
        return self.recorder.directory if self.recorder is not None else None

    def toggle(self) -> None:
        """Start or stop recording (blocking: call it in a worker thread)."""
        from console.recording.recorder import Recorder
        from console.recording.writer import RecordingError

        rec = self.recorder
        if rec is not None and rec.active:
            rec.stop()
            self.recorder = None
            self.notify(f"recording stopped: {rec.documents} snapshots in {rec.directory}", False)
            return
        try:
            writer = self.make_writer()
        except RecordingError as exc:
            self.notify(f"cannot record: {exc}", True)
            return
        rec = Recorder(self.source, writer, on_stop=lambda why: self.notify(f"recording stopped: {why}", True))
        rec.start()
        self.recorder = rec
        self.notify(f"recording to {writer.directory} (ctrl+r again stops)", False)

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.stop()
            self.recorder = None


def is_replay(src: object) -> TypeGuard[ReplaySource]:
    """Whether ``src`` replays a recording. A live console never imports the recording package
    (a few hundredths of a second of its start): no replay exists before its module is loaded."""
    module = sys.modules.get("console.recording.replay")
    return module is not None and isinstance(src, module.ReplaySource)


def replay_of(host: DeckHost) -> ReplaySource | None:
    src = host.source
    return src if is_replay(src) else None


def replay_time(text: str, src: ReplaySource, *, now: float | None = None) -> float:
    """A time typed in a replay: ``+5m``/``-90s`` from the position, else as ``parse_time`` reads it,
    where "10m ago" counts back from now while the recording reaches now, else from its end."""
    s = text.strip()
    if s[:1] in "+-" and s[1:2].isdigit():
        return src.position + (1 if s[0] == "+" else -1) * parse_duration(s[1:])
    now = time.time() if now is None else now
    first, last = src.span
    anchor = now if first <= now <= last + 120 else last
    return parse_time(s, now=anchor)


class SeekScreen(ModalScreen[str | None]):
    """One line: the time to go to. enter goes, esc cancels."""

    BINDINGS: ClassVar = [Binding("escape", "cancel", "Cancel", show=False)]
    DEFAULT_CSS = """
    SeekScreen { align: center middle; }
    SeekScreen #seek-box { width: 70; height: auto; padding: 1 2; border: round $accent; background: $panel; }
    SeekScreen Input { width: 100%; }
    """

    def __init__(self, span: tuple[float, float]) -> None:
        super().__init__()
        self.span = span

    def compose(self) -> ComposeResult:
        first, last = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) for t in self.span)
        with Vertical(id="seek-box"):
            yield Static(Text("Go to", style="bold"))
            yield Input(placeholder="10m ago, 19:05, -5m, +30s", id="seek-input")
            yield Static(Text(f"recorded {first} .. {last}\n{TIME_HELP}; -5m / +30s from here. "
                              "enter goes, esc cancels", style="dim"))

    def on_mount(self) -> None:
        self.set_focus(self.query_one(Input))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


def timeline_badge(src: ReplaySource, *, wide: bool = False, width: int = 10) -> Text:
    """REPLAY, the recorded time (with its date when ``wide``), play state and speed, and where in
    the recording this is."""
    t = Text()
    t.append(" REPLAY ", style="bold reverse magenta")
    pos = src.position
    t.append(" " + time.strftime("%Y-%m-%d %H:%M:%S" if wide else "%H:%M:%S", time.localtime(pos)), style="bold")
    if src.paused:
        t.append("  end" if src.at_end else "  ❚❚", style="bold yellow")
    else:
        t.append(f"  ▶ {src.speed:g}x", style="bold green")
    first, last = src.span
    frac = 0.0 if last <= first else (pos - first) / (last - first)
    at = min(width - 1, max(0, round(frac * (width - 1))))
    t.append(" " + "─" * at, style="magenta")
    t.append("●", style="bold magenta")
    t.append("─" * (width - 1 - at), style="dim")
    return t


def recording_actions(toggle: Callable[[DeckHost], None]) -> list[Action]:
    return [Action("record", "ctrl+r", "Record: start / stop recording to disk (● REC)", "Global", toggle,
                   short="rec", footer=False)]


def replay_actions() -> list[Action]:
    """The timeline's keys: they act in a replay and say so elsewhere."""

    def act(fn: Callable[[ReplaySource], None]) -> Callable[[DeckHost], None]:
        def run(host: DeckHost) -> None:
            src = replay_of(host)
            if src is not None:
                fn(src)

        return run

    return [
        Action("replay_step_back", "comma", "Replay: one snapshot back", REPLAY_GROUP, act(lambda s: s.step(-1)),
               short="step", key_display=","),
        Action("replay_step", "full_stop", "Replay: one snapshot on", REPLAY_GROUP, act(lambda s: s.step(1)),
               short="step", key_display="."),
        Action("replay_back", "less_than_sign", "Replay: a minute back", REPLAY_GROUP, act(lambda s: s.skip(-60)),
               short="-1m", key_display="<"),
        Action("replay_on", "greater_than_sign", "Replay: a minute on", REPLAY_GROUP, act(lambda s: s.skip(60)),
               short="+1m", key_display=">"),
    ]
