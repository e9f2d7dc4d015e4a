"""TensorRT-LLM ``trtllm-serve`` (1.3, ``return_perf_metrics`` + ``enable_iter_perf_stats`` on).

https://github.com/NVIDIA/TensorRT-LLM (tensorrt_llm/serve/openai_server.py, tensorrt_llm/metrics/
collector.py). ``/prometheus/metrics`` is Prometheus text from a multiprocess registry (no
``_created``); ``/metrics`` is JSON iteration stats from a bounded queue that every GET drains
(destructive read). No API key support; unknown request fields are rejected (pydantic extra=forbid).
KV blocks hold 32 tokens (trtllm's default tokens_per_block).

Ground-truth counters (``/_sim/state``):
- prompt_tokens: full prompt length including cached tokens, added when a request finishes
  = trtllm_prompt_tokens_total; cached_prompt_tokens likewise = trtllm_prompt_cached_tokens_total.
- generation_tokens: a request's tokens, added at finish = trtllm_generation_tokens_total.
- prefix_cache_queries / hits: prompt tokens looked up / matched at first scheduling (the engine
  itself reports blocks: trtllm_kv_cache_reused_blocks_total / _missed_blocks_total).
- preemptions: scheduler preemptions (trtllm only shows a paused-requests gauge).
- requests_finished = trtllm_request_success_total (stop+length); requests_failed = aborted requests
  plus injected HTTP 500s (trtllm_request_error_total counts the 500s by http_code).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import orjson
from aiohttp import web

from console.sim.engines.base import Flavour, SimOptions, StreamCtx, counter, gauge, hist, json_response
from console.sim.engines.vllm import ITL_BUCKETS, LATENCY_BUCKETS, TTFT_BUCKETS
from console.sim.exposition import Groups
from console.sim.promtext import Family, Histogram, Labels
from console.sim.scheduler import Request, StepOutcome

_SAMPLING = {
    "best_of", "use_beam_search", "top_k", "top_p_min", "min_p", "repetition_penalty", "length_penalty",
    "early_stopping", "stop_token_ids", "include_stop_str_in_output", "ignore_eos", "min_tokens",
    "skip_special_tokens", "spaces_between_special_tokens", "truncate_prompt_tokens", "lora_request",
    "disaggregated_params", "return_context_logits", "return_generation_logits", "prompt_logprobs",
    "detokenize", "cache_salt", "guided_decoding_params",
}
CHAT_FIELDS = _SAMPLING | {
    "messages", "model", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "max_tokens",
    "max_completion_tokens", "n", "presence_penalty", "response_format", "seed", "stop", "stream",
    "stream_options", "temperature", "top_p", "tools", "tool_choice", "user", "reasoning_effort", "echo",
    "add_generation_prompt", "add_special_tokens", "documents", "chat_template", "chat_template_kwargs",
}
COMPLETION_FIELDS = _SAMPLING | {
    "prompt", "model", "echo", "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "n",
    "presence_penalty", "seed", "stop", "stream", "stream_options", "suffix", "temperature", "top_p", "user",
    "add_special_tokens", "response_format",
}


class TrtllmFlavour(Flavour):
    name = "trtllm"
    metrics_mount = "asgi"
    metrics_multiprocess = True
    version = "1.3.0rc5"
    metrics_path = "/prometheus/metrics"
    checks_model = True
    default_block_size = 32
    default_max_running = 128
    default_kv_blocks = 2048
    WEIGHT_BYTES = 1_192_099_840
    KV_BYTES_PER_TOKEN = 28 * 2 * 8 * 128 * 2

    def __init__(self, opts: SimOptions) -> None:
        super().__init__(opts)
        self.h = {
            "ttft": Histogram(TTFT_BUCKETS),
            "tpot": Histogram(ITL_BUCKETS),
            "e2e": Histogram(LATENCY_BUCKETS),
            "queue": Histogram(LATENCY_BUCKETS),
            "prefill": Histogram(TTFT_BUCKETS),
            "decode": Histogram(LATENCY_BUCKETS),
            "inference": Histogram(LATENCY_BUCKETS),
        }
        self.iter_stats: deque[dict[str, Any]] = deque(maxlen=1000)
        self.errors_by_code: dict[str, int] = {}

    def on_finish(self, req: Request, t: float) -> None:
        super().on_finish(req, t)
        if req.first_token is None:
            return
        h = self.h
        sched = req.scheduled if req.scheduled is not None else req.arrival
        h["ttft"].observe(req.first_token - req.arrival)
        h["e2e"].observe(t - req.arrival)
        h["queue"].observe(sched - req.arrival)
        h["prefill"].observe(req.first_token - sched)
        h["decode"].observe(t - req.first_token)
        h["inference"].observe(t - sched)
        if req.generated > 1:
            h["tpot"].observe((t - req.first_token) / (req.generated - 1))

    def on_error(self, status: int) -> None:
        super().on_error(status)
        self.errors_by_code[str(status)] = self.errors_by_code.get(str(status), 0) + 1

    def on_step(self, s: StepOutcome) -> None:
        super().on_step(s)
        sch = self.scheduler
        pool = sch.pool
        c = self.c
        total = c.reused_blocks + c.missed_blocks
        self.iter_stats.append({
            "cpuMemUsage": 0,
            # Weights plus the preallocated KV pool of a ~0.6B model (28 layers, 8 KV heads x 128, bf16).
            "gpuMemUsage": self.WEIGHT_BYTES + pool.num_blocks * sch.config.block_size * self.KV_BYTES_PER_TOKEN,
            "inflightBatchingStats": {
                "avgNumDecodedTokensPerIter": 1.0,
                "microBatchId": 0,
                "numContextRequests": s.new_requests,
                "numCtxTokens": s.prefill_tokens,
                "numGenRequests": s.batch_size - s.new_requests,
                "numPausedRequests": len(s.preempted),
                "numScheduledRequests": s.batch_size,
            },
            "iter": s.iteration,
            "iterLatencyMS": s.duration * 1000.0,
            "kvCacheStats": {
                "allocNewBlocks": s.missed_blocks,
                "allocTotalBlocks": s.missed_blocks + s.reused_blocks,
                "cacheHitRate": c.reused_blocks / total if total else 0.0,
                "freeNumBlocks": pool.num_free,
                "maxNumBlocks": pool.num_blocks,
                "missedBlocks": c.missed_blocks,
                "reusedBlocks": c.reused_blocks,
                "tokensPerBlock": sch.config.block_size,
                "usedNumBlocks": pool.num_used,
            },
            "maxBatchSizeRuntime": sch.config.max_running,
            "maxBatchSizeStatic": sch.config.max_running,
            "maxNumActiveRequests": sch.config.max_running,
            "maxNumTokensRuntime": 8192,
            "newActiveRequestsQueueLatencyMS": 0.0,
            "numActiveRequests": len(sch.running),
            "numCompletedRequests": len(s.finished),
            "numNewActiveRequests": s.new_requests,
            "numQueuedRequests": len(sch.waiting),
            "pinnedMemUsage": 0,
            "staticBatchingStats": None,
            "timestamp": time.strftime("%m-%d-%Y %H:%M:%S", time.localtime(s.end)),
        })

    def ground_truth(self) -> dict[str, int]:
        c = self.c
        return self.truth(prompt=c.prompt_at_finish, generation=c.gen_at_finish, cached=c.cached_at_finish)

    def labels(self) -> Labels:
        return (("engine_type", "pytorch"), ("model_name", self.model))

    def metrics_families(self) -> list[Family]:
        L = self.labels()
        s = self.scheduler
        pool = s.pool
        c = self.c
        h = self.h
        total = c.reused_blocks + c.missed_blocks
        last = self.last_step
        fams = [
            Family("trtllm_request_success", "counter", "Count of successfully processed requests.",
                   values=[((*L, ("finished_reason", r)), float(c.finish_reasons.get(r, 0)))
                           for r in ("stop", "length")]),
            hist("trtllm_e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                 h["e2e"], L, 0),
            hist("trtllm_time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                 h["ttft"], L, 0),
            hist("trtllm_time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                 h["tpot"], L, 0),
            hist("trtllm_request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                 h["queue"], L, 0),
            hist("trtllm_request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                 h["prefill"], L, 0),
            hist("trtllm_request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                 h["decode"], L, 0),
            hist("trtllm_request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
                 h["inference"], L, 0),
            counter("trtllm_prompt_tokens", "Number of prefill tokens processed.", c.prompt_at_finish, L, 0),
            counter("trtllm_generation_tokens", "Number of generation tokens processed.", c.gen_at_finish, L, 0),
            counter("trtllm_prompt_cached_tokens", "Number of prompt tokens served from the KV cache.",
                    c.cached_at_finish, L, 0),
            Family("trtllm_request_error", "counter", "Count of failed requests by HTTP status code.",
                   values=[((*L, ("http_code", k)), float(v)) for k, v in sorted(self.errors_by_code.items())]),
            gauge("trtllm_kv_cache_hit_rate", "KV cache block reuse rate since start.",
                  c.reused_blocks / total if total else 0.0, L),
            gauge("trtllm_kv_cache_utilization", "KV cache utilization (used blocks / max blocks).", s.kv_usage, L),
            counter("trtllm_kv_cache_reused_blocks", "Number of reused KV cache blocks.", c.reused_blocks, L, 0),
            counter("trtllm_kv_cache_missed_blocks", "Number of missed KV cache blocks.", c.missed_blocks, L, 0),
            gauge("trtllm_kv_cache_max_blocks", "Maximum number of KV cache blocks.", pool.num_blocks, L),
            gauge("trtllm_kv_cache_free_blocks", "Number of free KV cache blocks.", pool.num_free, L),
            gauge("trtllm_kv_cache_used_blocks", "Number of used KV cache blocks.", pool.num_used, L),
            gauge("trtllm_kv_cache_tokens_per_block", "Tokens per KV cache block.", s.config.block_size, L),
            gauge("trtllm_num_requests_running", "Number of active requests.", len(s.running), L),
            gauge("trtllm_num_requests_waiting", "Number of queued requests.", len(s.waiting), L),
            counter("trtllm_num_requests_completed", "Number of completed requests.", c.finished + c.aborted, L, 0),
            gauge("trtllm_max_num_active_requests", "Maximum number of active requests.", s.config.max_running, L),
            gauge("trtllm_iteration_latency_seconds", "Latency of the last iteration in seconds.",
                  last.duration if last else 0.0, L),
            gauge("trtllm_num_context_requests", "Number of context requests in the last iteration.",
                  last.new_requests if last else 0, L),
            gauge("trtllm_num_generation_requests", "Number of generation requests in the last iteration.",
                  (last.batch_size - last.new_requests) if last else 0, L),
            gauge("trtllm_num_paused_requests", "Number of paused requests in the last iteration.",
                  len(last.preempted) if last else 0, L),
            gauge("trtllm_num_scheduled_requests", "Number of scheduled requests in the last iteration.",
                  last.batch_size if last else 0, L),
        ]
        return fams

    def metrics_groups(self) -> Groups:
        return [(self.http_families(), False), (self.metrics_families(), False)]

    # ---- HTTP ----
    def error(self, status: int, message: str, kind: str) -> web.Response:
        types = {"bad_request": "BadRequestError", "not_found": "NotFoundError",
                 "server_error": "InternalServerError", "unavailable": "ServiceUnavailableError"}
        return json_response({"object": "error", "message": message, "type": types.get(kind, kind), "param": None,
                              "code": status}, status)

    def bad_json(self, detail: str) -> web.Response:
        return json_response({"error": f"[{{'type': 'json_invalid', 'loc': ('body', 0), 'msg': 'JSON decode error', "
                                       f"'input': {{}}, 'ctx': {{'error': '{detail}'}}}}]"}, 400)

    def validation_error(self, message: str) -> web.Response:
        return json_response({"error": message}, 400)

    def unknown_fields(self, body: dict[str, Any], chat: bool) -> list[str]:
        allowed = CHAT_FIELDS if chat else COMPLETION_FIELDS
        return sorted(k for k in body if k not in allowed)

    def models_payload(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "created": int(time.time()),
                                            "owned_by": "tensorrt_llm"}]}

    def usage(self, req: Request) -> dict[str, Any]:
        p, c = req.prompt_len, req.generated
        return {"prompt_tokens": p, "total_tokens": p + c, "completion_tokens": c,
                "prompt_tokens_details": {"cached_tokens": req.cached_tokens}}

    def chat_chunk(self, ctx: StreamCtx, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": ctx.id,
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                         "stop_reason": None}],
        }

    def add_routes(self, app: web.Application, server: Any) -> None:
        async def version(_: web.Request) -> web.Response:
            return json_response({"version": self.version})

        async def iteration_stats(_: web.Request) -> web.Response:
            # Destructive: whatever is queued now is returned once and gone.
            items = list(self.iter_stats)
            self.iter_stats.clear()
            return web.Response(body=orjson.dumps(items), content_type="application/json")

        async def health_generate(_: web.Request) -> web.Response:
            return web.Response(status=200, text="Generation health check OK")

        app.router.add_get("/version", version)
        app.router.add_get("/metrics", iteration_stats)
        app.router.add_get("/health_generate", health_generate)

    def startup_lines(self, host: str, port: int) -> list[str]:
        return [
            f"[TensorRT-LLM] TensorRT-LLM version: {self.version}",
            f"[TensorRT-LLM][INFO] Number of tokens per block: {self.sched_config.block_size}.",
            f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {self.sched_config.kv_blocks} KV cache blocks",
            "INFO:     Started server process",
            "INFO:     Waiting for application startup.",
            "INFO:     Application startup complete.",
            f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)",
        ]
