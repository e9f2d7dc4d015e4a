"""OpenAI-compatible streaming requests (chat and completions) with per-event timing.

Request bodies are the same for every engine, adjusted per engine profile: ``stream_options``
always asks for the final usage chunk (``include_usage``); ``continuous_usage_stats`` only where the profile says the
engine supports it (trtllm-serve rejects unknown fields); a fixed output length is forced with
``ignore_eos`` or ``min_tokens`` where the engine has one, else the run is "natural EOS" and says so.

The sink interprets each SSE event as it is parsed, inside the HTTP protocol's ``data_received``,
with the arrival time of the read that carried it. Error events are understood in each engine's
shape: ``{"error": {...}}`` (vLLM, llama.cpp), ``{"object": "error", "message": ...}`` (SGLang,
trtllm-serve), ``{"error": "msg", "error_type": ...}`` (TGI, trtllm validation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns as _perf_ns  # the clock of every request timestamp (http.py's too)
from typing import Any, Literal

import orjson

from console.client.sse import DONE, SSEEvent, SSEParser
from console.client.timing import RequestRecord
from console.profiles import ApiSpec
from console.transport.http import Cancellable, HTTPClient, HTTPError, StreamCancelled

EndpointKind = Literal["chat", "completions"]
LengthMode = Literal["ignore_eos", "min_tokens", "natural"]
_NONSTREAM_KEEP = 256 * 1024


@dataclass(frozen=True, slots=True)
class GenParams:
    """Sampling parameters, identical for every engine of an A/B run."""

    max_tokens: int | None = None
    temperature: float = 0.0
    fixed_length: bool = False  # force exactly max_tokens (ignore_eos / min_tokens)
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # merged last (user --extra-body)


def length_mode(api: ApiSpec, fixed_length: bool) -> LengthMode:
    """How a fixed output length is forced on this engine (recorded in every result)."""
    if not fixed_length:
        return "natural"
    if api.supports_ignore_eos:
        return "ignore_eos"
    if api.supports_min_tokens:
        return "min_tokens"
    return "natural"


def build_body(
    api: ApiSpec,
    kind: EndpointKind,
    model: str,
    prompt: str | Sequence[Mapping[str, Any]],
    params: GenParams,
    *,
    stream: bool = True,
) -> tuple[dict[str, Any], LengthMode]:
    """The JSON body for one request and the length mode it uses."""
    body: dict[str, Any] = {"model": model}
    if kind == "chat":
        body["messages"] = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    else:
        body["prompt"] = prompt if isinstance(prompt, str) else _flatten(prompt)
    body["stream"] = stream
    if stream:
        opts: dict[str, Any] = {"include_usage": True}
        if api.supports_continuous_usage:
            opts["continuous_usage_stats"] = True
        body["stream_options"] = opts
    if params.max_tokens is not None:
        body["max_tokens"] = params.max_tokens  # accepted by all five engines on both endpoints
    body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    mode = length_mode(api, params.fixed_length and params.max_tokens is not None)
    if mode == "ignore_eos":
        body["ignore_eos"] = True
    elif mode == "min_tokens":
        body["min_tokens"] = params.max_tokens
    body.update(params.extra)
    return body, mode


def _flatten(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n\n".join(str(m.get("content", "")) for m in messages)


def endpoint_path(api: ApiSpec, kind: EndpointKind) -> str:
    return f"{api.base_path.rstrip('/')}/{'chat/completions' if kind == 'chat' else 'completions'}"


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def error_message(obj: Any) -> str | None:
    """The message of an error body/event in any engine's shape, else None."""
    if not isinstance(obj, dict):
        return None
    err = obj.get("error")
    if isinstance(err, dict):
        msg = err.get("message") or err.get("msg") or orjson.dumps(err).decode()
        typ = err.get("type")
        return f"{msg} ({typ})" if typ else str(msg)
    if isinstance(err, str):
        typ = obj.get("error_type")
        return f"{err} ({typ})" if typ else err
    if obj.get("object") == "error":
        msg = obj.get("message", "error")
        typ = obj.get("type")
        return f"{msg} ({typ})" if typ else str(msg)
    return None


