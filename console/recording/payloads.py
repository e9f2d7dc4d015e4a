"""What a frame's payload holds, before compression.

Documents: a JSON line with the recorded times, then one status document a line (JSONL, so a
decompressed payload is readable with ``jq``); the writer stores them in column form (``columns``).
A raw metrics payload: a JSON line ``[time, engine]``, then the payload's bytes as the engine sent
them (secrets masked).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import orjson

from console.recording import columns


class PayloadError(ValueError):
    """A payload that is not what its frame kind says."""


def docs_payload(times: Sequence[float], lines: Sequence[bytes]) -> bytes:
    return b"\n".join([orjson.dumps(list(times)), *lines]) + b"\n"


def read_doc_lines(payload: bytes) -> list[tuple[float, bytes]]:
    """(time, the document's JSON text) for each document, without parsing the documents; of either
    form (the plain one above, or ``columns``: its header is a JSON object)."""
    if payload[:1] == b"{":
        try:
            return columns.decode(payload)
        except columns.ColumnsError as exc:
            raise PayloadError(str(exc)) from None
    parts = payload.split(b"\n")
    try:
        times = orjson.loads(parts[0])
    except orjson.JSONDecodeError as exc:
        raise PayloadError(f"not JSON: {exc}") from None
    if not isinstance(times, list) or len(parts) < len(times) + 1:
        raise PayloadError("fewer documents than times")
    try:
        return [(float(t), line) for t, line in zip(times, parts[1:], strict=False)]
    except (TypeError, ValueError) as exc:  # a times line of other things than numbers
        raise PayloadError(f"bad times: {exc}") from None


def read_docs(payload: bytes) -> Iterator[tuple[float, dict[str, Any]]]:
    return read_docs_of(read_doc_lines(payload))


# The latest time a document may carry: what a date can still be made of (``datetime``'s year 9999).
# A crafted time beyond it would end whatever formats it (an export's UTC column, the timeline).
MAX_TIME = 253_402_300_799.0


def good_time(t: float) -> bool:
    return 0.0 <= t <= MAX_TIME


class FrameDocs(Sequence[tuple[float, dict[str, Any]]]):
    """A frame's documents, each kept as its JSON text and parsed when asked for.

    A replay keeps the last few frames it read (a minute of documents each); parsed, one frame held
    about 2.8 MB of dicts, the text a few hundred KB. Every line is parsed once here: a line that is
    no JSON object, or recorded at a time no date can show, is left out and counted in ``bad`` (the
    frame's other documents stay); ``times`` needs no parsing at all."""

    __slots__ = ("_lines", "bad", "times")

    def __init__(self, lines: list[tuple[float, bytes]]) -> None:
        self.times: list[float] = []
        self._lines: list[bytes] = []
        self.bad = 0
        for t, line in lines:
            try:
                ok = good_time(t) and isinstance(orjson.loads(line), dict)
            except orjson.JSONDecodeError:
                ok = False
            if ok:
                self.times.append(t)
                self._lines.append(line)
            else:
                self.bad += 1

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, k: int) -> tuple[float, dict[str, Any]]: ...
    @overload
    def __getitem__(self, k: slice) -> list[tuple[float, dict[str, Any]]]: ...

    def __getitem__(self, k: int | slice) -> tuple[float, dict[str, Any]] | list[tuple[float, dict[str, Any]]]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        return self.times[k], orjson.loads(self._lines[k])

    def __iter__(self) -> Iterator[tuple[float, dict[str, Any]]]:
        for t, line in zip(self.times, self._lines, strict=True):
            yield t, orjson.loads(line)


def read_docs_of(lines: list[tuple[float, bytes]]) -> Iterator[tuple[float, dict[str, Any]]]:
    try:
        for t, line in lines:
            doc = orjson.loads(line)
            if not isinstance(doc, dict):
                raise PayloadError("a document that is not an object")
            yield t, doc
    except orjson.JSONDecodeError as exc:
        raise PayloadError(f"not JSON: {exc}") from None


def raw_payload(engine: str, payload: bytes, at: float) -> bytes:
    return orjson.dumps([at, engine]) + b"\n" + payload


def read_raw(payload: bytes) -> tuple[float, str, bytes]:
    head, sep, body = payload.partition(b"\n")
    try:
        at, engine = orjson.loads(head)
    except (orjson.JSONDecodeError, ValueError, TypeError) as exc:
        raise PayloadError(f"bad raw payload header: {exc}") from None
    if not sep:
        raise PayloadError("raw payload without its header line")
    return float(at), str(engine), body
