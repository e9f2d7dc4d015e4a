"""What a frame's payload holds, before compression.

Documents: a JSON line with the recorded times, then one status document a line (JSONL, so a
decompressed payload is readable with ``jq``); the writer stores them in column form (``columns``).
A raw metrics payload: a JSON line ``[time, engine]``, then the payload's bytes as the engine sent
them (secrets masked).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

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
    try:
        for t, line in read_doc_lines(payload):
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
