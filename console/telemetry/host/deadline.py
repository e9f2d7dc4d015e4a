"""Run blocking calls (NVML, psutil) in one dedicated worker thread, with a deadline.

A hung driver call cannot be interrupted from Python. So the worker owns exactly one thread and
runs one call at a time: when a call overruns its deadline the caller gets ``DeadlineExceeded``
and goes on with stale data, the stuck thread is left alone, and every later ``submit`` answers
``WorkerBusy`` at once instead of starting a second call behind the hung one (no pile-up of
threads). When the stuck call finally returns, the worker is free again and the next call runs.

Nothing here writes to stderr: a result nobody waits for any more is dropped silently.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")

_Job = tuple[Callable[[], object], "Future[object]"]


class DeadlineExceeded(TimeoutError):
    """The call did not finish within its deadline (it may still be running)."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"call timed out after {timeout_s:.1f} s")
        self.timeout_s = timeout_s


class WorkerBusy(RuntimeError):
    """An earlier call is still running (probably hung); no new call was started."""

    def __init__(self, running_for_s: float) -> None:
        super().__init__(f"previous call still running after {running_for_s:.1f} s")
        self.running_for_s = running_for_s


class WorkerClosed(RuntimeError):
    """``submit`` after ``close``."""


class DeadlineWorker:
    """One daemon thread that runs one blocking call at a time."""

    def __init__(self, name: str = "enginedeck-worker", *, clock: Callable[[], float] = time.monotonic) -> None:
        self._name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pending: Future[object] | None = None
        self._pending_since: float | None = None
        self._closed = False

    @property
    def busy(self) -> bool:
        """True while a call is queued or running."""
        with self._lock:
            return self._pending is not None

    @property
    def busy_for(self) -> float | None:
        """Seconds the current call has been running, or None when idle."""
        with self._lock:
            since = self._pending_since
        return None if since is None else self._clock() - since

    @property
    def thread(self) -> threading.Thread | None:
        """The worker thread (None until the first call); exposed so tests can count threads."""
        return self._thread

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Queue ``fn`` on the worker thread. Raises ``WorkerBusy`` if a call is still running."""
        with self._lock:
            if self._closed:
                raise WorkerClosed(self._name)
            if self._pending is not None:
                since = self._pending_since
                raise WorkerBusy(0.0 if since is None else self._clock() - since)
            fut: Future[T] = Future()
            self._pending = fut  # type: ignore[assignment]
            self._pending_since = self._clock()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._jobs.put((fn, fut))  # type: ignore[arg-type]  # under the lock: never behind close()'s stop
        return fut

    def call(self, fn: Callable[[], T], timeout_s: float) -> T:
        """Run ``fn`` on the worker and wait at most ``timeout_s``; exceptions from ``fn`` propagate."""
        fut = self.submit(fn)
        try:
            return fut.result(timeout=timeout_s)
        except TimeoutError:
            if fut.done():  # finished right at the deadline, or fn itself raised TimeoutError
                return fut.result()
            raise DeadlineExceeded(timeout_s) from None

    async def acall(self, fn: Callable[[], T], timeout_s: float) -> T:
        """Like ``call`` but awaits instead of blocking the event loop."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[T] = loop.create_future()
        fut = self.submit(fn)

        def _copy() -> None:
            if waiter.done():  # the awaiting side gave up (deadline or cancellation)
                return
            exc = fut.exception()
            if exc is not None:
                waiter.set_exception(exc)
            else:
                waiter.set_result(fut.result())

        def _done(_: Future[T]) -> None:
            try:
                loop.call_soon_threadsafe(_copy)
            except RuntimeError:
                pass  # the loop is closed: nobody is waiting any more; drop the late result quietly

        fut.add_done_callback(_done)
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            raise DeadlineExceeded(timeout_s) from None

    def close(self, join_timeout_s: float = 1.0) -> None:
        """Stop the thread after the current call. A hung thread is not waited for (it is a daemon)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            hung = self._pending is not None
        if thread is None:
            return
        self._jobs.put(None)
        if not hung:
            thread.join(join_timeout_s)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, fut = job
            if not fut.set_running_or_notify_cancel():
                self._finish()
                continue
            try:
                result = fn()
            except BaseException as exc:  # handed to the caller, never printed here
                self._finish()
                fut.set_exception(exc)
            else:
                self._finish()
                fut.set_result(result)

    def _finish(self) -> None:
        # Cleared before the result is set, so a caller woken by the result can submit again at once.
        with self._lock:
            self._pending = None
            self._pending_since = None
