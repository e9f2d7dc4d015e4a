"""SGLang (launch_server with --enable-metrics).
https://docs.sglang.io/docs/references/production_metrics

SGLang's prefix cache is a radix tree over tokens (page size 1), so hits are exact token prefixes.
Its metrics come from a prometheus_client *multiprocess* registry: no ``_created`` series.

Ground-truth counters (``/_sim/state``):
- prompt_tokens: full prompt length *including* cached tokens, added when a request finishes
  (tokenizer-side) = sglang:prompt_tokens_total.
- cached_prompt_tokens: the request's cached tokens, added at finish = sglang:cached_tokens_total.
- generation_tokens: a request's tokens, added at finish = sglang:generation_tokens_total.
- prefix_cache_queries / prefix_cache_hits: tokens looked up / matched at first scheduling (no
  counter of their own in SGLang; the cache_hit_rate gauge is the latest prefill batch's ratio).
- preemptions = sglang:num_retracted_requests_total; requests_finished = sglang:num_requests_total
  (which counts every finished request, aborted ones too, like SGLang) minus aborts;
  requests_failed = sglang:num_aborted_requests_total plus injected HTTP 500s.

Shapes: SGLang 0.5.23 by default (sglang/srt/observability/metrics_collector.py): the per-request
TPOT histogram ``sglang:request_time_per_output_token_seconds``, spec gauges at 0 with speculative
decoding off, P/D transfers as histograms (features.py). ``metrics_version = "legacy"``: 0.5.4's
(no TPOT histogram, P/D gauges, spec gauges only with it on). ``priority_levels``: priority
scheduling, each request's priority its id's CRC modulo the levels; the tokenizer's counters and
histograms carry the default priority "0" (the simulator keeps no per-priority totals).
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from aiohttp import web

from console.sim.engines import features
from console.sim.engines.base import Flavour, SimOptions, StreamCtx, counter, gauge, hist, json_response
from console.sim.exposition import Groups
from console.sim.promtext import Family, Histogram, Labels
from console.sim.scheduler import Request, StepOutcome

TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400]
ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
               0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000]
QUEUE_BUCKETS = [0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500,
                 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000]


class SglangFlavour(Flavour):
    name = "sglang"
    metrics_mount = "asgi"
    metrics_multiprocess = True
    version = "0.5.23"
    loading = "refuse-then-503"
    checks_model = True
    supports_continuous_usage = True
    default_block_size = 1
    default_max_running = 128
    default_kv_blocks = 2048

    def __init__(self, opts: SimOptions) -> None:
        super().__init__(opts)
        self.legacy = opts.metrics_version == "legacy"
        if self.legacy:
            self.version = "0.5.4"
        self.h = {
            "ttft": Histogram(TTFT_BUCKETS),
            "itl": Histogram(ITL_BUCKETS),
            "tpot": Histogram(ITL_BUCKETS),
            "e2e": Histogram(E2E_BUCKETS),
            "queue": Histogram(QUEUE_BUCKETS),
        }
        self.last_hit_rate = 0.0
        self.retracted_now = 0
        self.realtime = {"prefill_compute": 0, "prefill_cache": 0, "decode": 0}
        self._batch_hits = 0
        self._batch_queried = 0

    def on_scheduled(self, req: Request, now: float, queried: int, hits: int) -> None:
        super().on_scheduled(req, now, queried, hits)
        self.h["queue"].observe(now - req.arrival)
        self._batch_hits += hits
        self._batch_queried += queried

    def on_first_token(self, req: Request, t: float) -> None:
        super().on_first_token(req, t)
        self.h["ttft"].observe(t - req.arrival)

    def on_token(self, req: Request, t: float, gap: float) -> None:
        self.c.gen_live += 1
        self.h["itl"].observe(gap)

    def on_finish(self, req: Request, t: float) -> None:
        super().on_finish(req, t)
        if req.first_token is not None:
            self.h["e2e"].observe(t - req.arrival)
            if req.generated > 1:  # (finished - first token) / (completion tokens - 1), as SGLang
                self.h["tpot"].observe((t - req.first_token) / (req.generated - 1))

    def on_preempt(self, req: Request, now: float) -> None:
        super().on_preempt(req, now)
        self.retracted_now += 1

    def on_step(self, s: StepOutcome) -> None:
        super().on_step(s)
        if s.new_requests and self._batch_queried:
            # cache_hit_rate = hit / (new + hit) tokens of the last prefill batch.
            self.last_hit_rate = self._batch_hits / self._batch_queried
        self.realtime["prefill_cache"] += self._batch_hits
        self.realtime["prefill_compute"] += s.prefill_tokens
        self.realtime["decode"] += s.batch_size - s.new_requests
        self._batch_hits = self._batch_queried = 0
        if s.preempted:
            self.retracted_now = len(s.preempted)
        elif s.new_requests:
            self.retracted_now = 0

    def ground_truth(self) -> dict[str, int]:
        c = self.c
        return self.truth(prompt=c.prompt_at_finish, generation=c.gen_at_finish, cached=c.cached_at_finish)

    def sched_labels(self) -> Labels:
        prio: Labels = (("priority", ""),) if self.opts.priority_levels else ()
        return (("engine_type", "unified"), ("model_name", self.model), ("moe_ep_rank", "0"), ("pp_rank", "0"),
                *prio, ("tp_rank", "0"))

    def _queue_gauge(self, name: str, help_: str, reqs: list[Request], labels: Labels) -> Family:
        """A queue gauge: the total, plus one series per priority with priority scheduling."""
        values: list[tuple[Labels, float]] = [(labels, float(len(reqs)))]
        levels = self.opts.priority_levels
        if levels:
            counts = [0] * levels
            for r in reqs:
                counts[zlib.crc32(r.id.encode()) % levels] += 1
            base = tuple(kv for kv in labels if kv[0] != "priority")
            values += [((*base, ("priority", str(p))), float(n)) for p, n in enumerate(counts)]
        return Family(name, "gauge", help_, values=values)

    def gen_throughput(self) -> float:
        s = self.last_step
        if s is None or s.duration <= 0 or time.time() - s.end > 5.0:
            return 0.0
        return s.batch_size / s.duration

    def metrics_families(self) -> list[Family]:
        L = self.labels()
        if self.opts.priority_levels:
            L = (*L, ("priority", "0"))
        S = self.sched_labels()
        s = self.scheduler
        c = self.c
        h = self.h
        bs = s.config.block_size
        max_tokens = s.pool.num_blocks * bs
        fams = [
            counter("sglang:prompt_tokens", "Number of prefill tokens processed.", c.prompt_at_finish, L, 0),
            counter("sglang:generation_tokens", "Number of generation tokens processed.", c.gen_at_finish, L, 0),
            counter("sglang:cached_tokens", "Number of cached prompt tokens.", c.cached_at_finish, L, 0),
            counter("sglang:num_requests", "Number of requests processed.", c.finished + c.aborted, L, 0),
            counter("sglang:num_so_requests", "Number of structured output requests processed.", 0, L, 0),
            counter("sglang:num_aborted_requests", "Number of requests aborted.", c.aborted, L, 0),
            hist("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", h["ttft"], L, 0),
            hist("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", h["itl"], L, 0),
            hist("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                 h["e2e"], L, 0),
            self._queue_gauge("sglang:num_running_reqs", "The number of running requests.", list(s.running), S),
            gauge("sglang:num_used_tokens", "The number of used tokens.", s.pool.num_used * bs, S),
            gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.",
                  max_tokens, S),
            gauge("sglang:token_usage", "The token usage.", s.kv_usage, S),
            gauge("sglang:gen_throughput", "The generation throughput (token/s).", self.gen_throughput(), S),
            self._queue_gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.",
                              list(s.waiting), S),
            gauge("sglang:num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.", 0, S),
            gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", self.last_hit_rate, S),
            gauge("sglang:num_retracted_reqs", "The number of retracted requests.", self.retracted_now, S),
            gauge("sglang:num_paused_reqs", "The number of paused requests by async weight sync.", 0, S),
            counter("sglang:num_retracted_requests", "Total number of retracted requests due to kvcache full.",
                    c.preemptions, S, 0),
            Family("sglang:realtime_tokens", "counter", "Total number of tokens processed (updated on each log "
                   "interval).", values=[((*S, ("mode", m)), float(v)) for m, v in self.realtime.items()]),
            hist("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", h["queue"], S, 0),
        ]
        if not self.legacy:
            fams.append(hist("sglang:request_time_per_output_token_seconds", "Per-request TPOT in seconds: "
                             "(finished_time - first_token_time) / (completion_tokens - 1).", h["tpot"], L, 0))
        fams += features.sglang_families(S, 0, spec=self.spec, kv=self.kv_log, max_lora=self.opts.max_lora,
                                         running=len(s.running), legacy=self.legacy)
        return fams

    def metrics_groups(self) -> Groups:
        return [(self.metrics_families(), False)]

    # ---- HTTP ----
    def auth_required(self, path: str) -> bool:
        return self.opts.api_key is not None and not (path.startswith("/health") or path == "/metrics")

    def error(self, status: int, message: str, kind: str) -> web.Response:
        types = {"bad_request": "BadRequestError", "not_found": "NotFoundError",
                 "server_error": "InternalServerError", "unavailable": "ServiceUnavailableError"}
        return json_response({"object": "error", "message": message, "type": types.get(kind, kind), "param": None,
                              "code": status}, status)

    def models_payload(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "sglang",
                      "root": self.model, "parent": None, "max_model_len": self.max_model_len}],
        }

    def usage(self, req: Request) -> dict[str, Any]:
        p, c = req.prompt_len, req.generated
        return {"prompt_tokens": p, "total_tokens": p + c, "completion_tokens": c, "prompt_tokens_details": None,
                "reasoning_tokens": 0}

    def chat_chunk(self, ctx: StreamCtx, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": ctx.id,
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                         "matched_stop": None}],
            "usage": None,
        }

    def content_delta(self, text: str) -> dict[str, Any]:
        return {"role": None, "content": text, "reasoning_content": None, "tool_calls": None}

    def role_delta(self) -> dict[str, Any]:
        return {"role": "assistant", "content": "", "reasoning_content": None, "tool_calls": None}

    def new_id(self, chat: bool) -> str:
        import uuid

        return uuid.uuid4().hex

    def add_routes(self, app: web.Application, server: Any) -> None:
        async def server_info(_: web.Request) -> web.Response:
            cfg = self.sched_config
            return json_response({
                "model_path": self.model,
                "served_model_name": self.model,
                "host": server.host,
                "port": server.port,
                "tp_size": 1,
                "dp_size": 1,
                "max_running_requests": cfg.max_running,
                "max_total_num_tokens": cfg.kv_blocks * cfg.block_size,
                "page_size": cfg.block_size,
                "context_length": self.max_model_len,
                "enable_metrics": True,
                "internal_states": [{"last_gen_throughput": self.gen_throughput(), "memory_usage": {}}],
                "version": self.version,
            })

        async def model_info(_: web.Request) -> web.Response:
            return json_response({"model_path": self.model, "tokenizer_path": self.model, "is_generation": True})

        async def get_load(_: web.Request) -> web.Response:
            s = self.scheduler
            return json_response([{"dp_rank": 0, "num_reqs": len(s.running) + len(s.waiting),
                                   "num_waiting_reqs": len(s.waiting), "num_tokens": s.pool.num_used}])

        async def flush_cache(_: web.Request) -> web.Response:
            s = self.scheduler
            if s.running or s.waiting:
                return web.Response(status=400, text="Cache not flushed. Please check the server logs.")
            s.pool.reset_cache()
            return web.Response(status=200, text="Cache flushed.\nPlease check backend logs for more details. ")

        app.router.add_get("/get_server_info", server_info)
        app.router.add_get("/get_model_info", model_info)
        app.router.add_get("/get_load", get_load)
        app.router.add_route("*", "/flush_cache", flush_cache)

    def startup_lines(self, host: str, port: int) -> list[str]:
        cfg = self.sched_config
        return [
            f"[{_ts()}] server_args=ServerArgs(model_path='{self.model}', host='{host}', port={port}, "
            f"enable_metrics=True, max_running_requests={cfg.max_running})",
            f"[{_ts()}] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16",
            f"[{_ts()}] KV Cache is allocated. #tokens: {cfg.kv_blocks * cfg.block_size}",
            f"[{_ts()}] max_total_num_tokens={cfg.kv_blocks * cfg.block_size}, "
            f"max_running_requests={cfg.max_running}, context_len={self.max_model_len}",
            f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)",
        ]

    def ready_line(self) -> str:
        return f"[{_ts()}] The server is fired up and ready to roll!"

    def periodic_line(self) -> str | None:
        s = self.scheduler
        return (f"[{_ts()}] Decode batch. #running-req: {len(s.running)}, #token: {s.pool.num_used}, "
                f"token usage: {s.kv_usage:.2f}, gen throughput (token/s): {self.gen_throughput():.2f}, "
                f"#queue-req: {len(s.waiting)}")


def _ts() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")
