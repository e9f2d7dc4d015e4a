"""llama.cpp ``llama-server --metrics``
(https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md, and a real llama-server
build, which the llamacpp integration tests run).

HTTP is up at once; while loading every route answers 503 ``unavailable_error``. With ``--api-key`` only
``/health`` and ``/v1/health`` are public: a real llama-server answers 401 on ``/v1/models`` and
``/models`` too (its README lists them as public; the measured behaviour wins). Prompt caching is
token-exact (block size 1); slots = ``--max-running`` (default 4, like ``-np 4``), and every slot owns a
full context, so KV never runs out.

Metrics are hand-written text without labels
(tests/fixtures/samples/llamacpp-real-server-8-streams.txt), values printed like a C++ ostream (``%g``),
header ``Process-Start-Time-Unix``.

Ground-truth counters (``/_sim/state``):
- prompt_tokens: prompt tokens *evaluated*, i.e. excluding cache-reused ones, added when the prompt is
  done (first token) = llamacpp:prompt_tokens_total.
- cached_prompt_tokens: reused tokens, at the same moment = llamacpp:prompt_tokens_cached_total.
- generation_tokens: a request's tokens, added only when it finishes = llamacpp:tokens_predicted_total.
- prefix_cache_queries / hits: prompt tokens looked up / reused at first scheduling (no metric).
- preemptions: always 0 in practice (no KV pressure); requests_finished / requests_failed: finished
  requests / aborted requests plus injected HTTP 500s (no llama.cpp metric).
"""

from __future__ import annotations

import secrets
import string
import time
from typing import Any

from aiohttp import web

from console.sim.engines.base import Flavour, SimOptions, StreamCtx, json_response
from console.sim.promtext import Family
from console.sim.scheduler import Request, StepOutcome

BUILD = "b6916-3f2a8e1c"
_ALNUM = string.ascii_letters + string.digits