TokenCallback = Callable[[RequestRecord, str, str, int], None]  # (record, content, reasoning, t_ns)


class OpenAIStreamSink:
    """Turns SSE bytes into a ``RequestRecord``: token-bearing event times, usage, text, errors."""

    __slots__ = ("_last_ct", "_loads", "_nonstream", "_parser", "keep_text", "on_token", "rec")

    def __init__(self, rec: RequestRecord, *, keep_text: bool = False, on_token: TokenCallback | None = None) -> None:
        self.rec = rec
        self.keep_text = keep_text or on_token is not None
        self.on_token = on_token
        self._parser = SSEParser()
        self._last_ct = 0
        self._nonstream: list[bytes] | None = []
        self._loads = orjson.loads

    def on_sent(self, t_ns: int) -> None:
        self.rec.t_send_ns = t_ns

    def on_body(self, data: bytes, t_ns: int) -> None:
        events = self._parser.feed_fast(data)
        if not events:
            if self._nonstream is not None and len(data) < _NONSTREAM_KEEP:
                self._nonstream.append(data)
            return
        self._nonstream = None
        rec = self.rec
        if rec.t_first_event_ns is None:
            rec.t_first_event_ns = t_ns
        loads = self._loads
        for ev in events:
            if type(ev) is bytes:
                if ev == DONE:
                    rec.t_done_ns = t_ns
                    continue
                try:
                    obj = loads(ev)
                except orjson.JSONDecodeError:
                    continue
                if type(obj) is dict:
                    self._event(obj, t_ns, False)
            else:
                assert isinstance(ev, SSEEvent)
                if ev.data == DONE:
                    rec.t_done_ns = t_ns
                    continue
                try:
                    obj = loads(ev.data)
                except orjson.JSONDecodeError:
                    if ev.event == "error":
                        rec.error = "stream error: " + ev.data.decode("utf-8", "replace")[:500]
                    continue
                if type(obj) is dict:
                    self._event(obj, t_ns, ev.event == "error")

    def _event(self, obj: dict[str, Any], t_ns: int, is_error_event: bool) -> None:
        rec = self.rec
        choices = obj.get("choices")
        content = reasoning = tool = finish = None
        if choices:
            c = choices[0]
            delta = c.get("delta")
            if delta is not None:
                content = delta.get("content")
                if not content:
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                    tool = delta.get("tool_calls")
                elif self.keep_text:
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            else:
                content = c.get("text")
            finish = c.get("finish_reason")
            if finish:
                rec.finish_reason = finish
        elif is_error_event or "error" in obj or obj.get("object") == "error":
            msg = error_message(obj) or orjson.dumps(obj).decode()[:500]
            rec.error = f"stream error: {msg}"
            return
        du: int | None = None
        usage = obj.get("usage")
        if usage:
            ct = usage.get("completion_tokens")
            if ct is not None:
                du = ct - self._last_ct
                self._last_ct = ct
                rec.completion_tokens = ct
            pt = usage.get("prompt_tokens")
            if pt is not None:
                rec.prompt_tokens = pt
            details = usage.get("prompt_tokens_details")
            if details:
                cached = details.get("cached_tokens")
                if cached is not None:
                    rec.cached_tokens = cached
        if not (content or reasoning or tool):
            if not (du and choices):
                return
            # Tokens with no text (special tokens, EOS) count only when usage comes with every
            # chunk; a usage total on the finish chunk of a final-usage-only stream is not a token.
            ev_usage = rec.event_usage
            if not ((not ev_usage and not finish) or (ev_usage and ev_usage[-1] is not None)):
                return
        rec.event_t_ns.append(t_ns)
        rec.event_usage.append(du if (usage and choices) else None)
        if content and rec.t_first_visible_ns is None:
            rec.t_first_visible_ns = t_ns
        if self.keep_text:
            if content:
                rec.text += content
            if reasoning:
                rec.reasoning += reasoning
            if self.on_token is not None:
                self.on_token(rec, content or "", reasoning or "", t_ns)

    def on_end(self, t_ns: int) -> None:
        rec = self.rec
        if rec.t_done_ns is None:
            rec.t_done_ns = t_ns
        if self._nonstream and not rec.event_t_ns:
            self._non_streamed(b"".join(self._nonstream), t_ns)

    def _non_streamed(self, body: bytes, t_ns: int) -> None:
        """The server ignored ``stream: true`` and sent one JSON body: TTFT = E2E = t_done - t_send."""
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            return
        if not isinstance(obj, dict):
            return
        msg = error_message(obj)
        if msg:
            self.rec.error = msg
            return
        self.rec.streamed = False
        usage = obj.get("usage") or {}
        self.rec.prompt_tokens = usage.get("prompt_tokens")
        self.rec.completion_tokens = usage.get("completion_tokens")
        choices = obj.get("choices") or [{}]
        c = choices[0]
        msg_obj = c.get("message") or {}
        self.rec.text = msg_obj.get("content") or c.get("text") or ""
        self.rec.finish_reason = c.get("finish_reason")


