"""A bounded, thread-safe log buffer with coalesced change notifications.

Engines can log thousands of lines a second (a vLLM load with debug logging, a crash loop). The
buffer keeps the newest ``capacity`` lines in a ring, caps each line at ``max_line`` characters
(marked as truncated), and tells listeners about new lines at most ``max_rate`` times a second,
so a UI repaints a handful of times a second however fast lines arrive.

Lines keep absolute indices: line ``i`` is the i-th line ever appended (0-based); once it falls
out of the ring, ``get(i)`` returns None. Listener callbacks run in the appending thread or in a
short timer thread; a UI must hop to its own loop (``app.call_from_thread``).
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from console.listeners import add_listener
from console.secrets import Scrubber

DEFAULT_CAPACITY = 10_000
DEFAULT_MAX_LINE = 4096
TRUNCATED_MARK = " …[truncated]"


@dataclass(frozen=True, slots=True)
class LogLine:
    index: int  # absolute line number since the buffer was created
    text: str
    at: float  # wall-clock time the line was received
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class LogUpdate:
    """What changed since the previous notification."""

    first_new: int  # absolute index of the oldest line appended since the last notice
    end: int  # one past the newest line's index
    dropped: int  # lines that fell out of the ring since the last notice
    cleared: bool = False


LogListener = Callable[[LogUpdate], None]


class LogBuffer:
    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        *,
        max_line: int = DEFAULT_MAX_LINE,
        max_rate: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self.max_line = max_line
        self._interval = 1.0 / max_rate if max_rate > 0 else 0.0
        self._clock = clock
        self._lock = threading.Lock()
        self._lines: deque[LogLine] = deque(maxlen=capacity)
        self._end = 0  # absolute index of the next line
        self._listeners: list[LogListener] = []
        self._following = True
        self._anchor: int | None = None  # first visible index while not following
        # Notification coalescing.
        self._pending_first: int | None = None
        self._pending_dropped = 0
        self._pending_cleared = False
        self._last_notify = float("-inf")
        self._timer: threading.Timer | None = None
        self.notifications = 0  # how many notices were sent (for the benchmark and tests)
        self._partial = ""  # an unterminated line from feed()
        # Every line goes through the one secret rule (console.secrets): recognised token shapes
        # always, and the values set_secrets names.
        self._scrub = Scrubber()

    def set_secrets(self, secrets: Iterable[str]) -> None:
        """Values replaced by ``****`` in every line appended from now on (an engine that logs its
        own arguments would otherwise show its API key)."""
        self._scrub = Scrubber(secrets)

    @property
    def scrubber(self) -> Scrubber:
        """The rule lines pass through (for text about this engine that comes another way)."""
        return self._scrub

    # ---------------------------------------------------------------- appending
    def append(self, text: str) -> None:
        self.extend((text,))

    def extend(self, texts: Iterable[str]) -> int:
        """Append lines (without their newline); returns how many were added."""
        lines = [t.rstrip("\r\n") for t in texts]
        block = "\n".join(lines)
        if block.count("\n") == len(lines) - 1:  # no line holds a newline: scrub them in one pass
            return self._extend(self._scrub(block).split("\n") if lines else [], scrub=False)
        return self._extend(lines, scrub=True)

    def _extend(self, texts: Iterable[str], *, scrub: bool) -> int:
        now = time.time()
        added = 0
        with self._lock:
            first = self._end
            rule = self._scrub
            for raw in texts:
                text = raw.rstrip("\r\n")
                if scrub:
                    text = rule(text)
                truncated = len(text) > self.max_line
                if truncated:
                    text = text[: self.max_line] + TRUNCATED_MARK
                if len(self._lines) == self.capacity:
                    self._pending_dropped += 1
                self._lines.append(LogLine(self._end, text, now, truncated))
                self._end += 1
                added += 1
            if added and self._pending_first is None:
                self._pending_first = first
        if added:
            self._maybe_notify()
        return added

    def feed(self, chunk: str, *, scrubbed: bool = False) -> int:
        """Append text that may hold several lines and end mid-line (a stream chunk).

        ``scrubbed``: the chunk already went through this buffer's rule in whole lines (the
        process reader scrubs once for its disk copy and for the buffer)."""
        data = self._partial + chunk
        head, sep, self._partial = data.rpartition("\n")
        # The complete lines are scrubbed in one pass (cheaper than line by line); a secret the
        # chunk cut in two waits in the partial line until its end arrives.
        parts = (head if scrubbed else self._scrub(head)).split("\n") if sep else []
        if len(self._partial) > self.max_line * 4:  # a runaway line without newline: flush it
            parts.append(self._partial if scrubbed else self._scrub(self._partial))
            self._partial = ""
        return self._extend(parts, scrub=False)

    def flush_partial(self) -> None:
        """The stream ended: keep an unterminated last line."""
        if self._partial:
            rest, self._partial = self._partial, ""
            self.append(rest)

    def clear(self) -> None:
        with self._lock:
            self._lines.clear()
            self._pending_cleared = True
            if self._pending_first is None:
                self._pending_first = self._end
            self._anchor = None
        self._maybe_notify()

    # ---------------------------------------------------------------- reading
    def __len__(self) -> int:
        with self._lock:
            return len(self._lines)

    @property
    def end(self) -> int:
        """One past the newest line's absolute index."""
        with self._lock:
            return self._end

    @property
    def start(self) -> int:
        """Absolute index of the oldest line still held."""
        with self._lock:
            return self._end - len(self._lines)

    def get(self, index: int) -> LogLine | None:
        with self._lock:
            start = self._end - len(self._lines)
            if start <= index < self._end:
                return self._lines[index - start]
            return None

    def lines(self, start: int | None = None, stop: int | None = None) -> list[LogLine]:
        """Lines with absolute indices in [start, stop) that are still held."""
        with self._lock:
            first = self._end - len(self._lines)
            lo = first if start is None else max(start, first)
            hi = self._end if stop is None else min(stop, self._end)
            if hi <= lo:
                return []
            return [self._lines[i - first] for i in range(lo, hi)]

    def tail(self, n: int) -> list[LogLine]:
        with self._lock:
            n = max(0, min(n, len(self._lines)))
            return list(self._lines)[len(self._lines) - n :] if n else []

    def last_text(self) -> str:
        with self._lock:
            return self._lines[-1].text if self._lines else ""

    def search(self, pattern: str, *, regex: bool = False, ignore_case: bool = True) -> list[int]:
        """Absolute indices of held lines matching ``pattern`` (substring, or a regex).

        An invalid regex raises ``ValueError`` with a one-line reason.
        """
        if regex:
            try:
                rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
            with self._lock:
                return [ln.index for ln in self._lines if rx.search(ln.text)]
        needle = pattern.casefold() if ignore_case else pattern
        with self._lock:
            if ignore_case:
                return [ln.index for ln in self._lines if needle in ln.text.casefold()]
            return [ln.index for ln in self._lines if needle in ln.text]

    # ---------------------------------------------------------------- follow
    @property
    def following(self) -> bool:
        return self._following

    def follow(self) -> None:
        """Views show the newest lines as they arrive."""
        with self._lock:
            self._following = True
            self._anchor = None

    def unfollow(self, anchor: int | None = None) -> None:
        """Views freeze at ``anchor`` (default: the current top of the last screen)."""
        with self._lock:
            self._following = False
            self._anchor = anchor

    def window(self, height: int) -> list[LogLine]:
        """The lines a view of ``height`` rows shows: the tail when following, else from the anchor."""
        with self._lock:
            first = self._end - len(self._lines)
            if self._following or self._anchor is None:
                lo = max(first, self._end - height)
                if not self._following:
                    self._anchor = lo
            else:
                lo = max(first, self._anchor)
            hi = min(self._end, lo + height)
            return [self._lines[i - first] for i in range(lo, hi)]

    # ---------------------------------------------------------------- listeners
    def subscribe(self, listener: LogListener) -> Callable[[], None]:
        return add_listener(self._listeners, self._lock, listener)

    def _maybe_notify(self) -> None:
        with self._lock:
            if self._pending_first is None or not self._listeners:
                if not self._listeners:
                    self._pending_first = None
                    self._pending_dropped = 0
                    self._pending_cleared = False
                return
            if self._timer is not None:  # a notice is already scheduled; it will carry these lines
                return
            if self._schedule_locked():
                return
        self._notify_now()

    def _schedule_locked(self) -> bool:
        """Start the timer when the last notice was too recent; True if one was started."""
        wait = self._last_notify + self._interval - self._clock()
        if wait <= 0:
            return False
        self._timer = threading.Timer(wait, self._timer_fired)
        self._timer.daemon = True
        self._timer.start()
        return True

    def _timer_fired(self) -> None:
        with self._lock:
            self._timer = None
            # A late timer must still respect the interval (a direct notice may have gone out).
            if self._schedule_locked():
                return
        self._notify_now()

    def _notify_now(self) -> None:
        with self._lock:
            if self._pending_first is None:
                return
            update = LogUpdate(self._pending_first, self._end, self._pending_dropped, self._pending_cleared)
            self._pending_first = None
            self._pending_dropped = 0
            self._pending_cleared = False
            self._last_notify = self._clock()
            self.notifications += 1
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(update)
            except Exception:  # a broken view must not stop log ingestion
                pass

    def flush(self) -> None:
        """Send a pending notification now (end of a stream, tests)."""
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self._notify_now()
