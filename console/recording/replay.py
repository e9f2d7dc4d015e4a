"""``ReplaySource``: a ``FleetSource`` that plays a recording back instead of collecting.

The console runs on it unchanged: each recorded document becomes the ``FleetSnapshot`` it was made
from (``status_parse``), published to subscribers in the replay's own thread, and the history the
charts read is what the live hub would have held (the same ``record`` over the same snapshots):
rebuilt on a seek or a step back (from the rows frames beside the documents, or the documents
themselves where a recording has none): ``history_points`` snapshots before the position in the
rings, the hour before it in the summaries the 15m and 1h windows draw; extended as it plays.
Timeline commands (play/pause, step, seek, skip, speed) may come from any thread; they are carried
out in the replay's thread, so a seek that decodes a minute of frames never blocks the UI. Playback
waits the recorded interval divided by the speed (at most ``MAX_WAIT_S``: a gap in the recording is
not sat through) and, fast, publishes at most ``MAX_PUBLISH_HZ`` snapshots a second.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import queue
import statistics
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from console import gc_control
from console.listeners import add_listener
from console.model import FleetSnapshot
from console.recording.history_rows import Points, Row, add_point, rows_of
from console.recording.reader import Recording
from console.recording.writer import RecordingError
from console.status_parse import DocumentError, snapshot_from_doc
from console.telemetry.metrics.history import CHART_POINTS, WIDEST_WINDOW_S, History
from console.telemetry.source import Listener

SPEEDS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
HISTORY_POINTS = CHART_POINTS  # a seek rebuilds this many snapshots of history: what the charts show
MAX_WAIT_S = 2.0
MAX_PUBLISH_HZ = 5.0
_ROW_FRAMES = 120  # history rows kept decoded: a step back rebuilds ten minutes from memory
_LOOK_AHEAD = 64  # documents tried after one that is not a status document, for a seek to show

Pos = tuple[int, int]


class ReplaySource:
    """Plays ``recording`` from ``start`` (default: its beginning)."""

    def __init__(self, recording: Recording, *, start: float | None = None, history_points: int = HISTORY_POINTS,
                 history_capacity: int = CHART_POINTS, playing: bool = True) -> None:
        span = recording.doc_span
        if span is None:
            raise RecordingError(f"{recording.path}: the recording holds no snapshots")
        self.recording = recording
        self.history_points = history_points
        self.history = History(capacity=history_capacity)
        self._capacity = history_capacity
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._cmds: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._playing = playing
        self._speed = 1.0
        self.bad_documents = 0
        self._interval = _typical_interval(recording)
        self._row_cache: OrderedDict[int, tuple[list[float], list[list[Row]]]] = OrderedDict()
        self._history_due = False  # after a jump: the charts' full window is still to be built
        pos, snap = self._seek(span[0] if start is None else start)
        self._pos = pos
        self._snap = snap

    # -- FleetSource ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="enginedeck-replay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._cmds.put(("stop",))
        self._thread.join(timeout=5)
        self._thread = None

    def latest(self) -> FleetSnapshot:
        with self._lock:
            return self._snap

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return add_listener(self._listeners, self._lock, listener)

    @property
    def refresh(self) -> float:
        """The recording's own interval (what the top bar shows as the period)."""
        return self._interval

    def set_refresh(self, seconds: float) -> None:
        """A recording's interval is what it is; playback speed is ``set_speed``."""

    @property
    def paused(self) -> bool:
        return not self._playing

    def set_paused(self, paused: bool) -> None:
        self._cmds.put(("play", not paused))

    def set_detail(self, name: str | None) -> None:
        """Raw series are not in a recorded document; nothing to collect."""

    # -- the timeline ---------------------------------------------------------------------------

    @property
    def position(self) -> float:
        """The recorded time being shown."""
        with self._lock:
            return self._snap.taken_at

    @property
    def span(self) -> tuple[float, float]:
        span = self.recording.doc_span
        assert span is not None
        return span

    @property
    def speed(self) -> float:
        return self._speed

    @property
    def at_end(self) -> bool:
        with self._lock:
            pos = self._pos
        return self.recording.next_doc(*pos) is None

    def seek(self, t: float) -> None:
        """Show the last snapshot recorded at or before ``t`` (the first one, before the start)."""
        self._cmds.put(("seek", t))

    def skip(self, seconds: float) -> None:
        """Seek ``seconds`` (negative: back) from the position."""
        self._cmds.put(("skip", seconds))

    def step(self, n: int) -> None:
        """Pause and move ``n`` snapshots (negative: back)."""
        self._cmds.put(("step", n))

    def set_speed(self, speed: float) -> None:
        self._speed = max(SPEEDS[0], min(SPEEDS[-1], speed))

    def step_speed(self, direction: int) -> float:
        """The next speed up (direction > 0) or down; returns it."""
        cur = self._speed
        if direction > 0:
            new = next((s for s in SPEEDS if s > cur + 1e-9), SPEEDS[-1])
        else:
            new = next((s for s in reversed(SPEEDS) if s < cur - 1e-9), SPEEDS[0])
        self.set_speed(new)
        self._cmds.put(("wake",))
        return new

    def now(self) -> float:
        """The console's clock in a replay: the recorded time on view."""
        return self.position

    # -- the replay's thread ------------------------------------------------------------------

    def _snapshot(self, doc: dict[str, Any]) -> FleetSnapshot | None:
        """The snapshot of a recorded document; None (counted) for one that is not a status document,
        whatever is wrong in it (a recording may be crafted: ``"gpus": "x"``, a string for a list)."""
        try:
            return snapshot_from_doc(doc)
        except (DocumentError, TypeError, KeyError, ValueError, AttributeError, IndexError, OverflowError,
                RecursionError):
            self.bad_documents += 1
            return None

    def _rows(self, i: int) -> tuple[list[float], list[list[Row]]]:
        """The recorded times and history rows of each document of frame ``i`` (kept for the last
        ``_ROW_FRAMES``): from its rows frame, else from its documents."""
        got = self._row_cache.get(i)
        if got is not None:
            self._row_cache.move_to_end(i)
            return got
        rf = self.recording.frame_rows(i)
        if rf is not None:
            out = rf.times, [rf.doc(k) for k in range(len(rf.times))]
        else:
            docs = self.recording.frame_docs(i)
            out = list(docs.times), [rows_of(doc) for _t, doc in docs]
        self._row_cache[i] = out
        if len(self._row_cache) > _ROW_FRAMES:
            self._row_cache.popitem(last=False)
        return out

    def _locate(self, t: float) -> tuple[Pos, FleetSnapshot]:
        """The position at ``t`` and its snapshot (one frame decoded)."""
        rec = self.recording
        pos = rec.doc_at(t)
        if pos is None:
            raise RecordingError(f"{rec.path}: the recording holds no snapshots")
        snap = self._snapshot(rec.doc(pos)[1])
        # A document that is no status document: the next one that is, within a frame's worth.
        nxt: Pos | None = pos
        for _ in range(_LOOK_AHEAD):
            if snap is not None or nxt is None:
                break
            nxt = rec.next_doc(*nxt)
            if nxt is not None:
                pos, snap = nxt, self._snapshot(rec.doc(nxt)[1])
        if snap is None:
            raise RecordingError(f"{rec.path}: the snapshot at that time cannot be read (not enginedeck.status/2)")
        return pos, snap

    def _history_to(self, pos: Pos, *, points: int | None = None) -> History:
        """The history the live hub held at ``pos``: its rings hold up to ``points`` snapshots before it
        (default ``history_points``), and, for the full rebuild (``points`` None), its summaries the
        hour before it, so the 15m and 1h windows are full at once after a seek."""
        rec = self.recording
        at = rec.doc_time(pos)
        ring_lo = at - (self.history_points if points is None else points) * self._interval
        lo = min(ring_lo, at - WIDEST_WINDOW_S) if points is None else ring_lo
        history = History(capacity=self._capacity)
        series: Points = {}
        from_docs = False
        with gc_control.paused():  # thousands of small objects at once: one collection, at the end
            for i in range(max(0, rec.frame_index(lo)), pos[0] + 1):
                end = pos[1] + 1 if i == pos[0] else None
                rf = None if i in self._row_cache else rec.frame_rows(i)
                if rf is not None:  # the frame's rows frame: a few KB of numbers, no document decoded
                    rf.add_to(series, lo, end)
                    continue
                times, frame_rows = self._rows(i)
                from_docs = True
                for k, rows in enumerate(frame_rows[:end]):
                    if times[k] >= lo:
                        for key, rt, v in rows:
                            add_point(series, key, rt, v)
        for key, (ts, vs) in series.items():
            history.extend(key, ts, vs, ring_from=bisect.bisect_left(ts, ring_lo))
        if from_docs:
            # Documents decoded, rows kept for stepping: their young objects are walked now, in the
            # rebuild's own time, not by whatever allocates next (the next seek's snapshot).
            gc_control.collect_young()
        del series
        if points is None:
            # An hour's rebuild freed its decoded frames and point buffers: without handing them back,
            # the console stayed 5.5 MB larger (benchmarks/console_figures.py --hour, docs/performance.md).
            gc_control.trim_heap()
        return history

    def _seek(self, t: float) -> tuple[Pos, FleetSnapshot]:
        """The position at ``t`` and its snapshot, with the history rebuilt for the window before it."""
        pos, snap = self._locate(t)
        self.history = self._history_to(pos)
        return pos, snap

    def _jump(self, t: float) -> None:
        """Seek for a command: the snapshot is published at once with the history of its own frame;
        the charts' full window follows as soon as no other command waits (``_history_due``)."""
        pos, snap = self._locate(t)
        self.history = self._history_to(pos, points=0 if pos[1] == 0 else pos[1])
        self._move_to(pos, snap)
        self._history_due = True
        self._publish()

    def _move_to(self, pos: Pos, snap: FleetSnapshot) -> None:
        with self._lock:
            self._pos, self._snap = pos, snap

    def _publish(self) -> None:
        with self._lock:
            snap = self._snap
            listeners = list(self._listeners)
        for fn in listeners:
            fn(snap)

    def _advance(self, n: int) -> bool:
        """Forward ``n`` snapshots, each added to the history; False at the end."""
        rec = self.recording
        pos = self._pos
        for _ in range(n):
            nxt = rec.next_doc(*pos)
            if nxt is None:
                break
            pos = nxt
            for key, rt, v in self._rows(pos[0])[1][pos[1]]:
                self.history.append(key, rt, v)
        if pos == self._pos:
            return False
        snap = self._snapshot(rec.doc(pos)[1])
        if snap is None:
            with self._lock:
                self._pos = pos
            return False
        self._move_to(pos, snap)
        return True

    def _wait(self) -> float | None:
        """Seconds until the next snapshot is due (None: not playing, wait for a command)."""
        if not self._playing:
            return None
        nxt = self.recording.next_doc(*self._pos)
        if nxt is None:
            return None
        gap = self.recording.doc_time(nxt) - self.position
        return min(MAX_WAIT_S, max(0.0, gap) / self._speed)

    def _run(self) -> None:
        due = time.monotonic()
        while True:
            wait = self._wait()
            timeout = None if wait is None else max(0.0, due + wait - time.monotonic())
            try:
                cmd = self._cmds.get(timeout=timeout)
            except queue.Empty:
                cmd = ("tick",)
            try:
                if cmd[0] == "stop":
                    return
                self._handle(cmd)
                if self._history_due and self._cmds.empty():
                    self._history_due = False
                    self.history = self._history_to(self._pos)
                    self._publish()
            except RecordingError:
                continue  # a seek into an unreadable part: stay where we are
            due = time.monotonic()

    def _handle(self, cmd: tuple[Any, ...]) -> None:
        kind = cmd[0]
        if kind == "tick":
            # Fast playback: several snapshots per publication, each one still in the history.
            per_tick = max(1, round(self._speed / (MAX_PUBLISH_HZ * max(self._interval, 1e-3))))
            if self._advance(per_tick) or self.at_end:
                if self.at_end:
                    self._playing = False
                self._publish()
        elif kind == "play":
            if cmd[1] and self.at_end:
                self._restart()
            self._playing = bool(cmd[1])
            self._publish()
        elif kind == "seek":
            self._jump(float(cmd[1]))
        elif kind == "skip":
            self._jump(self.position + float(cmd[1]))
        elif kind == "step":
            self._playing = False
            n = int(cmd[1])
            if n > 0:
                self._advance(n)
            else:
                pos = self._pos
                for _ in range(-n):
                    prev = self.recording.prev_doc(*pos)
                    if prev is None:
                        break
                    pos = prev
                if pos != self._pos:
                    self._jump(self.recording.doc_time(pos))
                    return
            self._publish()
        elif kind == "wake":
            pass

    def _restart(self) -> None:
        """Play at the end starts again from the beginning."""
        with contextlib.suppress(RecordingError):
            self._move_to(*self._seek(self.span[0]))



def _typical_interval(rec: Recording) -> float:
    """The median time between snapshots in the first frames (1.0 when it cannot be told)."""
    times = [t for i in range(min(3, len(rec.doc_frames))) for t in rec.frame_docs(i).times]
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    return float(statistics.median(gaps)) if gaps else 1.0
