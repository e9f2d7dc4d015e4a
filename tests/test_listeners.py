"""add_listener: the one subscribe/unsubscribe of the hub, the lifecycle manager and the log buffer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from console.lifecycle.logs import LogBuffer, LogUpdate
from console.listeners import add_listener


class _CountingLock:
    """A real lock that records whether the list was touched while it was held."""

    def __init__(self, seen: list[str]) -> None:
        self._lock = threading.Lock()
        self.held = False
        self.seen = seen

    def __enter__(self) -> None:
        self._lock.acquire()
        self.held = True

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None) -> None:
        self.held = False
        self._lock.release()


class _WatchedList(list[Callable[[], None]]):
    def __init__(self, lock: _CountingLock) -> None:
        super().__init__()
        self.lock = lock

    def append(self, item: Callable[[], None]) -> None:
        self.lock.seen.append(f"append held={self.lock.held}")
        super().append(item)

    def remove(self, item: Callable[[], None]) -> None:
        self.lock.seen.append(f"remove held={self.lock.held}")
        super().remove(item)


def test_subscribe_and_unsubscribe_under_the_owners_lock() -> None:
    seen: list[str] = []
    lock = _CountingLock(seen)
    listeners = _WatchedList(lock)
    first, second = (lambda: None), (lambda: None)
    off_first = add_listener(listeners, lock, first)
    add_listener(listeners, lock, second)
    assert list(listeners) == [first, second]
    off_first()
    off_first()  # twice is harmless
    assert list(listeners) == [second]
    assert seen == ["append held=True", "append held=True", "remove held=True"]


def test_a_log_buffer_listener_stops_hearing_once_unsubscribed() -> None:
    buf = LogBuffer(capacity=100, max_rate=0)  # no rate limit: every line is a notice at once
    heard: list[LogUpdate] = []
    off = buf.subscribe(heard.append)
    buf.append("first line")
    buf.flush()
    assert [u.first_new for u in heard] == [0]
    off()
    buf.append("second line")
    buf.flush()
    assert [u.first_new for u in heard] == [0]
