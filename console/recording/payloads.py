"""What a frame's payload holds, before compression.

Documents: a JSON line with the recorded times, then one status document a line (JSONL, so a
decompressed payload is readable with ``jq``). A raw metrics payload: a JSON line
``[time, engine]``, then the payload's bytes as the engine sent them (secrets masked).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson


class PayloadError(ValueError):
    """A payload that is not what its frame kind says."""


def docs_payload(times: Sequence[float], lines: Sequence[bytes]) -> bytes:
    return b"\n".join([orjson.dumps(list(times)), *lines]) + b"\n"


def read_docs(payload: bytes) -> Iterator[tuple[float, dict[str, Any]]]:
    parts = payload.split(b"\n")
    try:
        times = orjson.loads(parts[0])
        if len(parts) < len(times) + 1:
            raise PayloadError("fewer documents than times")
        for t, line in zip(times, parts[1:], strict=False):
            doc = orjson.loads(line)
            if not isinstance(doc, dict):
                raise PayloadError("a document that is not an object")
            yield float(t), doc
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
