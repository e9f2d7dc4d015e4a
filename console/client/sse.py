"""Incremental Server-Sent Events parser (the WHATWG ``text/event-stream`` rules that matter here).

Bytes are fed as they arrive, cut anywhere (inside a line, inside ``\\r\\n``, inside a UTF-8
sequence); complete events come out. Lines end in LF, CRLF or a lone CR; a blank line dispatches
the event; lines starting with ``:`` are comments (llama.cpp's pings, SGLang keep-alives) and are
dropped; ``data:`` lines of one event are joined with ``\\n``; one space after the colon is removed.
The payload stays ``bytes`` so the caller can hand it to ``orjson.loads`` without a decode step.

The fast path covers what every engine sends (``data: {json}\\n\\n`` with LF endings): one
``find`` per event and no per-line work.
"""

from __future__ import annotations

from dataclasses import dataclass

DONE = b"[DONE]"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: bytes
    event: str | None = None  # the ``event:`` field, e.g. "error" (None for the default "message")


class SSEParser:
    """Feed bytes, get events. Keeps the unfinished tail between feeds."""

    __slots__ = ("_buf", "_pending_cr")

    def __init__(self) -> None:
        self._buf = b""
        # A CR at the very end of a feed might be the first half of CRLF: hold it back.
        self._pending_cr = False

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
        buf = self._buf + data if self._buf else data
        blocks = buf.split(b"\n\n")
        self._buf = blocks.pop()
        out: list[bytes | SSEEvent] = []
        append = out.append
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                append(block[6:])  # fast path: one data line
            elif block:
                ev = _parse_block(block)
                if ev is not None:
                    append(ev)
        return out

    def close(self) -> list[SSEEvent]:
        """End of stream: a held-back CR ends its line; an event without its blank line is
        discarded (per the spec)."""
        out = self.feed(b"\n") if self._pending_cr else []
        self._buf = b""
        self._pending_cr = False
        return out

    @property
    def pending(self) -> int:
        """Bytes held for an unfinished event."""
        return len(self._buf)


def _parse_block(block: bytes) -> SSEEvent | None:
    data_lines: list[bytes] = []
    event: str | None = None
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, sep, value = line.partition(b":")
        if not sep:
            value = b""
        elif value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data_lines.append(value)
        elif field == b"event":
            event = value.decode("utf-8", "replace")
        # id / retry fields are irrelevant for one-shot completions streams.
    if not data_lines:
        return None
    return SSEEvent(b"\n".join(data_lines), event)
