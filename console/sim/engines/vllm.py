"""vLLM (V1 engine, OpenAI server). https://docs.vllm.ai/en/stable/usage/metrics/ and
vllm/v1/metrics/loggers.py in https://github.com/vllm-project/vllm.

Ground-truth counters (``/_sim/state``), matching how vLLM's own series move:
- prompt_tokens: full prompt length (cached tokens included), added when a request's first token is
  produced (vLLM counts prompt tokens in the iteration that finishes the prefill) = vllm:prompt_tokens_total.
- generation_tokens: every token when it is produced = vllm:generation_tokens_total.
- prefix_cache_queries / prefix_cache_hits: tokens looked up / found in the prefix cache when a request
  is first scheduled (re-scheduling after preemption is not counted) = vllm:prefix_cache_*_total.
- cached_prompt_tokens: hit tokens, at the first token = vllm:prompt_tokens_cached_total.
- preemptions = vllm:num_preemptions_total; requests_finished = request_success_total{stop,length};
  requests_failed = request_success_total{abort} plus injected HTTP 500s.
"""

from __future__ import annotations

import os
import time
from typing import Any, ClassVar

from aiohttp import web
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from console.sim.engines import features
from console.sim.engines.base import (
    Flavour,
    SimOptions,
    StreamCtx,
    buckets_1_2_5,
    counter,
    gauge,
    hist,
    json_response,
)
from console.sim.exposition import FamilyCollector, Groups
from console.sim.promtext import Family, Histogram, Labels
from console.sim.scheduler import Request, StepOutcome

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0]
LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                   480.0, 960.0, 1920.0, 7680.0]
ITERATION_TOKEN_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


