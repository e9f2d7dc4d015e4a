"""What every simulated engine shares: ground-truth bookkeeping, response shaping, SSE chunk templates.

A flavour subclass encodes one real engine's observable surface (its module says where each fact comes
from): its routes, auth rule, error bodies, chunk layout and its metrics, derived only from the
scheduler's hooks and state.
"""

from __future__ import annotations

import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry

from console.sim.engines.features import KvTransferLog, SpecMode
from console.sim.exposition import Groups, registry
from console.sim.promtext import Family, Histogram, Labels
from console.sim.scheduler import Request, Scheduler, SchedulerConfig, StepOutcome

JSON_CT = "application/json"
_SENTINEL = "\x00sim-token\x00"
_SENTINEL_JSON = orjson.dumps(_SENTINEL)

Loading = Literal["refuse", "refuse-then-503", "503"]
MetricsMount = Literal["plain", "asgi", "custom"]
# prometheus-fastapi-instrumentator as vLLM configures it: default buckets, these handlers skipped.
HTTP_BUCKETS = (0.1, 0.5, 1.0)
HTTP_EXCLUDED = frozenset({"/metrics", "/prometheus/metrics", "/health", "/load", "/ping", "/version",
                           "/server_info", "none"})


@dataclass
class SimOptions:
    engine: str
    model: str
    seed: int = 0
    api_key: str | None = None
    metrics_version: str = "current"
    max_running: int | None = None
    kv_blocks: int | None = None
    speed: float = 1.0
    data_parallel: int = 1  # vLLM only: engine ranks in the exposition (engine="0".."N-1")
    # vLLM only: /metrics rendered at most once per this many seconds (0: every scrape), so many
    # scrapers can share one simulator without its rendering swamping the machine.
    metrics_every: float = 0.0
    # Optional serving features (console/sim/engines/features.py; vLLM and SGLang):
    spec_decode: str = ""  # "K" or "K:P": speculative decoding with K draft tokens, acceptance P
    pd_decode: bool = False  # the decode instance of disaggregated P/D: pulls each prompt's KV
    pd_fail_every: int = 0  # every Nth KV transfer fails (0: none)
    max_lora: int = 0  # LoRA with this many adapter slots (0: off)
    # SGLang only: --enable-priority-scheduling with this many priority values (0: off): every
    # scheduler series gets priority="", the queue gauges one more series per priority.
    priority_levels: int = 0


@dataclass
class StreamCtx:
    """Per-request facts the chunk builders need."""

    id: str
    created: int
    model: str
    chat: bool
    include_usage: bool
    continuous_usage: bool
    req: Request
    prefix: bytes = b""
    suffix: bytes = b""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Counters:
    """Raw event tallies; each flavour's ``ground_truth`` picks the ones its metrics are built from."""

    arrived: int = 0
    prompt_at_arrival: int = 0  # prompt tokens counted when a request arrives (TGI validation)
    prompt_at_first_token: int = 0  # full prompt length, counted at the first token (vLLM)
    cached_at_first_token: int = 0
    uncached_at_first_token: int = 0  # llama.cpp prompt_tokens_total
    prompt_at_finish: int = 0  # full prompt length, counted when a request finishes (SGLang, trtllm)
    cached_at_finish: int = 0
    gen_live: int = 0  # every token when it is produced (vLLM)
    gen_at_finish: int = 0  # a request's tokens when it finishes (SGLang, trtllm, TGI, llama.cpp)
    prefix_queries: int = 0  # prompt tokens looked up in the prefix cache (first admission)
    prefix_hits: int = 0
    preemptions: int = 0
    finished: int = 0  # finished for any reason but abort/error
    aborted: int = 0
    errors: int = 0  # injected HTTP 500s
    reused_blocks: int = 0
    missed_blocks: int = 0
    finish_reasons: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0, "abort": 0})


