"""``Recorder``: a live source's snapshots (and, every ``raw_every`` seconds per engine, its raw metrics
payloads) into a ``RecordingWriter``, in a thread of its own.

The source calls us in its collecting thread; we only queue there (a bounded queue: a stalled disk
drops snapshots and counts them, it never holds up collection or grows memory). Building the status
document, compressing and writing happen in the recorder's thread. Documents kept in memory are
written at least every ``frame_s`` of wall-clock time, also while the source is paused. A write
that fails (disk full, folder gone) stops the recording and says why in ``error``.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.model import FleetSnapshot
from console.recording.writer import RecordingError, RecordingWriter
from console.status_doc import status_doc
from console.telemetry.source import FleetSource

RAW_EVERY_S = 60.0
QUEUE_MAX = 300

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())


class Recorder:
    def __init__(self, source: FleetSource, writer: RecordingWriter, *, raw_every: float | None = RAW_EVERY_S,
                 on_stop: Callable[[str], None] | None = None) -> None:
        """``raw_every``: seconds between two raw payloads of one engine (None: none recorded).
        ``on_stop(reason)``: called (in the recorder's thread) when a failure ends the recording."""
        self.source = source
        self.writer = writer
        self.raw_every = raw_every
        self.on_stop = on_stop
        self.error = ""
        self.dropped = 0
        self.documents = 0
        self.started_at: float | None = None
        self._queue: queue.Queue[tuple[Any, ...] | None] = queue.Queue(QUEUE_MAX)
        self._raw_at: dict[str, float] = {}
        self._unsubscribe: list[Callable[[], None]] = []
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    @property
    def directory(self) -> Path:
        return self.writer.directory

    @property
    def active(self) -> bool:
        return self._thread is not None and not self._closed.is_set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self.started_at = time.time()
        self._thread = threading.Thread(target=self._run, name="enginedeck-recorder", daemon=True)
        self._thread.start()
        self._unsubscribe.append(self.source.subscribe(self._on_snapshot))
        subscribe_payloads = getattr(self.source, "subscribe_payloads", None)
        if self.raw_every is not None and subscribe_payloads is not None:
            self._unsubscribe.append(subscribe_payloads(self._on_payload))

    def stop(self, timeout: float = 5.0) -> None:
        """Stop recording: what is in memory is written and the folder released."""
        self._unsubscribe_all()
        if self._thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)

    def _unsubscribe_all(self) -> None:
        while True:  # stop() and the thread may both get here: each function runs once
            try:
                unsubscribe = self._unsubscribe.pop()
            except IndexError:
                return
            unsubscribe()

    # -- the source's thread: queue only -----------------------------------------------------

    def _put(self, item: tuple[Any, ...]) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1

    def _on_snapshot(self, snap: FleetSnapshot) -> None:
        self._put(("doc", snap))

    def _on_payload(self, engine: str, body: bytes, at: float) -> None:
        assert self.raw_every is not None
        last = self._raw_at.get(engine)
        if last is not None and at - last < self.raw_every:
            return
        self._raw_at[engine] = at
        self._put(("raw", engine, body, at))

    # -- the recorder's thread ---------------------------------------------------------------

    def _run(self) -> None:
        w = self.writer
        reason = ""
        try:
            while True:
                try:
                    item = self._queue.get(timeout=1.0)
                except queue.Empty:
                    item = ()
                if item is None:
                    break
                if item and item[0] == "doc":
                    snap: FleetSnapshot = item[1]
                    w.add(status_doc(snap), at=snap.taken_at)
                    self.documents += 1
                elif item:
                    w.add_raw(item[1], item[2], at=item[3])
                first = w.pending_since
                if first is not None and time.time() - first >= w.frame_s:
                    w.flush()
        except RecordingError as exc:
            reason = str(exc)
        except Exception as exc:  # a bug must end the recording visibly, not silently
            log.exception("recorder")
            reason = f"recording stopped: {type(exc).__name__}: {exc}"
        finally:
            self._unsubscribe_all()
            try:
                w.close()
            except RecordingError as exc:
                reason = reason or str(exc)
            self._closed.set()
        if reason:
            self.error = reason
            if self.on_stop is not None:
                self.on_stop(reason)