class LlamacppFlavour(Flavour):
    name = "llamacpp"
    version = BUILD
    loading = "503"
    checks_model = False
    supports_min_tokens = False
    separate_finish_chunk = True
    default_block_size = 1
    default_max_running = 4

    def __init__(self, opts: SimOptions) -> None:
        if opts.kv_blocks is None:
            # Every slot owns a full context: KV never runs short, requests wait for a free slot.
            slots = opts.max_running or self.default_max_running
            opts.kv_blocks = slots * self.max_model_len // 16
        super().__init__(opts)
        self.prompt_seconds = 0.0
        self.predicted_seconds = 0.0
        self.n_decode = 0
        self.busy_slots_total = 0
        self.n_tokens_max = 0
        # "Bucket" counters behind the throughput gauges, reset by every /metrics scrape.
        self.bucket_prompt_tokens = 0
        self.bucket_prompt_s = 0.0
        self.bucket_predicted_tokens = 0
        self.bucket_predicted_s = 0.0

    def on_first_token(self, req: Request, t: float) -> None:
        super().on_first_token(req, t)
        sched = req.scheduled if req.scheduled is not None else req.arrival
        self.prompt_seconds += t - sched
        self.bucket_prompt_tokens += req.prompt_len - req.cached_tokens
        self.bucket_prompt_s += t - sched

    def on_finish(self, req: Request, t: float) -> None:
        super().on_finish(req, t)
        if req.first_token is not None:
            self.predicted_seconds += t - req.first_token
            self.bucket_predicted_tokens += req.generated
            self.bucket_predicted_s += t - req.first_token
        self.n_tokens_max = max(self.n_tokens_max, req.num_tokens)

    def on_step(self, s: StepOutcome) -> None:
        super().on_step(s)
        self.n_decode += 1
        self.busy_slots_total += s.batch_size

    def ground_truth(self) -> dict[str, int]:
        c = self.c
        return self.truth(prompt=c.uncached_at_first_token, generation=c.gen_at_finish, cached=c.cached_at_first_token)

    def metrics_families(self) -> list[Family]:
        # Not prometheus_client shaped; render_metrics writes the text directly.
        return []

    def render_metrics(self, accept: str = "") -> web.Response:
        s = self.scheduler
        c = self.c
        prompt_tps = self.bucket_prompt_tokens / self.bucket_prompt_s if self.bucket_prompt_s else 0.0
        pred_tps = self.bucket_predicted_tokens / self.bucket_predicted_s if self.bucket_predicted_s else 0.0
        self.bucket_prompt_tokens = self.bucket_predicted_tokens = 0
        self.bucket_prompt_s = self.bucket_predicted_s = 0.0
        rows: list[tuple[str, str, str, float]] = [
            ("counter", "prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens",
             c.uncached_at_first_token),
            ("counter", "prompt_tokens_cached_total", "Number of prompt tokens reused from the cache",
             c.cached_at_first_token),
            ("counter", "prompt_seconds_total", "Total time spent processing prompts", self.prompt_seconds),
            ("counter", "tokens_predicted_total", "Number of generation tokens processed", c.gen_at_finish),
            ("counter", "tokens_predicted_seconds_total", "Total time spent generating tokens",
             self.predicted_seconds),
            ("counter", "n_decode_total",
             "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding",
             self.n_decode),
            ("counter", "n_tokens_max", "Largest observed sequence length (prompt + generation)", self.n_tokens_max),
            ("counter", "spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", 0),
            ("counter", "spec_decode_num_accepted_tokens_total",
             "Speculative: Total draft tokens accepted by the target model", 0),
            ("counter", "spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps",
             0),
            ("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s", prompt_tps),
            ("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s", pred_tps),
            ("gauge", "requests_processing", "Number of requests processing", len(s.running)),
            ("gauge", "requests_deferred", "Number of requests deferred", len(s.waiting)),
            ("gauge", "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
             self.busy_slots_total / self.n_decode if self.n_decode else 0),
        ]
        out = []
        for kind, name, help_, value in rows:
            out.append(f"# HELP llamacpp:{name} {help_}\n# TYPE llamacpp:{name} {kind}\nllamacpp:{name} {value:g}\n")
        return web.Response(
            text="".join(out),
            headers={"Content-Type": "text/plain; version=0.0.4", "Process-Start-Time-Unix": str(int(self.start_time))},
        )

    # ---- HTTP ----
    def auth_required(self, path: str) -> bool:
        return self.opts.api_key is not None and path not in ("/health", "/v1/health")

    def auth_ok(self, request: web.Request) -> bool:
        key = self.opts.api_key
        if key is None:
            return True
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and auth[7:] == key:
            return True
        return request.headers.get("X-Api-Key", "") == key

    def unauthorized(self) -> web.Response:
        return self.error(401, "Invalid API Key", "authentication_error")

    def error(self, status: int, message: str, kind: str) -> web.Response:
        types = {"bad_request": "invalid_request_error", "not_found": "not_found_error",
                 "server_error": "server_error", "unavailable": "unavailable_error"}
        return json_response({"error": {"message": message, "type": types.get(kind, kind), "code": status}}, status)

    def bad_json(self, detail: str) -> web.Response:
        return self.error(400, f"[json.exception.parse_error.101] parse error: {detail}", "bad_request")

    def context_error(self, prompt_tokens: int, limit: int) -> web.Response:
        return self.error(400, f"request ({prompt_tokens} tokens) exceeds the available context size ({limit} tokens)",
                          "exceed_context_size_error")

    def health_ok(self) -> web.Response:
        return json_response({"status": "ok"})

    def models_payload(self) -> dict[str, Any]:
        return {
            "models": [{"name": self.model, "model": self.model, "modified_at": "", "size": "", "digest": "",
                        "type": "model", "description": "", "tags": [""], "capabilities": ["completion"],
                        "parameters": "", "details": {"parent_model": "", "format": "gguf", "family": "",
                                                      "families": [""], "parameter_size": "",
                                                      "quantization_level": ""}}],
            "object": "list",
            "data": [{"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "llamacpp",
                      "meta": {"vocab_type": 2, "n_vocab": 32000, "n_ctx_train": self.max_model_len,
                               "n_embd": 1024, "n_params": 207000000, "size": 414000000}}],
        }

    def new_id(self, chat: bool) -> str:
        return ("chatcmpl-" if chat else "cmpl-") + "".join(secrets.choice(_ALNUM) for _ in range(32))

    def usage(self, req: Request) -> dict[str, Any]:
        p, c = req.prompt_len, req.generated
        return {"completion_tokens": c, "prompt_tokens": p, "total_tokens": p + c,
                "prompt_tokens_details": {"cached_tokens": req.cached_tokens}}

    def timings(self, req: Request) -> dict[str, Any]:
        sched = req.scheduled if req.scheduled is not None else req.arrival
        first = req.first_token if req.first_token is not None else sched
        end = req.finish if req.finish is not None else first
        prompt_n = req.prompt_len - req.cached_tokens
        prompt_ms = max(1e-3, (first - sched) * 1e3)
        pred_n = req.generated
        pred_ms = max(1e-3, (end - first) * 1e3)
        return {
            "cache_n": req.cached_tokens,
            "prompt_n": prompt_n,
            "prompt_ms": round(prompt_ms, 3),
            "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
            "prompt_per_second": 1e3 * prompt_n / prompt_ms,
            "predicted_n": pred_n,
            "predicted_ms": round(pred_ms, 3),
            "predicted_per_token_ms": pred_ms / pred_n if pred_n else 0.0,
            "predicted_per_second": 1e3 * pred_n / pred_ms,
        }

    def chat_chunk(self, ctx: StreamCtx, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
            "created": ctx.created,
            "id": ctx.id,
            "model": ctx.model,
            "system_fingerprint": BUILD,
            "object": "chat.completion.chunk",
        }

    def text_chunk(self, ctx: StreamCtx, text: str, finish: str | None) -> dict[str, Any]:
        return {
            "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}],
            "created": ctx.created,
            "model": ctx.model,
            "system_fingerprint": BUILD,
            "object": "text_completion",
            "id": ctx.id,
        }

    def role_delta(self) -> dict[str, Any]:
        return {"role": "assistant", "content": None}

    def decorate_finish_chunk(self, chunk: dict[str, Any], ctx: StreamCtx) -> dict[str, Any]:
        if not ctx.include_usage:
            chunk["usage"] = self.usage(ctx.req)
            chunk["timings"] = self.timings(ctx.req)
        return chunk

    def usage_chunk(self, ctx: StreamCtx) -> dict[str, Any]:
        chunk = self.chat_chunk(ctx, {}, None) if ctx.chat else self.text_chunk(ctx, "", None)
        chunk["choices"] = []
        chunk["usage"] = self.usage(ctx.req)
        chunk["timings"] = self.timings(ctx.req)
        return chunk

    def chat_response(self, ctx: StreamCtx, text: str) -> dict[str, Any]:
        req = ctx.req
        return {
            "choices": [{"finish_reason": req.finish_reason, "index": 0,
                         "message": {"role": "assistant", "content": text}}],
            "created": ctx.created,
            "model": ctx.model,
            "system_fingerprint": BUILD,
            "object": "chat.completion",
            "usage": self.usage(req),
            "id": ctx.id,
            "timings": self.timings(req),
        }

    def text_response(self, ctx: StreamCtx, text: str) -> dict[str, Any]:
        out = super().text_response(ctx, text)
        out["system_fingerprint"] = BUILD
        out["timings"] = self.timings(ctx.req)
        return out

    def stream_headers(self) -> dict[str, str]:
        return {"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}

    def add_routes(self, app: web.Application, server: Any) -> None:
        async def props(_: web.Request) -> web.Response:
            return json_response({
                "default_generation_settings": {"id": 0, "id_task": -1, "n_ctx": self.max_model_len,
                                                "speculative": False, "is_processing": False,
                                                "params": {"n_predict": -1, "temperature": 0.8}},
                "total_slots": self.sched_config.max_running,
                "model_alias": self.model,
                "model_path": f"/models/{self.model}.gguf",
                "modalities": {"vision": False, "audio": False},
                "chat_template": "{% for message in messages %}<|{{ message.role }}|> {{ message.content }}\n"
                                 "{% endfor %}<|assistant|>",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "build_info": BUILD,
                "is_sleeping": False,
                "endpoint_slots": True,
                "endpoint_props": False,
                "endpoint_metrics": True,
            })

        async def slots(_: web.Request) -> web.Response:
            running = self.scheduler.running
            out = []
            for i in range(self.sched_config.max_running):
                r = running[i] if i < len(running) else None
                out.append({
                    "id": i,
                    "n_ctx": self.max_model_len,
                    "is_processing": r is not None,
                    "n_prompt_tokens": r.prompt_len if r else 0,
                    "next_token": [{"has_next_token": r is not None, "n_remain": (r.max_tokens - r.generated) if r
                                    else -1, "n_decoded": r.generated if r else 0}],
                })
            return json_response(out)

        app.router.add_get("/props", props)
        app.router.add_get("/slots", slots)
        app.router.add_get("/v1/health", self._health)
        app.router.add_get("/models", self._models)

    async def _health(self, _: web.Request) -> web.Response:
        return self.health_ok()

    async def _models(self, _: web.Request) -> web.Response:
        return json_response(self.models_payload())

    def startup_lines(self, host: str, port: int) -> list[str]:
        return [
            f"build: {BUILD.split('-')[0][1:]} ({BUILD.split('-')[1]}) with cc (Debian 12.2.0-14) 12.2.0 for "
            "x86_64-linux-gnu",
            "system info: n_threads = 2, n_threads_batch = 2, total_threads = 2",
            f"main: HTTP server is listening, hostname: {host}, port: {port}, http threads: 3",
            "main: loading model",
            f"srv    load_model: loading model '/models/{self.model}.gguf'",
            f"srv          init: initializing slots, n_slots = {self.sched_config.max_running}",
        ]

    def ready_line(self) -> str:
        return "main: model loaded\nmain: server is listening on http://{host}:{port} - starting the main loop"

    def access_line(self, peer: str, method: str, path: str, status: int) -> str:
        return f"srv  log_server_r: request: {method} {path} {peer.split(':')[0]} {status}"
