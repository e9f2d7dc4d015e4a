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
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns as _perf_ns  # the clock of every request timestamp (http.py's too)
from typing import Any, Literal

import orjson

from console.client.sse import DONE, MAX_EVENT_BYTES, SSEEvent, SSEEventTooLarge, SSEParser
from console.client.timing import RequestRecord
from console.profiles import ApiSpec
from console.secrets import scrub
from console.transport.http import Cancellable, HTTPClient, HTTPError, NoAnswer, StreamCancelled

EndpointKind = Literal["chat", "completions"]
LengthMode = Literal["ignore_eos", "min_tokens", "natural"]


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

# A chat template adds tokens the request body does not show; no template adds this many.
PROMPT_TOKENS_SLACK = 65536
_ERROR_TEXT = 300  # characters of an engine's error text kept in a record


class StreamRejected(HTTPError):
    """The server's answer broke the protocol (a malformed chunk, a bad usage claim, an oversized
    event): the request fails with this reason. Raised inside the sink, it makes the transport
    abort the connection, so a broken stream is not read to its end."""


def _bad(reason: str) -> StreamRejected:
    return StreamRejected(reason)


def _show(value: Any) -> str:
    """A short, JSON-like rendering of a value from the server (for a failure reason)."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def token_count(value: Any, what: str, limit: int | None, why: str) -> int:
    """A usage number the server claims, as an int: finite, integral, >= 0 and at most ``limit``
    (``why`` names that bound). Raises ``StreamRejected`` ("bad usage: ...") otherwise."""
    if type(value) is int:
        n = value
    elif type(value) is float and math.isfinite(value) and value.is_integer():
        n = int(value)
    else:
        raise _bad(f"bad usage: {what} is {_show(value)} (a whole number expected)")
    if n < 0:
        raise _bad(f"bad usage: {what} is {n} (negative)")
    if limit is not None and n > limit:
        raise _bad(f"bad usage: {what} {_show(value)} exceeds {why} ({limit})")
    return n


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str | None:
    v = obj.get(key)
    if v is None or type(v) is str:
        return v
    raise _bad(f"malformed chunk: {where}.{key} is {_type_name(v)} {_show(v)}, expected a string")


def max_tokens_of(body: Mapping[str, Any]) -> int | None:
    """The output length a request body asks for at most (None: the engine's own limit)."""
    vals = [v for k in ("max_tokens", "max_completion_tokens", "max_new_tokens")
            if type(v := body.get(k)) is int and v >= 0]  # fmt: skip
    return min(vals) if vals else None


class OpenAIStreamSink:
    """Turns SSE bytes into a ``RequestRecord``: token-bearing event times, usage, text, errors.

    Everything the server sends is a claim: chunk shapes and types are checked, usage counts must be
    whole, >= 0, within ``max_tokens`` and within the bytes actually streamed (a token costs at least
    one byte of the stream). The first violation fails the request with its reason (``rec.error``)
    and aborts the stream; nothing per claimed token is ever allocated."""

    __slots__ = (
        "_bytes", "_failed", "_last_ct", "_loads", "_nonstream", "_nonstream_size", "_parser", "keep_text",
        "max_tokens", "on_token", "prompt_limit", "rec",
    )  # fmt: skip

    def __init__(
        self,
        rec: RequestRecord,
        *,
        keep_text: bool = False,
        on_token: TokenCallback | None = None,
        max_tokens: int | None = None,
        prompt_limit: int | None = None,
    ) -> None:
        self.rec = rec
        self.keep_text = keep_text or on_token is not None
        self.on_token = on_token
        self.max_tokens = max_tokens
        self.prompt_limit = prompt_limit
        self._parser = SSEParser()
        self._last_ct = 0
        self._bytes = 0
        self._failed = False
        self._nonstream: list[bytes] | None = []
        self._nonstream_size = 0
        self._loads = orjson.loads

    def on_sent(self, t_ns: int) -> None:
        self.rec.t_send_ns = t_ns

    def on_body(self, data: bytes, t_ns: int) -> None:
        if self._failed:
            return
        self._bytes += len(data)
        try:
            events = self._parser.feed_fast(data)
            if not events:
                if self._nonstream is not None and self._parser.saw_block:
                    self._nonstream = None  # SSE (comments, say), not one JSON body
                if self._nonstream is not None:
                    self._nonstream_size += len(data)
                    if self._nonstream_size <= MAX_EVENT_BYTES:
                        self._nonstream.append(data)
                return
            self._nonstream = None
            self._events(events, t_ns)
        except StreamRejected as exc:
            self._reject(str(exc))
            raise
        except SSEEventTooLarge as exc:
            self._reject(f"malformed stream: {exc}")
            raise StreamRejected(self.rec.error or "") from None
        except Exception as exc:  # a shape no check foresaw: the request fails, the run goes on
            self._reject(f"malformed chunk ({type(exc).__name__}: {str(exc)[:120]})")
            raise StreamRejected(self.rec.error or "") from None

    def _reject(self, reason: str) -> None:
        self._failed = True
        if self.rec.error is None:
            self.rec.error = reason

    def _events(self, events: list[bytes | SSEEvent], t_ns: int) -> None:
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
                    raise _bad(f"malformed chunk: not JSON: {_snippet(ev)}") from None
                if type(obj) is not dict:
                    raise _bad(f"malformed chunk: a JSON {_type_name(obj)}, expected an object")
                self._event(obj, t_ns, False)
            else:
                assert isinstance(ev, SSEEvent)
                if ev.stray:
                    raise _bad(f"malformed stream: a line without data: {_snippet(ev.stray)}")
                if ev.data == DONE:
                    rec.t_done_ns = t_ns
                    continue
                try:
                    obj = loads(ev.data)
                except orjson.JSONDecodeError:
                    if ev.event == "error":
                        if rec.error is None:
                            rec.error = "stream error: " + _text(ev.data)
                        continue
                    raise _bad(f"malformed chunk: not JSON: {_snippet(ev.data)}") from None
                if type(obj) is not dict:
                    raise _bad(f"malformed chunk: a JSON {_type_name(obj)}, expected an object")
                self._event(obj, t_ns, ev.event == "error")

    def _event(self, obj: dict[str, Any], t_ns: int, is_error_event: bool) -> None:
        rec = self.rec
        choices = obj.get("choices")
        content = reasoning = tool = finish = None
        if type(choices) is not list and choices is not None:
            raise _bad(f"malformed chunk: choices is {_type_name(choices)} {_show(choices)}, expected an array")
        if choices:
            c = choices[0]
            if type(c) is not dict:
                raise _bad(f"malformed chunk: choices[0] is {_type_name(c)} {_show(c)}, expected an object")
            delta = c.get("delta")
            if delta is not None:
                if type(delta) is not dict:
                    raise _bad(f"malformed chunk: delta is {_type_name(delta)} {_show(delta)}, expected an object")
                content = delta.get("content")
                if content is not None and type(content) is not str:
                    raise _bad(f"malformed chunk: delta.content is {_type_name(content)} {_show(content)}, "
                               "expected a string")  # fmt: skip
                if not content or self.keep_text:
                    reasoning = _opt_str(delta, "reasoning_content", "delta") or _opt_str(delta, "reasoning", "delta")
                if not content:
                    tool = delta.get("tool_calls")
                    if tool is not None and type(tool) is not list:
                        raise _bad(f"malformed chunk: delta.tool_calls is {_type_name(tool)}, expected an array")
            else:
                content = c.get("text")
                if content is not None and type(content) is not str:
                    raise _bad(f"malformed chunk: choices[0].text is {_type_name(content)} {_show(content)}, "
                               "expected a string")  # fmt: skip
            finish = c.get("finish_reason")
            if finish is not None and type(finish) is not str:
                raise _bad(f"malformed chunk: finish_reason is {_type_name(finish)} {_show(finish)}, expected a string")
            if finish:
                rec.finish_reason = finish[:64]
        elif is_error_event or "error" in obj or obj.get("object") == "error":
            if rec.error is None:
                msg = error_message(obj) or orjson.dumps(obj).decode()
                rec.error = f"stream error: {_clip(msg)}"
            return
        du: int | None = None
        usage = obj.get("usage")
        if usage:
            if type(usage) is not dict:
                raise _bad(f"bad usage: usage is {_type_name(usage)} {_show(usage)}, expected an object")
            du = self._usage(usage)
        elif usage is not None and type(usage) is not dict:
            raise _bad(f"bad usage: usage is {_type_name(usage)} {_show(usage)}, expected an object")
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

    def _usage(self, usage: dict[str, Any]) -> int | None:
        """Check and record a usage object; the completion-token delta since the last one (None: no count).

        With continuous usage this runs for every event: plain ints within their bounds take the
        short way, anything else the full check (which converts a whole float or raises)."""
        rec = self.rec
        du: int | None = None
        ct = usage.get("completion_tokens")
        if ct is not None:
            mt = self.max_tokens
            if type(ct) is not int or ct < self._last_ct or ct > self._bytes or (mt is not None and ct > mt):
                ct = self._completion_tokens(ct)
            du = ct - self._last_ct
            self._last_ct = ct
            rec.completion_tokens = ct
        pt = usage.get("prompt_tokens")
        if pt is not None:
            pl = self.prompt_limit
            if type(pt) is not int or pt < 0 or (pl is not None and pt > pl):
                pt = token_count(pt, "prompt_tokens", pl, "the prompt sent")
            rec.prompt_tokens = pt
        details = usage.get("prompt_tokens_details")
        if details is not None and type(details) is not dict:
            raise _bad(f"bad usage: prompt_tokens_details is {_type_name(details)}, expected an object")
        if details:
            cached = details.get("cached_tokens")
            if cached is not None:
                limit = rec.prompt_tokens if rec.prompt_tokens is not None else self.prompt_limit
                rec.cached_tokens = token_count(cached, "cached_tokens", limit, "prompt_tokens")
        return du

    def _completion_tokens(self, value: Any) -> int:
        ct = token_count(value, "completion_tokens", self.max_tokens, "max_tokens asked")
        if ct > self._bytes:
            raise _bad(f"bad usage: completion_tokens {ct} is more than the {self._bytes} bytes streamed")
        if ct < self._last_ct:
            raise _bad(f"bad usage: completion_tokens went down from {self._last_ct} to {ct}")
        return ct

    def on_end(self, t_ns: int) -> None:
        if self._failed:
            return
        rec = self.rec
        if rec.t_done_ns is None:
            rec.t_done_ns = t_ns
        try:
            if self._nonstream and not rec.event_t_ns:
                self._non_streamed(b"".join(self._nonstream))
        except StreamRejected as exc:
            self._reject(str(exc))
        except Exception as exc:  # never out of the transport's callback
            self._reject(f"malformed response ({type(exc).__name__}: {str(exc)[:120]})")
        self._nonstream = None
        if rec.error is None and rec.streamed and not rec.event_t_ns:
            # Nothing counted as a token: the request would vanish from every count otherwise.
            self._reject("malformed stream: it ended without a token" if self._bytes else "empty response body")

    def _non_streamed(self, body: bytes) -> None:
        """The server ignored ``stream: true`` and sent one JSON body: TTFT = E2E = t_done - t_send."""
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise _bad(f"malformed response: not SSE and not JSON: {_snippet(body)}") from None
        if type(obj) is not dict:
            raise _bad(f"malformed response: a JSON {_type_name(obj)}, expected an object")
        msg = error_message(obj)
        if msg:
            self.rec.error = _clip(msg)
            return
        usage = obj.get("usage")
        if usage is not None and type(usage) is not dict:
            raise _bad(f"bad usage: usage is {_type_name(usage)} {_show(usage)}, expected an object")
        choices = obj.get("choices")
        if type(choices) is not list or not choices or type(choices[0]) is not dict:
            raise _bad(f"malformed response: choices is {_show(choices)}, expected an array of objects")
        c = choices[0]
        msg_obj = c.get("message")
        if msg_obj is not None and type(msg_obj) is not dict:
            raise _bad(f"malformed response: message is {_type_name(msg_obj)}, expected an object")
        text = (_opt_str(msg_obj, "content", "message") if msg_obj else None) or _opt_str(c, "text", "choices[0]")
        finish = _opt_str(c, "finish_reason", "choices[0]")
        if usage:
            self._usage(usage)
        self.rec.streamed = False
        self.rec.text = text or ""
        self.rec.finish_reason = finish[:64] if finish else None


def _snippet(data: bytes) -> str:
    """The start of what the server sent, for a failure reason."""
    text = data[:60].decode("utf-8", "replace")
    return repr(text) + ("..." if len(data) > 60 else "")


def _text(data: bytes) -> str:
    return _clip(data[: _ERROR_TEXT * 4].decode("utf-8", "replace"))


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _ERROR_TEXT else text[: _ERROR_TEXT - 3] + "..."


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
    max_tokens: int | None = None,
) -> RequestRecord:
    """POST one streaming request and fill ``rec``. Never raises for server/transport errors:
    they land in ``rec.error`` (the first reason wins). Cancellation (task cancel or
    ``cancel.cancel()``) closes the connection at once and marks the record cancelled.

    ``max_tokens``: what the body asks for at most (``max_tokens_of``); a usage claim above it fails
    the request. Error texts from the server are scrubbed of credentials here (display code still
    makes them inert)."""
    sink = OpenAIStreamSink(rec, keep_text=keep_text, on_token=on_token, max_tokens=max_tokens,
                            prompt_limit=len(body) + PROMPT_TOKENS_SLACK)  # fmt: skip
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
    except NoAnswer as exc:
        rec.error = rec.error or f"timeout: {exc}"
        return rec
    except HTTPError as exc:
        rec.error = rec.error or str(exc)
        return rec
    finally:
        if rec.error is not None:
            rec.error = scrub(rec.error)
    rec.status = resp.status
    rec.t_headers_ns = resp.t_headers_ns
    if not 200 <= resp.status < 300:
        rec.error = scrub(f"HTTP {resp.status}: {error_text(resp.body, resp.reason)}")
    elif rec.t_done_ns is None:
        rec.t_done_ns = resp.t_end_ns
    return rec


def error_text(body: bytes, reason: str = "") -> str:
    """An error response's message in one line of at most 300 characters: the engine's own message
    when the body is one of the known error shapes, else the start of the body, else the reason."""
    try:
        msg = error_message(orjson.loads(body)) if body else None
    except orjson.JSONDecodeError:
        msg = None
    if msg:
        return _clip(msg)
    return _clip(body[: _ERROR_TEXT * 4].decode("utf-8", "replace")) or _clip(reason)


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
        raise HTTPError(f"GET /v1/models answered HTTP {resp.status}{': ' + scrub(_clip(msg)) if msg else ''}")
    try:
        obj = orjson.loads(resp.body)
    except orjson.JSONDecodeError:
        raise HTTPError("GET /v1/models did not return JSON") from None
    data = obj.get("data") if isinstance(obj, dict) else None
    ids = [str(m.get("id")) for m in data or [] if isinstance(m, dict) and m.get("id")]
    if not ids:
        raise HTTPError("GET /v1/models listed no model")
    return ids
