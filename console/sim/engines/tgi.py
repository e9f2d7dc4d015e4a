"""Hugging Face TGI v3 router. https://github.com/huggingface/text-generation-inference
(router/src/server.rs, docs/source/reference/metrics.md).

Metrics are rendered like the Rust ``metrics-exporter-prometheus``: literal counter names, no
``_created``, no HELP, no model label; no KV-usage, TTFT, prefix or preemption metric exists.
The ``model`` request field is ignored; ``ignore_eos``/``min_tokens`` are not supported.

Ground-truth counters (``/_sim/state``):
- prompt_tokens: prompt length recorded at validation, i.e. when a request arrives
  = tgi_request_input_length_sum.
- generation_tokens: a request's tokens, added when it finishes = tgi_request_generated_tokens_sum.
- prefix_cache_queries / hits, cached_prompt_tokens: what the simulated cache did (TGI has a
  prefix cache but no metric for it).
- preemptions: scheduler preemptions (no TGI metric).
- requests_finished = tgi_request_success; requests_failed = aborted requests plus injected HTTP 500s
  (tgi_request_failure counts the 500s).
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from console.sim.engines.base import Flavour, SimOptions, StreamCtx, json_response
from console.sim.promtext import Family, Histogram, render_rust
from console.sim.scheduler import Request, StepOutcome

DURATION_BUCKETS = [0.0001 * 1.5**i for i in range(1, 36)]


class TgiFlavour(Flavour):
    name = "tgi"
    version = "3.3.7"
    checks_model = False
    supports_ignore_eos = False
    supports_min_tokens = False
    role_chunk = False
    default_max_running = 128
    default_kv_blocks = 2048

    def __init__(self, opts: SimOptions) -> None:
        super().__init__(opts)
        self.max_input_tokens = self.max_model_len - 1
        self.max_total_tokens = self.max_model_len
        in_b = [self.max_input_tokens / 100.0 * (x + 1) for x in range(100)]
        tot_b = [self.max_total_tokens / 100.0 * (x + 1) for x in range(100)]
        self.h = {
            "duration": Histogram(DURATION_BUCKETS),
            "validation": Histogram(DURATION_BUCKETS),
            "queue": Histogram(DURATION_BUCKETS),
            "inference": Histogram(DURATION_BUCKETS),
            "tpot": Histogram(DURATION_BUCKETS),
            "input_length": Histogram(in_b),
            "generated": Histogram(tot_b),
            "max_new": Histogram(tot_b),
            "next_size": Histogram([float(x + 1) for x in range(1024)]),
        }
        self.fwd = {"prefill": Histogram(DURATION_BUCKETS), "decode": Histogram(DURATION_BUCKETS)}
        self.batch_count = {"prefill": 0, "decode": 0}
        self.request_count = 0
        self.failures = 0

    def on_arrival(self, req: Request, now: float) -> None:
        super().on_arrival(req, now)
        self.request_count += 1
        # Validation = parsing + tokenizing, measured from when the HTTP request came in.
        self.h["validation"].observe(max(0.0, now - (req.received if req.received is not None else now)))
        self.h["input_length"].observe(req.prompt_len)
        self.h["max_new"].observe(req.max_tokens)

    def on_scheduled(self, req: Request, now: float, queried: int, hits: int) -> None:
        super().on_scheduled(req, now, queried, hits)
        self.h["queue"].observe(now - req.arrival)

    def on_finish(self, req: Request, t: float) -> None:
        super().on_finish(req, t)
        if req.finish_reason == "abort" or req.first_token is None:
            return
        sched = req.scheduled if req.scheduled is not None else req.arrival
        self.h["duration"].observe(t - req.arrival)
        self.h["inference"].observe(t - sched)
        self.h["tpot"].observe((t - sched) / max(1, req.generated))
        self.h["generated"].observe(req.generated)

    def on_step(self, s: StepOutcome) -> None:
        super().on_step(s)
        if s.new_requests:
            self.batch_count["prefill"] += 1
            self.fwd["prefill"].observe(s.duration)
            self.h["next_size"].observe(s.new_requests)
        if s.batch_size > s.new_requests:
            self.batch_count["decode"] += 1
            self.fwd["decode"].observe(s.duration)

    def on_error(self, status: int) -> None:
        super().on_error(status)
        self.request_count += 1
        self.failures += 1

    def ground_truth(self) -> dict[str, int]:
        c = self.c
        return self.truth(prompt=c.prompt_at_arrival, generation=c.gen_at_finish, cached=c.cached_at_first_token)

    def metrics_families(self) -> list[Family]:
        s = self.scheduler
        h = self.h
        batch_max_tokens = max((r.num_tokens for r in s.running), default=0)
        fams = [
            Family("tgi_request_count", "counter", "", values=[((), float(self.request_count))]),
            Family("tgi_request_success", "counter", "", values=[((), float(self.c.finished))]),
            Family("tgi_queue_size", "gauge", "", values=[((), float(len(s.waiting)))]),
            Family("tgi_batch_current_size", "gauge", "", values=[((), float(len(s.running)))]),
            Family("tgi_batch_current_max_tokens", "gauge", "", values=[((), float(batch_max_tokens))]),
            Family("tgi_batch_inference_count", "counter", "",
                   values=[((("method", m),), float(v)) for m, v in self.batch_count.items()]),
            Family("tgi_batch_inference_success", "counter", "",
                   values=[((("method", m),), float(v)) for m, v in self.batch_count.items()]),
            Family("tgi_request_duration", "histogram", "", hists=[((), h["duration"])]),
            Family("tgi_request_validation_duration", "histogram", "", hists=[((), h["validation"])]),
            Family("tgi_request_queue_duration", "histogram", "", hists=[((), h["queue"])]),
            Family("tgi_request_inference_duration", "histogram", "", hists=[((), h["inference"])]),
            Family("tgi_request_mean_time_per_token_duration", "histogram", "", hists=[((), h["tpot"])]),
            Family("tgi_request_input_length", "histogram", "", hists=[((), h["input_length"])]),
            Family("tgi_request_generated_tokens", "histogram", "", hists=[((), h["generated"])]),
            Family("tgi_request_max_new_tokens", "histogram", "", hists=[((), h["max_new"])]),
            Family("tgi_batch_next_size", "histogram", "", hists=[((), h["next_size"])]),
            Family("tgi_batch_forward_duration", "histogram", "",
                   hists=[((("method", m),), hh) for m, hh in self.fwd.items()]),
            Family("tgi_batch_inference_duration", "histogram", "",
                   hists=[((("method", m),), hh) for m, hh in self.fwd.items()]),
        ]
        if self.failures:
            fams.append(Family("tgi_request_failure", "counter", "",
                               values=[((("err", "generation"),), float(self.failures))]))
        return fams

    def render_metrics(self, accept: str = "") -> web.Response:
        return web.Response(text=render_rust(self.metrics_families()), content_type="text/plain")

    # ---- HTTP ----
    def auth_required(self, path: str) -> bool:
        return self.opts.api_key is not None and path in (
            "/", "/generate", "/generate_stream", "/v1/chat/completions", "/v1/completions", "/vertex",
            "/invocations", "/tokenize",
        )

    def auth_ok(self, request: web.Request) -> bool:
        return request.headers.get("Authorization", "").lower() == f"bearer {self.opts.api_key}".lower()

    def unauthorized(self) -> web.Response:
        return web.Response(status=401)

    def error(self, status: int, message: str, kind: str) -> web.Response:
        types = {"bad_request": "validation", "server_error": "incomplete_generation", "unavailable": "unhealthy",
                 "not_found": "validation"}
        if kind == "bad_request":
            status = 422
        return json_response({"error": message, "error_type": types.get(kind, kind)}, status)

    def bad_json(self, detail: str) -> web.Response:
        return web.Response(status=400, text=f"Failed to parse the request body as JSON: {detail}",
                            content_type="text/plain")

    def schema_error(self, message: str) -> web.Response:
        # axum's Json extractor rejects the body before TGI's handler runs: plain text.
        return web.Response(status=422, text=f"Failed to deserialize the JSON body into the target type: {message}",
                            content_type="text/plain")

    def validation_error(self, message: str) -> web.Response:
        return json_response({"error": f"Input validation error: {message}", "error_type": "validation"}, 422)

    def context_error(self, prompt_tokens: int, limit: int) -> web.Response:
        return self.validation_error(f"`inputs` must have less than {limit} tokens. Given: {prompt_tokens}")

    def models_payload(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0,
                                            "owned_by": self.model}]}

    def usage(self, req: Request) -> dict[str, Any]:
        p, c = req.prompt_len, req.generated
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    def new_id(self, chat: bool) -> str:
        return ""

    def chat_chunk(self, ctx: StreamCtx, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "object": "chat.completion.chunk",
            "id": ctx.id,
            "created": ctx.created,
            "model": ctx.model,
            "system_fingerprint": f"{self.version}-native",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            "usage": None,
        }

    def text_chunk(self, ctx: StreamCtx, text: str, finish: str | None) -> dict[str, Any]:
        return {
            "id": ctx.id,
            "object": "text_completion",
            "created": ctx.created,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
            "model": ctx.model,
            "system_fingerprint": f"{self.version}-native",
        }

    def content_delta(self, text: str) -> dict[str, Any]:
        return {"role": "assistant", "content": text, "tool_call_id": None}

    def usage_chunk(self, ctx: StreamCtx) -> dict[str, Any]:
        chunk = self.chat_chunk(ctx, {}, None) if ctx.chat else self.text_chunk(ctx, "", None)
        chunk["choices"] = []
        chunk["usage"] = self.usage(ctx.req)
        return chunk

    def chat_response(self, ctx: StreamCtx, text: str) -> dict[str, Any]:
        out = super().chat_response(ctx, text)
        out["system_fingerprint"] = f"{self.version}-native"
        return out

    def add_routes(self, app: web.Application, server: Any) -> None:
        async def info(_: web.Request) -> web.Response:
            return json_response({
                "model_id": self.model,
                "model_sha": "5f0b02c75b57c5855da9ae460ce51323ea669d8a",
                "model_pipeline_tag": "text-generation",
                "max_concurrent_requests": 128,
                "max_best_of": 2,
                "max_stop_sequences": 4,
                "max_input_tokens": self.max_input_tokens,
                "max_total_tokens": self.max_total_tokens,
                "validation_workers": 2,
                "max_client_batch_size": 4,
                "router": "text-generation-router",
                "version": self.version,
                "sha": "9f38d9305168f4b47c8c46b573f5b2c07881281d",
                "docker_label": "sha-9f38d93",
            })

        app.router.add_get("/info", info)

    def startup_lines(self, host: str, port: int) -> list[str]:
        ts = _ts()
        return [
            f"{ts}  INFO text_generation_launcher: Args {{ model_id: \"{self.model}\", hostname: \"{host}\", "
            f"port: {port} }}",
            f"{ts}  INFO text_generation_launcher: Starting shard rank=0",
            f"{ts}  INFO text_generation_launcher: Shard ready in 1.2s rank=0",
            f"{ts}  INFO text_generation_router::server: router/src/server.rs:2412: Connected",
        ]

    def access_line(self, peer: str, method: str, path: str, status: int) -> str:
        level = "INFO" if status < 400 else "ERROR"
        what = "Success" if status < 400 else f"status={status}"
        return f"{_ts()}  {level} {path}: text_generation_router::server: router/src/server.rs:637: {what}"


def _ts() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