class Flavour:
    """Base class of a simulated engine."""

    name: ClassVar[str] = ""
    version: str = ""
    metrics_path: ClassVar[str] = "/metrics"
    # How the engine mounts its exposition (console/sim/exposition.py): prometheus_client's ASGI app
    # ("asgi"), vLLM's instrumentator route in front of it ("plain"), or the engine's own ("custom").
    metrics_mount: ClassVar[MetricsMount] = "custom"
    metrics_multiprocess: ClassVar[bool] = False  # a MultiProcessCollector registry (SGLang, trtllm)
    loading: ClassVar[Loading] = "refuse"
    checks_model: ClassVar[bool] = True
    supports_ignore_eos: ClassVar[bool] = True
    supports_min_tokens: ClassVar[bool] = True
    supports_continuous_usage: ClassVar[bool] = False
    role_chunk: ClassVar[bool] = True  # a role-only first chat chunk
    separate_finish_chunk: ClassVar[bool] = False  # finish_reason in its own empty-delta chunk
    # False: a natural stop's last token is the EOS token, counted in usage but streamed as "" (vLLM).
    eos_visible: ClassVar[bool] = True
    default_block_size: ClassVar[int] = 16
    default_max_running: ClassVar[int] = 64
    default_kv_blocks: ClassVar[int] = 2048  # in 16-token units (converted for other block sizes)
    max_model_len: ClassVar[int] = 8192

    def __init__(self, opts: SimOptions) -> None:
        self.opts = opts
        self.model = opts.model
        self.start_time = time.time()
        self.c = Counters()
        self.spec = SpecMode.parse(opts.spec_decode) if opts.spec_decode else None
        self.kv_log = KvTransferLog(opts.pd_fail_every) if opts.pd_decode else None
        self.recent: deque[dict[str, Any]] = deque(maxlen=5000)
        bs = self.default_block_size
        kv16 = opts.kv_blocks if opts.kv_blocks is not None else self.default_kv_blocks
        self.sched_config = SchedulerConfig(
            max_running=opts.max_running or self.default_max_running,
            kv_blocks=max(1, kv16 * 16 // bs),
            block_size=bs,
            max_model_len=self.max_model_len,
            speed=opts.speed,
        )
        self.scheduler = Scheduler(self.sched_config, self)
        self.last_step: StepOutcome | None = None
        self.http_requests: dict[tuple[str, str, str], int] = {}
        self.http_durations: dict[tuple[str, str], Histogram] = {}

    # ------------------------------------------------------------------ observer hooks
    def on_arrival(self, req: Request, now: float) -> None:
        self.c.arrived += 1
        self.c.prompt_at_arrival += req.prompt_len

    def on_scheduled(self, req: Request, now: float, queried: int, hits: int) -> None:
        self.c.prefix_queries += queried
        self.c.prefix_hits += hits

    def on_first_token(self, req: Request, t: float) -> None:
        if self.kv_log is not None:
            self.kv_log.pull(req.prompt_len)
        self.c.prompt_at_first_token += req.prompt_len
        self.c.cached_at_first_token += req.cached_tokens
        self.c.uncached_at_first_token += req.prompt_len - req.cached_tokens
        self.c.gen_live += 1

    def on_token(self, req: Request, t: float, gap: float) -> None:
        self.c.gen_live += 1

    def on_finish(self, req: Request, t: float) -> None:
        reason = req.finish_reason or "stop"
        self.c.finish_reasons[reason] = self.c.finish_reasons.get(reason, 0) + 1
        if reason == "abort":
            self.c.aborted += 1
        else:
            self.c.finished += 1
        self.c.prompt_at_finish += req.prompt_len
        self.c.cached_at_finish += req.cached_tokens
        self.c.gen_at_finish += req.generated
        ft = req.first_token
        self.recent.append(
            {
                "id": req.id,
                "arrival": req.arrival,
                "first_token": ft,
                "finish": t,
                "prompt_tokens": req.prompt_len,
                "cached_tokens": req.cached_tokens,
                "completion_tokens": req.generated,
                "ttft": None if ft is None else ft - req.arrival,
                "e2e": t - req.arrival,
                "queue_time": None if req.scheduled is None else req.scheduled - req.arrival,
                "finish_reason": reason,
            }
        )

    def on_preempt(self, req: Request, now: float) -> None:
        self.c.preemptions += 1

    def on_step(self, s: StepOutcome) -> None:
        self.c.reused_blocks += s.reused_blocks
        self.c.missed_blocks += s.missed_blocks
        self.last_step = s

    def on_http(self, handler: str, method: str, status: int, seconds: float) -> None:
        """Every HTTP request (for engines whose /metrics carries prometheus-fastapi-instrumentator series)."""
        if handler in HTTP_EXCLUDED:
            return
        key = (handler, method, f"{status // 100}xx")
        self.http_requests[key] = self.http_requests.get(key, 0) + 1
        hkey = (handler, method)
        h = self.http_durations.get(hkey)
        if h is None:
            h = self.http_durations[hkey] = Histogram(HTTP_BUCKETS)
        h.observe(seconds)

    def http_families(self) -> list[Family]:
        return [
            Family("http_requests", "counter", "Total number of requests by method, status and handler.",
                   values=[((("handler", h), ("method", m), ("status", st)), float(v))
                           for (h, m, st), v in sorted(self.http_requests.items())], created=self.start_time),
            Family("http_request_duration_seconds", "histogram",
                   "Latency with only few buckets by handler. Made to be only used if aggregation by handler is "
                   "important.", hists=[((("handler", h), ("method", m)), hh)
                                        for (h, m), hh in sorted(self.http_durations.items())],
                   created=self.start_time),
        ]

    def on_error(self, status: int) -> None:
        """An injected failure answered before the request reached the scheduler."""
        self.c.errors += 1

    # ------------------------------------------------------------------ ground truth
    def ground_truth(self) -> dict[str, int]:
        """Counters for ``/_sim/state``, in this engine's own meaning (see subclasses)."""
        raise NotImplementedError

    def truth(self, *, prompt: int, generation: int, cached: int) -> dict[str, int]:
        """The ``ground_truth`` document. Engines differ in when they count prompt, generated and
        cached tokens (the arguments); the other counters mean the same everywhere."""
        c = self.c
        return {
            "prompt_tokens": prompt,
            "generation_tokens": generation,
            "prefix_cache_queries": c.prefix_queries,
            "prefix_cache_hits": c.prefix_hits,
            "cached_prompt_tokens": cached,
            "preemptions": c.preemptions,
            "requests_finished": c.finished,
            "requests_failed": c.aborted + c.errors,
        }

    def state(self, *, requests: bool = True) -> dict[str, Any]:
        """Ground truth; ``requests=False`` leaves out the finished-request records (cheap to poll often)."""
        s = self.scheduler
        out = {
            "engine": self.name,
            "model": self.model,
            "time": time.time(),
            "running": len(s.running),
            "waiting": len(s.waiting),
            "kv_usage": s.kv_usage,
            "kv_blocks_total": s.pool.num_blocks,
            "kv_blocks_used": s.pool.num_used,
            "block_size": s.config.block_size,
            "counters": self.ground_truth(),
        }
        if requests:
            out["requests"] = list(self.recent)
        return out

    # ------------------------------------------------------------------ metrics
    def metrics_families(self) -> list[Family]:
        raise NotImplementedError

    def metrics_groups(self) -> Groups:
        """``(families, with _created)`` in the order the engine's prometheus_client registry yields them."""
        raise NotImplementedError

    def metrics_registry(self) -> CollectorRegistry:
        """The registry the metrics mount serves (read at every scrape)."""
        return registry(self.metrics_groups, multiprocess=self.metrics_multiprocess)

    def render_metrics(self, accept: str = "") -> web.Response:
        """The whole answer, for engines that do not use prometheus_client (``metrics_mount = "custom"``)."""
        raise NotImplementedError

    def labels(self) -> Labels:
        return (("model_name", self.model),)

    # ------------------------------------------------------------------ HTTP behaviour
    def auth_required(self, path: str) -> bool:
        return False

    def auth_ok(self, request: web.Request) -> bool:
        key = self.opts.api_key
        return key is None or request.headers.get("Authorization", "") == f"Bearer {key}"

    def unauthorized(self) -> web.Response:
        return json_response({"error": "Unauthorized"}, 401)

    def error(self, status: int, message: str, kind: str) -> web.Response:
        """The engine's error body. ``kind``: bad_request | not_found | server_error | unavailable."""
        raise NotImplementedError

    def bad_json(self, detail: str) -> web.Response:
        return self.error(400, f"JSON decode error: {detail}", "bad_request")

    def validation_error(self, message: str) -> web.Response:
        """A well-formed request with a bad value."""
        return self.error(400, message, "bad_request")

    def schema_error(self, message: str) -> web.Response:
        """A body that does not have the request's shape (missing field, wrong type)."""
        return self.validation_error(message)

    def context_error(self, prompt_tokens: int, limit: int) -> web.Response:
        return self.error(400, f"This model's maximum context length is {limit} tokens. However, you requested "
                               f"{prompt_tokens} tokens in the messages. Please reduce the length of the messages.",
                          "bad_request")

    def unknown_model(self, name: str) -> web.Response:
        return self.error(404, f"The model `{name}` does not exist.", "not_found")

    def unknown_fields(self, body: dict[str, Any], chat: bool) -> list[str]:
        """Request fields the engine rejects (only trtllm-serve is strict)."""
        return []

    def models_payload(self) -> dict[str, Any]:
        raise NotImplementedError

    def health_ok(self) -> web.Response:
        return web.Response(status=200)

    def add_routes(self, app: web.Application, server: Any) -> None:
        """Identity and engine-specific routes; ``server`` is the SimServer."""

    # ------------------------------------------------------------------ responses
    def new_id(self, chat: bool) -> str:
        return ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(16)

    def usage(self, req: Request) -> dict[str, Any]:
        p, c = req.prompt_len, req.generated
        return {"prompt_tokens": p, "total_tokens": p + c, "completion_tokens": c, "prompt_tokens_details": None}

    def chat_chunk(self, ctx: StreamCtx, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": ctx.id,
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def text_chunk(self, ctx: StreamCtx, text: str, finish: str | None) -> dict[str, Any]:
        return {
            "id": ctx.id,
            "object": "text_completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}],
        }

    def content_delta(self, text: str) -> dict[str, Any]:
        return {"content": text}

    def role_delta(self) -> dict[str, Any]:
        return {"role": "assistant", "content": ""}

    def finish_delta(self) -> dict[str, Any]:
        return {}

    def usage_chunk(self, ctx: StreamCtx) -> dict[str, Any]:
        return {
            "id": ctx.id,
            "object": "chat.completion.chunk" if ctx.chat else "text_completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [],
            "usage": self.usage(ctx.req),
        }

    def with_running_usage(self, chunk: dict[str, Any], ctx: StreamCtx) -> dict[str, Any]:
        """vLLM/SGLang ``continuous_usage_stats``: usage so far on every chunk."""
        usage = self.usage(ctx.req)
        sent = int(ctx.extra.get("sent", 0))
        usage["completion_tokens"] = sent
        usage["total_tokens"] = usage["prompt_tokens"] + sent
        chunk["usage"] = usage
        return chunk

    def chat_response(self, ctx: StreamCtx, text: str) -> dict[str, Any]:
        req = ctx.req
        return {
            "id": ctx.id,
            "object": "chat.completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": req.finish_reason,
                }
            ],
            "usage": self.usage(req),
        }

    def text_response(self, ctx: StreamCtx, text: str) -> dict[str, Any]:
        req = ctx.req
        return {
            "id": ctx.id,
            "object": "text_completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": req.finish_reason}],
            "usage": self.usage(req),
        }

    def stream_headers(self) -> dict[str, str]:
        return {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}

    # ---- SSE framing (hot path) ----
    def prepare_stream(self, ctx: StreamCtx) -> None:
        """Pre-split the per-token chunk around its content so each token is one bytes join."""
        if ctx.chat:
            tmpl = self.chat_chunk(ctx, self.content_delta(_SENTINEL), None)
        else:
            tmpl = self.text_chunk(ctx, _SENTINEL, None)
        raw = orjson.dumps(tmpl)
        pre, post = raw.split(_SENTINEL_JSON)
        ctx.prefix = b"data: " + pre
        ctx.suffix = post + b"\n\n"

    def sse_head(self, ctx: StreamCtx) -> bytes:
        if ctx.chat and self.role_chunk:
            return self._sse(self._maybe_usage(self.chat_chunk(ctx, self.role_delta(), None), ctx))
        return b""

    def sse_token(self, ctx: StreamCtx, word_json: bytes, text: str, finish: str | None) -> bytes:
        if finish is None and not ctx.continuous_usage:
            return ctx.prefix + word_json + ctx.suffix
        fin = None if self.separate_finish_chunk else finish
        chunk = self.chat_chunk(ctx, self.content_delta(text), fin) if ctx.chat else self.text_chunk(ctx, text, fin)
        return self._sse(self._maybe_usage(chunk, ctx))

    def sse_tail(self, ctx: StreamCtx, finish: str) -> bytes:
        out = []
        if self.separate_finish_chunk or ctx.req.generated == 0:
            chunk = self.chat_chunk(ctx, self.finish_delta(), finish) if ctx.chat else self.text_chunk(ctx, "", finish)
            out.append(self._sse(self._maybe_usage(self.decorate_finish_chunk(chunk, ctx), ctx)))
        if ctx.include_usage:
            out.append(self._sse(self.usage_chunk(ctx)))
        out.append(b"data: [DONE]\n\n")
        return b"".join(out)

    def decorate_finish_chunk(self, chunk: dict[str, Any], ctx: StreamCtx) -> dict[str, Any]:
        return chunk

    def _maybe_usage(self, chunk: dict[str, Any], ctx: StreamCtx) -> dict[str, Any]:
        if ctx.continuous_usage:
            return self.with_running_usage(chunk, ctx)
        return chunk

    @staticmethod
    def _sse(obj: Any) -> bytes:
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    # ------------------------------------------------------------------ logs
    def startup_lines(self, host: str, port: int) -> list[str]:
        return []

    def access_line(self, peer: str, method: str, path: str, status: int) -> str:
        return f'INFO:     {peer} - "{method} {path} HTTP/1.1" {status} {_REASONS.get(status, "")}'.rstrip()

    def periodic_line(self) -> str | None:
        return None


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 422: "Unprocessable Entity",
            500: "Internal Server Error", 503: "Service Unavailable"}


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type=JSON_CT, headers=headers)


def counter(name: str, help_: str, value: float, labels: Labels, created: float) -> Family:
    return Family(name, "counter", help_, values=[(labels, float(value))], created=created)


def gauge(name: str, help_: str, value: float, labels: Labels) -> Family:
    return Family(name, "gauge", help_, values=[(labels, float(value))])


def hist(name: str, help_: str, h: Histogram, labels: Labels, created: float) -> Family:
    return Family(name, "histogram", help_, hists=[(labels, h)], created=created)


def buckets_1_2_5(limit: int) -> list[float]:
    """vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to ``limit``."""
    out: list[float] = []
    exp = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exp
            if v > limit:
                return out
            out.append(float(v))
        exp += 1