async def stream_request(
    client: HTTPClient,
    path: str,
    body: bytes,
    rec: RequestRecord,
    *,
    headers: Mapping[str, str] | None = None,
    keep_text: bool = False,
    on_token: TokenCallback | None = None,
    cancel: Cancellable | None = None,
    timeout: float | None = None,
) -> RequestRecord:
    """POST one streaming request and fill ``rec``. Never raises for server/transport errors:
    they land in ``rec.error``. Cancellation (task cancel or ``cancel.cancel()``) closes the
    connection at once and marks the record cancelled."""
    sink = OpenAIStreamSink(rec, keep_text=keep_text, on_token=on_token)
    hdrs = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if headers:
        hdrs.update(headers)
    rec.t_send_ns = _perf_ns()  # refined by the sink to the moment the bytes are written
    try:
        resp = await client.request("POST", path, body=body, headers=hdrs, sink=sink, on_sent=cancel, timeout=timeout)
    except StreamCancelled:
        rec.cancelled = True
        return rec
    except asyncio.CancelledError:
        rec.cancelled = True
        raise
    except HTTPError as exc:
        rec.error = str(exc)
        return rec
    rec.status = resp.status
    rec.t_headers_ns = resp.t_headers_ns
    if not 200 <= resp.status < 300:
        try:
            msg = error_message(orjson.loads(resp.body)) if resp.body else None
        except orjson.JSONDecodeError:
            msg = None
        text = msg or resp.body.decode("utf-8", "replace").strip()[:300] or resp.reason
        rec.error = f"HTTP {resp.status}: {text}"
    elif rec.t_done_ns is None:
        rec.t_done_ns = resp.t_end_ns
    return rec


async def list_models(
    client: HTTPClient, api: ApiSpec, api_key: str | None, *, timeout: float = 5.0
) -> list[str]:
    """GET {base}/models -> served model ids. Raises HTTPError with a one-line reason."""
    resp = await client.get(f"{api.base_path.rstrip('/')}/models", headers=auth_headers(api_key), timeout=timeout)
    if resp.status != 200:
        try:
            msg = error_message(orjson.loads(resp.body)) if resp.body else None
        except orjson.JSONDecodeError:
            msg = None
        raise HTTPError(f"GET /v1/models answered HTTP {resp.status}{': ' + msg if msg else ''}")
    try:
        obj = orjson.loads(resp.body)
    except orjson.JSONDecodeError:
        raise HTTPError("GET /v1/models did not return JSON") from None
    data = obj.get("data") if isinstance(obj, dict) else None
    ids = [str(m.get("id")) for m in data or [] if isinstance(m, dict) and m.get("id")]
    if not ids:
        raise HTTPError("GET /v1/models listed no model")
    return ids
