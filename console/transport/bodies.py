"""Response bodies read under a size cap, decoded from whatever Content-Encoding the server chose.

prometheus_client's ASGI/WSGI apps (mounted by SGLang and trtllm-serve) gzip the exposition whenever
the request accepts it, and HTTP clients accept it by default. The cap applies to the raw bytes *and*
to the decoded bytes, and decoding never produces more than the cap plus one chunk: a gzip bomb is
refused with a reason instead of filling memory.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from console import gc_control

Emit = Callable[[bytes], None]

# What the probes advertise: the encodings the decoder below handles.
ACCEPT_ENCODING = "gzip, deflate"

_STEP = 64 * 1024  # largest decoded piece produced per decompress call


class BodyError(Exception):
    """The body cannot be used; ``str()`` is the one-line reason."""


class BodyTooLarge(BodyError):
    pass


def size_text(n: int) -> str:
    """``16 MiB``, ``1 MiB``, ``512 KiB`` for a byte cap."""
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MiB"
    return f"{max(1, n // 1024)} KiB"


class _Inflate:
    """One zlib stream (gzip or deflate); deflate accepts both zlib-wrapped and raw data."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._raw_fallback = encoding == "deflate"
        wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
        self._z = zlib.decompressobj(wbits)
        self._first = True

    def feed(self, data: bytes, emit: Emit) -> None:
        try:
            self._feed(data, emit)
        except zlib.error as exc:
            if self._first and self._raw_fallback:
                # Some servers send raw deflate (no zlib header) for "deflate".
                self._raw_fallback = False
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                self._feed(data, emit)
                return
            raise BodyError(f"invalid {self.encoding} body ({exc})") from None

    def _feed(self, data: bytes, emit: Emit) -> None:
        chunk = self._z.decompress(data, _STEP)
        self._first = False
        emit(chunk)
        while self._z.unconsumed_tail:
            emit(self._z.decompress(self._z.unconsumed_tail, _STEP))

    def finish(self, emit: Emit) -> None:
        if self._first:
            return  # an empty body is an empty document, not a broken stream
        try:
            emit(self._z.flush())
        except zlib.error as exc:
            raise BodyError(f"invalid {self.encoding} body ({exc})") from None
        if not self._z.eof:
            raise BodyError(f"truncated {self.encoding} body")


class _Emit:
    """Collects decoded bytes and enforces the decoded-size cap."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.parts: list[bytes] = []
        self.size = 0

    def __call__(self, data: bytes) -> None:
        if not data:
            return
        self.size += len(data)
        if self.size > self.max_bytes:
            self.parts.clear()  # see BoundedBody.feed
            raise BodyTooLarge(f"decoded response larger than {size_text(self.max_bytes)}")
        self.parts.append(data)


class BoundedBody:
    """Feed raw chunks as they arrive; ``result()`` gives the decoded body.

    ``content_encoding`` is the response header as sent (``gzip``, ``deflate``, ``identity``, a
    comma list for stacked encodings, or empty). Unknown encodings are an error, not garbage.
    """

    def __init__(self, content_encoding: str, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.raw_size = 0
        self._out = _Emit(max_bytes)
        names = [e.strip().lower() for e in content_encoding.split(",") if e.strip()]
        names = [e for e in names if e not in ("identity", "")]
        for e in names:
            if e not in ("gzip", "x-gzip", "deflate"):
                raise BodyError(f"unsupported Content-Encoding {e!r}")
        # Encodings are listed in the order applied: undo the last one first.
        self._stages = [_Inflate("gzip" if e == "x-gzip" else e) for e in reversed(names)]

    @property
    def encoding(self) -> str:
        return "+".join(s.encoding for s in reversed(self._stages)) or "identity"

    def feed(self, chunk: bytes) -> None:
        self.raw_size += len(chunk)
        if self.raw_size > self.max_bytes:
            # A refused body is dropped at once: the exception's frames reach this object, and
            # whoever keeps the exception (a future, a connection in a reference cycle) would keep
            # up to the cap of bytes alive until a full collection.
            self._out.parts.clear()
            raise BodyTooLarge(f"response larger than {size_text(self.max_bytes)}")
        self._push(0, chunk)

    def _push(self, i: int, data: bytes) -> None:
        if i == len(self._stages):
            self._out(data)
        elif data:
            self._stages[i].feed(data, self._into(i + 1))

    def _into(self, i: int) -> Emit:
        return lambda data: self._push(i, data)

    def result(self) -> bytes:
        for i, stage in enumerate(self._stages):
            stage.finish(self._into(i + 1))
        return b"".join(self._out.parts)


def release_refused() -> None:
    """After a body over the cap was refused: hand the memory it took back to the system.

    The up-to-the-cap bytes it held were many read-sized blocks that glibc keeps in the heap once
    freed, so the process stayed about 25 MB larger after a fault of 50 MB bodies ended
    (benchmarks/body_cap_rss.py, docs/performance.md). Only on this rare path, never per scrape."""
    gc_control.trim_heap()


def decode_body(raw: bytes, content_encoding: str, max_bytes: int) -> bytes:
    """Decode a whole body at once (files, tests); raises BodyError with a one-line reason."""
    body = BoundedBody(content_encoding, max_bytes)
    body.feed(raw)
    return body.result()
