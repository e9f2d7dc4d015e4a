"""Incremental Server-Sent Events parser (the WHATWG ``text/event-stream`` rules that matter here).

Bytes are fed as they arrive, cut anywhere (inside a line, inside ``\\r\\n``, inside a UTF-8
sequence); complete events come out. Lines end in LF, CRLF or a lone CR; a blank line dispatches
the event; lines starting with ``:`` are comments (llama.cpp's pings, SGLang keep-alives) and are
dropped; ``data:`` lines of one event are joined with ``\\n``; one space after the colon is removed.
The payload stays ``bytes`` so the caller can hand it to ``orjson.loads`` without a decode step.

The fast path covers what every engine sends (``data: {json}\\n\\n`` with LF endings): one
``find`` per event and no per-line work.

An unfinished event is kept as a list of the pieces that carried it and only the newest piece is
searched for the blank line, so one huge event costs time linear in its bytes (no copy of the
growing buffer on every read); an event over ``MAX_EVENT_BYTES`` raises ``SSEEventTooLarge``.
A line that is none of the SSE fields (``data``, ``event``, ``id``, ``retry``) nor a comment is kept
in ``SSEEvent.stray``, so a caller can refuse a stream that is not SSE.
"""

from __future__ import annotations

from dataclasses import dataclass

DONE = b"[DONE]"
# One event's bytes at most: a completion chunk is a few kB; a server that ignored ``stream`` sends
# its whole JSON body as one event, still far below this.
MAX_EVENT_BYTES = 16 * 1024 * 1024
_FIELDS = (b"data", b"event", b"id", b"retry")
# An unfinished event up to this size is joined to the next read (cheap for the usual few hundred
# bytes); a longer one is kept in pieces, so no read copies more than this of what came before.
_SMALL_TAIL = 64 * 1024


class SSEEventTooLarge(ValueError):
    """An event grew past ``MAX_EVENT_BYTES`` without its blank line."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: bytes
    event: str | None = None  # the ``event:`` field, e.g. "error" (None for the default "message")
    stray: bytes = b""  # the first line that is no SSE field (empty when every line is one)


class SSEParser:
    """Feed bytes, get events. Keeps the unfinished tail between feeds."""

    __slots__ = ("_buf", "_parts", "_pending", "_pending_cr", "_small", "max_event", "saw_block")

    def __init__(self, max_event: int = MAX_EVENT_BYTES) -> None:
        # A short unfinished event is kept as bytes and joined to the next read (the common case:
        # a read that ends mid-event). One that outgrows _SMALL_TAIL is kept as the pieces that
        # carried it, joined once when it completes, and only the newest piece is searched.
        self._buf = b""
        self._parts: list[bytes] = []
        self._pending = 0  # bytes in _parts
        # A CR at the very end of a feed might be the first half of CRLF: hold it back.
        self._pending_cr = False
        self.max_event = max_event
        self._small = min(_SMALL_TAIL, max_event)
        self.saw_block = False  # a blank line ended something (an event, a comment): this is SSE

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Complete events in arrival order."""
        return [ev if isinstance(ev, SSEEvent) else SSEEvent(ev) for ev in self.feed_fast(data)]

    def feed_fast(self, data: bytes) -> list[bytes | SSEEvent]:
        """Like ``feed``, but a plain one-line ``data:`` event comes back as its payload bytes
        (no object per event on the hot path); anything else as an ``SSEEvent``."""
        if self._pending_cr:
            data = b"\r" + data
            self._pending_cr = False
        if b"\r" in data:
            if data.endswith(b"\r"):
                data = data[:-1]
                self._pending_cr = True
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        out: list[bytes | SSEEvent] = []
        if self._parts:
            data = self._continue(data, out)
            if self._parts:
                return out
            buf = data
        else:
            buf = self._buf + data if self._buf else data
        blocks = buf.split(b"\n\n")
        tail = blocks.pop()
        if blocks:
            self.saw_block = True
            append = out.append
            for block in blocks:
                if block[:6] == b"data: " and b"\n" not in block:
                    append(block[6:])  # fast path: one data line
                elif block:
                    self._block(block, out)
        if len(tail) > self._small:
            self._buf = b""
            self._parts = [tail]
            self._grow(len(tail))
        else:
            self._buf = tail
        return out

    def _continue(self, data: bytes, out: list[bytes | SSEEvent]) -> bytes:
        """A large event is pending: search only ``data`` for its end (the blank line may straddle
        the two pieces); returns what follows the event, or keeps ``data`` as one more piece."""
        parts = self._parts
        if parts[-1][-1:] == b"\n" and data[:1] == b"\n":
            first = b"".join(parts)[:-1]
            rest = data[1:]
        else:
            cut = data.find(b"\n\n")
            if cut < 0:
                if data:
                    parts.append(data)
                    self._grow(len(data))
                return b""
            parts.append(data[:cut])
            first = b"".join(parts)
            rest = data[cut + 2 :]
        self._parts = []
        self._pending = 0
        self.saw_block = True
        self._block(first, out)
        return rest

    def _grow(self, n: int) -> None:
        self._pending += n
        if self._pending > self.max_event:
            size = self._pending
            self._parts = []
            self._pending = 0
            raise SSEEventTooLarge(f"an SSE event exceeded {self.max_event} bytes ({size} bytes without a blank line)")

    @staticmethod
    def _block(block: bytes, out: list[bytes | SSEEvent]) -> None:
        if block[:6] == b"data: " and b"\n" not in block:
            out.append(block[6:])
        elif block:
            ev = _parse_block(block)
            if ev is not None:
                out.append(ev)

    def close(self) -> list[SSEEvent]:
        """End of stream: a held-back CR ends its line; an event without its blank line is
        discarded (per the spec)."""
        out = self.feed(b"\n") if self._pending_cr else []
        self._buf = b""
        self._parts = []
        self._pending = 0
        self._pending_cr = False
        return out

    @property
    def pending(self) -> int:
        """Bytes held for an unfinished event."""
        return len(self._buf) + self._pending


def _parse_block(block: bytes) -> SSEEvent | None:
    data_lines: list[bytes] = []
    event: str | None = None
    stray = b""
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, sep, value = line.partition(b":")
        if field not in _FIELDS and not stray:
            stray = line[:80]
        if not sep:
            value = b""
        elif value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data_lines.append(value)
        elif field == b"event":
            event = value.decode("utf-8", "replace")
        # id / retry fields are irrelevant for one-shot completions streams.
    if not data_lines and not stray:
        return None  # only event/id/retry fields: nothing to hand on
    return SSEEvent(b"\n".join(data_lines), event, stray)
