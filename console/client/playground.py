"""UI-free logic of the prompt playground: served models, conversation, one streamed turn, copy formats.

The screen (``console.ui.screens.playground``) only renders what this module produces; everything
here is testable without a terminal.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from console.client.stream import (
    GenParams,
    auth_headers,
    build_body,
    endpoint_path,
    list_models,
    max_tokens_of,
    stream_request,
)
from console.client.timing import RequestMetrics, RequestRecord, compute
from console.target import EngineTarget
from console.transport.http import Cancellable, HTTPClient, HTTPError


def parse_params(text: str) -> GenParams:
    """``max_tokens=256 temperature=0.7 top_p=0.9 seed=1`` -> GenParams. Raises ValueError."""
    kw: dict[str, Any] = {"max_tokens": 256, "temperature": 0.7}
    extra: dict[str, Any] = {}
    for part in text.replace(",", " ").split():
        key, sep, val = part.partition("=")
        if not sep:
            raise ValueError(f"{part!r}: use key=value")
        try:
            parsed: Any = json.loads(val)
        except json.JSONDecodeError:
            parsed = val
        if key in ("max_tokens", "seed"):
            if not isinstance(parsed, int):
                raise ValueError(f"{key} must be an integer")
            kw[key] = parsed
        elif key in ("temperature", "top_p"):
            if not isinstance(parsed, int | float):
                raise ValueError(f"{key} must be a number")
            kw[key] = float(parsed)
        else:
            extra[key] = parsed
    return GenParams(**kw, extra=extra)


@dataclass(slots=True)
class Turn:
    """One request in the history: what was sent, to which engine, and how it went."""

    engine: str
    model: str
    messages: list[dict[str, Any]]
    body: dict[str, Any]
    url: str
    api_key_env: str | None
    record: RequestRecord
    path: str = "/v1/chat/completions"
    metrics: RequestMetrics | None = None
    engine_state: dict[str, Any] = field(default_factory=dict)  # running/waiting/KV at send time
    started_at: float = 0.0

    @property
    def reply(self) -> str:
        return self.record.text


@dataclass(slots=True)
class Conversation:
    system: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)  # user/assistant turns
    # The engine that wrote each assistant turn (kept beside the messages: they go to the API as they are).
    authors: list[str] = field(default_factory=list)

    def request_messages(self, user: str) -> list[dict[str, Any]]:
        msgs: list[dict[str, Any]] = [{"role": "system", "content": self.system}] if self.system else []
        return [*msgs, *self.messages, {"role": "user", "content": user}]

    def add_exchange(self, user: str, reply: str, engine: str = "") -> None:
        self.messages.append({"role": "user", "content": user})
        self.messages.append({"role": "assistant", "content": reply})
        self.authors.append(engine)

    def clear(self) -> None:
        self.messages.clear()
        self.authors.clear()


def as_curl(turn: Turn) -> str:
    """The request as a curl command; the API key appears as ``$ENV_NAME``, never its value."""
    url = shlex.quote(turn.url.rstrip("/") + turn.path)
    parts = ["curl", "-N", url, "-H", shlex.quote("Content-Type: application/json")]
    if turn.api_key_env:
        parts += ["-H", f'"Authorization: Bearer ${turn.api_key_env}"']
    parts += ["-d", shlex.quote(json.dumps(turn.body, ensure_ascii=False))]
    return " ".join(parts)


def as_json(turn: Turn) -> str:
    return json.dumps(turn.body, ensure_ascii=False, indent=2)


class ModelCache:
    """Served model per engine, from GET /v1/models (first listed)."""

    def __init__(self) -> None:
        self._models: dict[str, list[str]] = {}

    async def models(self, engine: EngineTarget) -> list[str]:
        if engine.name not in self._models:
            client = HTTPClient(engine.url)
            try:
                self._models[engine.name] = await list_models(client, engine.profile.api, engine.api_key, timeout=3.0)
            finally:
                client.close()
        return self._models[engine.name]


TokenFn = Callable[[RequestRecord, str, str, int], None]


async def send_turn(
    engine: EngineTarget,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    params: GenParams,
    *,
    on_token: TokenFn | None = None,
    cancel: Cancellable | None = None,
    engine_state: dict[str, Any] | None = None,
    client: HTTPClient | None = None,
) -> Turn:
    """Stream one chat turn; the returned Turn has the record and its metrics."""
    import time

    api = engine.profile.api
    body, _ = build_body(api, "chat", model, list(messages), params)
    path = endpoint_path(api, "chat")
    rec = RequestRecord(index=0)
    turn = Turn(engine.name, model, [dict(m) for m in messages], body, engine.url, engine.api_key_env, rec,
                path=path, engine_state=dict(engine_state or {}), started_at=time.time())  # fmt: skip
    own = client is None
    cl = client or HTTPClient(engine.url)
    try:
        await stream_request(cl, path, orjson.dumps(body), rec, headers=auth_headers(engine.api_key),
                             keep_text=True, on_token=on_token, cancel=cancel,
                             max_tokens=max_tokens_of(body))  # fmt: skip
    except asyncio.CancelledError:
        rec.cancelled = True
    finally:
        if own:
            cl.close()
    if rec.event_t_ns or not rec.streamed:
        turn.metrics = compute(rec)
    return turn


_MIN_RATE_SPAN_NS = 1_000_000  # a rate over less than 1 ms of arrivals says nothing


def live_stats(rec: RequestRecord, now_ns: int) -> dict[str, float | None]:
    """TTFT so far and running decode tokens/s = (tokens so far - 1) / (now - t_1).

    The token count is the server's usage claim only as the stream client checked it (whole, >= 0,
    within max_tokens and the bytes streamed; ``rec.completion_tokens`` holds nothing else)."""
    ttft = (rec.event_t_ns[0] - rec.t_send_ns) / 1e6 if rec.event_t_ns else None
    n = rec.completion_tokens if rec.completion_tokens else len(rec.event_t_ns)
    tps = None
    if len(rec.event_t_ns) >= 2 and now_ns - rec.event_t_ns[0] >= _MIN_RATE_SPAN_NS:
        tps = (n - 1) / ((now_ns - rec.event_t_ns[0]) / 1e9)
    return {"ttft_ms": ttft, "tok_s": tps, "tokens": float(n)}


def gaps_ms(rec: RequestRecord, last: int = 60) -> list[float]:
    ts = rec.event_t_ns[-(last + 1) :]
    return [(b - a) / 1e6 for a, b in itertools.pairwise(ts)]


def compare(a: Turn, b: Turn) -> list[str]:
    """A short summary of how two engines answered the same request."""
    out: list[str] = []
    ma, mb = a.metrics, b.metrics
    if ma is None or mb is None:
        err = a.record.error or b.record.error
        return ["one of the requests did not stream a token" + (f": {err}" if err else "")]
    if ma.ttft_ms and mb.ttft_ms:
        ratio = mb.ttft_ms / ma.ttft_ms
        out.append(f"TTFT {a.engine} {ma.ttft_ms:.0f} ms vs {b.engine} {mb.ttft_ms:.0f} ms (B/A {ratio:.2f}x)")
    if ma.tpot_ms and mb.tpot_ms:
        da, db = 1000 / ma.tpot_ms, 1000 / mb.tpot_ms
        out.append(f"TPOT {ma.tpot_ms:.1f} vs {mb.tpot_ms:.1f} ms; decode {da:.0f} vs {db:.0f} tok/s")
    out.append(f"output tokens {ma.output_tokens:.0f} vs {mb.output_tokens:.0f}")
    pa, pb = a.record.prompt_tokens, b.record.prompt_tokens
    if pa is not None and pb is not None and pa != pb:
        out.append(f"prompt tokens differ ({pa} vs {pb}): different tokenizer or chat template")
    out.append("replies identical" if a.reply == b.reply else "replies differ")
    return out


__all__ = [
    "Conversation",
    "HTTPError",
    "ModelCache",
    "Turn",
    "as_curl",
    "as_json",
    "compare",
    "gaps_ms",
    "live_stats",
    "parse_params",
    "send_turn",
]