class VllmFlavour(Flavour):
    name = "vllm"
    metrics_mount = "plain"
    version = "0.34.0"
    checks_model = True
    supports_continuous_usage = True
    eos_visible = False
    default_max_running = 256
    default_kv_blocks = 2048

    LEGACY_VERSION: ClassVar[str] = "0.9.1"

    def __init__(self, opts: SimOptions) -> None:
        super().__init__(opts)
        self.legacy = opts.metrics_version == "legacy"
        if self.legacy:
            self.version = self.LEGACY_VERSION
        lens = buckets_1_2_5(self.max_model_len)
        self.h: dict[str, Histogram] = {
            "ttft": Histogram(TTFT_BUCKETS),
            "itl": Histogram(ITL_BUCKETS),
            "tpot": Histogram(ITL_BUCKETS),
            "e2e": Histogram(LATENCY_BUCKETS),
            "queue": Histogram(LATENCY_BUCKETS),
            "inference": Histogram(LATENCY_BUCKETS),
            "prefill": Histogram(LATENCY_BUCKETS),
            "decode": Histogram(LATENCY_BUCKETS),
            "prompt_len": Histogram(lens),
            "gen_len": Histogram(lens),
            "max_gen": Histogram(lens),
            "max_tokens": Histogram(lens),
            "n": Histogram([1, 2, 5, 10, 20]),
            "iter_tokens": Histogram(ITERATION_TOKEN_BUCKETS),
        }
        self._empty_hists: dict[tuple[float, ...], Histogram] = {}  # an idle rank's, per bucket layout

    # ---- hooks ----
    def on_first_token(self, req: Request, t: float) -> None:
        super().on_first_token(req, t)
        self.h["ttft"].observe(t - req.arrival)

    def on_token(self, req: Request, t: float, gap: float) -> None:
        self.c.gen_live += 1
        self.h["itl"].observe(gap)

    def on_finish(self, req: Request, t: float) -> None:
        super().on_finish(req, t)
        if req.finish_reason == "abort" and req.first_token is None:
            return
        h = self.h
        h["e2e"].observe(t - req.arrival)
        sched = req.scheduled if req.scheduled is not None else t
        h["queue"].observe(sched - req.arrival)
        h["inference"].observe(t - sched)
        if req.first_token is not None:
            h["prefill"].observe(req.first_token - sched)
            h["decode"].observe(t - req.first_token)
            h["tpot"].observe((t - req.first_token) / (req.generated - 1) if req.generated > 1 else 0.0)
        h["prompt_len"].observe(req.prompt_len)
        h["gen_len"].observe(req.generated)
        h["max_gen"].observe(req.generated)
        h["max_tokens"].observe(req.max_tokens)
        h["n"].observe(1)

    def on_step(self, s: StepOutcome) -> None:
        super().on_step(s)
        self.h["iter_tokens"].observe(s.prefill_tokens + s.batch_size - s.new_requests)

    def ground_truth(self) -> dict[str, int]:
        c = self.c
        return self.truth(prompt=c.prompt_at_first_token, generation=c.gen_live, cached=c.cached_at_first_token)

    # ---- metrics ----
    def labels(self) -> Labels:
        if self.legacy:
            return (("model_name", self.model),)
        return (("model_name", self.model), ("engine", "0"))

    def metrics_families(self) -> list[Family]:
        L = self.labels()
        t0 = self.start_time
        s = self.scheduler
        c = self.c
        h = self.h
        fams: list[Family] = [
            gauge("vllm:num_requests_running", "Number of requests in model execution batches.", len(s.running), L),
            gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", len(s.waiting), L),
        ]
        if self.legacy:
            fams.append(gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.",
                              s.kv_usage, L))
            fams.append(counter("vllm:gpu_prefix_cache_queries",
                                "GPU prefix cache queries, in terms of number of queried tokens.",
                                c.prefix_queries, L, t0))
            fams.append(counter("vllm:gpu_prefix_cache_hits",
                                "GPU prefix cache hits, in terms of number of cached tokens.", c.prefix_hits, L, t0))
        else:
            fams.append(gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                              s.kv_usage, L))
            fams.append(counter("vllm:prefix_cache_queries",
                                "Prefix cache queries, in terms of number of queried tokens.", c.prefix_queries, L, t0))
            fams.append(counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                                c.prefix_hits, L, t0))
        fams += [
            counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", c.preemptions, L, t0),
            counter("vllm:prompt_tokens", "Number of prefill tokens processed.", c.prompt_at_first_token, L, t0),
            counter("vllm:generation_tokens", "Number of generation tokens processed.", c.gen_live, L, t0),
        ]
        if not self.legacy:
            fams.append(counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).",
                                c.cached_at_first_token, L, t0))
            # 0.34.0 (vllm/v1/metrics/loggers.py): waiting by reason (the simulator defers nothing), the
            # sleep state (never asleep) and cached tokens by the tier that held them (all on the device;
            # every source's series exists from the start).
            fams.append(Family("vllm:num_requests_waiting_by_reason", "gauge",
                               "Number of waiting requests by reason. Sum of all reasons equals "
                               "vllm:num_requests_waiting.",
                               values=[((*L, ("reason", "capacity")), float(len(s.waiting))),
                                       ((*L, ("reason", "deferred")), 0.0)]))  # fmt: skip
            fams.append(Family("vllm:engine_sleep_state", "gauge", "Engine sleep state; awake = 0 means engine is "
                               "sleeping; awake = 1 means engine is awake.",
                               values=[((*L, ("sleep_state", st)), 1.0 if st == "awake" else 0.0)
                                       for st in ("awake", "weights_offloaded", "discard_all")]))  # fmt: skip
            fams.append(Family("vllm:prompt_tokens_cached_by_source", "counter",
                               "Prefix-cache hit tokens by the cache tier that supplied them.",
                               values=[((*L, ("source", src)), float(c.cached_at_first_token if src == "device" else 0))
                                       for src in ("device", "host", "disk", "p2p", "external_unspecified")],
                               created=t0))  # fmt: skip
        fams.append(
            Family(
                "vllm:request_success",
                "counter",
                "Count of successfully processed requests.",
                values=[((*L, ("finished_reason", r)), float(c.finish_reasons.get(r, 0)))
                        for r in ("stop", "length", "abort")],
                created=t0,
            )
        )
        itl_name = "vllm:time_per_output_token_seconds" if self.legacy else "vllm:inter_token_latency_seconds"
        itl_help = ("Histogram of time per output token in seconds." if self.legacy
                    else "Histogram of inter-token latency in seconds.")
        fams += [
            hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                 h["iter_tokens"], L, t0),
            hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", h["ttft"], L, t0),
            hist(itl_name, itl_help, h["itl"], L, t0),
        ]
        if not self.legacy:
            fams.append(hist("vllm:request_time_per_output_token_seconds",
                             "Histogram of time_per_output_token_seconds per request.", h["tpot"], L, t0))
        fams += [
            hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", h["e2e"], L, t0),
            hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                 h["queue"], L, t0),
            hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
                 h["inference"], L, t0),
            hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                 h["prefill"], L, t0),
            hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                 h["decode"], L, t0),
            hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", h["prompt_len"], L, t0),
            hist("vllm:request_generation_tokens", "Number of generation tokens processed.", h["gen_len"], L, t0),
            hist("vllm:request_max_num_generation_tokens",
                 "Histogram of maximum number of requested generation tokens.", h["max_gen"], L, t0),
            hist("vllm:request_params_n", "Histogram of the n request parameter.", h["n"], L, t0),
            hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
                 h["max_tokens"], L, t0),
        ]
        cfg = self.sched_config
        info_labels: Labels = (
            ("block_size", str(cfg.block_size)),
            ("cache_dtype", "auto"),
            ("enable_prefix_caching", "True"),
            ("gpu_memory_utilization", "0.9"),
            ("num_gpu_blocks", str(cfg.kv_blocks)),
            ("prefix_caching_hash_algo", "sha256"),
        )
        if not self.legacy:
            info_labels = (*info_labels, ("engine", "0"))
        fams.append(gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", 1.0, info_labels))
        if self.opts.data_parallel > 1 and not self.legacy:
            self._add_idle_ranks(fams)
        fams += features.vllm_families(L, t0, spec=self.spec, generated=c.gen_live, kv=self.kv_log,
                                       max_lora=self.opts.max_lora, running=len(s.running),
                                       waiting=len(s.waiting))  # fmt: skip
        return fams

    def _add_idle_ranks(self, fams: list[Family]) -> None:
        """Data parallelism as one vLLM API server exposes it: every series once per engine rank
        (label ``engine``). The simulated scheduler is rank 0; ranks 1..N-1 get no requests, so
        their counters, gauges and histograms stay at zero (the info gauge stays 1) and the
        fleet's totals remain the ground truth. What it gives is a payload of real vLLM series
        with the cardinality of a data-parallel deployment."""
        ranks = [str(r) for r in range(1, self.opts.data_parallel)]
        for f in fams:
            for labels, v in list(f.values):
                if ("engine", "0") in labels:
                    idle = v if f.name.endswith("_info") else 0.0
                    f.values += [(_rank(labels, r), idle) for r in ranks]
            for labels, h in list(f.hists):
                empty = self._empty_hist(h)
                f.hists += [(_rank(labels, r), empty) for r in ranks]

    def _empty_hist(self, h: Histogram) -> Histogram:
        empty = self._empty_hists.get(h.bounds)
        if empty is None:
            empty = self._empty_hists[h.bounds] = Histogram(h.bounds)
        return empty

    def metrics_groups(self) -> Groups:
        return [(self.http_families(), True), (self.metrics_families(), True)]

    def metrics_registry(self) -> CollectorRegistry:
        # vLLM serves prometheus_client's default REGISTRY in single-process mode: the process, platform
        # and GC collectors registered at import come first, then the instrumentator's and vLLM's own.
        reg = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        GCCollector(registry=reg)
        reg.register(FamilyCollector(self.metrics_groups, multiprocess=False))  # type: ignore[arg-type]
        return reg

    def chat_chunk(self, ctx: StreamCtx, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        chunk = super().chat_chunk(ctx, delta, finish)
        if finish is not None:
            chunk["choices"][0]["stop_reason"] = None
        return chunk

    # ---- HTTP ----
    def auth_required(self, path: str) -> bool:
        return self.opts.api_key is not None and path.startswith(("/v1", "/v2", "/inference", "/cohere"))

    def error(self, status: int, message: str, kind: str) -> web.Response:
        types = {"bad_request": "BadRequestError", "not_found": "NotFoundError",
                 "server_error": "InternalServerError", "unavailable": "ServiceUnavailableError"}
        return json_response({"error": {"message": message, "type": types.get(kind, kind), "param": None,
                                        "code": status}}, status)

    def models_payload(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": self.model,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": "vllm",
                    "root": self.model,
                    "parent": None,
                    "max_model_len": self.max_model_len,
                    "permission": [
                        {
                            "id": "modelperm-" + os.urandom(16).hex(),
                            "object": "model_permission",
                            "created": int(self.start_time),
                            "allow_create_engine": False,
                            "allow_sampling": True,
                            "allow_logprobs": True,
                            "allow_search_indices": False,
                            "allow_view": True,
                            "allow_fine_tuning": False,
                            "organization": "*",
                            "group": None,
                            "is_blocking": False,
                        }
                    ],
                }
            ],
        }

    def add_routes(self, app: web.Application, server: Any) -> None:
        async def version(_: web.Request) -> web.Response:
            return json_response({"version": self.version})

        async def ping(_: web.Request) -> web.Response:
            return web.Response(status=200)

        app.router.add_get("/version", version)
        app.router.add_get("/ping", ping)
        app.router.add_post("/ping", ping)

    def startup_lines(self, host: str, port: int) -> list[str]:
        pid = os.getpid()
        return [
            f"INFO {_ts()} [api_server.py:1896] vLLM API server version {self.version}",
            f"INFO {_ts()} [__init__.py:742] Resolved architecture: LlamaForCausalLM",
            f"INFO {_ts()} [kv_cache_utils.py:1087] GPU KV cache size: "
            f"{self.sched_config.kv_blocks * self.sched_config.block_size:,} tokens",
            f"INFO {_ts()} [api_server.py:1971] Starting vLLM API server 0 on http://{host}:{port}",
            f"INFO:     Started server process [{pid}]",
            "INFO:     Waiting for application startup.",
            "INFO:     Application startup complete.",
        ]

    def periodic_line(self) -> str | None:
        s = self.scheduler
        c = self.c
        rate = 100.0 * c.prefix_hits / c.prefix_queries if c.prefix_queries else 0.0
        return (f"INFO {_ts()} [loggers.py:127] Engine 000: Running: {len(s.running)} reqs, Waiting: "
                f"{len(s.waiting)} reqs, GPU KV cache usage: {100 * s.kv_usage:.1f}%, Prefix cache hit rate: "
                f"{rate:.1f}%")


def _rank(labels: Labels, rank: str) -> Labels:
    return tuple((k, rank) if k == "engine" else (k, v) for k, v in labels)


def _ts() -> str:
    return time.strftime("%m-%d %H:%M:%S")
