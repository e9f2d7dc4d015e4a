"""The engine comparison benchmark: readiness, A/B order, levels, repeats, and the result document.

Protocol: identical seeded prompts for every engine (prompts differ
between levels and repeats so one level cannot warm the prefix cache of the next, but are the same
for A and B at the same level and repeat), same sampling parameters, engines run one after the
other in ABBA order (A B, B A, A B, ...), each run going through the levels in ascending order.
Per level and engine the repeats are combined as median and min-max; the table shows B/A.

The load itself runs in a child process (``run_in_subprocess``) so a UI or a terminal never
distorts the timings; progress comes back over a queue at most 10 times a second.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import math
import multiprocessing as mp
import os
import platform
import queue as _queue
import signal
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from console.client.aggregate import record_dict, summarize
from console.client.gpu import GpuSampler, SimulatedGpuCollect, default_collect
from console.client.loadgen import LevelRaw, LevelSpec, Target, run_level
from console.client.progress import BenchEvent, LevelDone, ProgressFn, RunStarted, SwapStarted
from console.client.stream import EndpointKind, GenParams, auth_headers, length_mode, list_models
from console.client.workloads import WorkloadSpec, generate
from console.target import EngineTarget
from console.transport.http import HTTPClient, HTTPError

SCHEMA = "enginedeck.bench/1"
INTERRUPT_GRACE = 30.0  # seconds the child gets to cancel its level and send what finished
SCHEMA_VERSION = 1
# Each of them stops a run the way Ctrl-C does: the levels that finished are kept, marked interrupted.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How the bench asks its load process to stop and send what finished: a signal of its own, as SIGINT
# may be ignored there (a bench started in the background). Sent again each ASK_AGAIN_S until it ends
# (one that arrives before the load process installed its handlers is ignored).
ASK_STOP = signal.SIGUSR1
ASK_AGAIN_S = 1.0
PARENT_CHECK_S = 0.5  # how often the load process checks that the bench that started it still lives


@dataclass(frozen=True, slots=True)
class BenchConfig:
    engines: tuple[EngineTarget, ...]  # picklable: the child process gets them (keys stay in the environment)
    levels: tuple[LevelSpec, ...]
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    params: GenParams = field(default_factory=lambda: GenParams(max_tokens=64, fixed_length=True))
    repeats: int = 1
    seed: int = 0
    slo: dict[str, float] = field(default_factory=dict)
    endpoint: EndpointKind = "completions"
    scrape_metrics: bool = True
    gpu: str = "nvml"  # nvml | simulated | none
    keep_events: bool = True
    request_timeout: float = 600.0
    flush_cache: bool = False  # flush the engine's prefix cache before every level (where it can)
    # Single-GPU A/B: before each run stop the other engines and start this one (console/client/swap.py).
    swap: bool = False
    config_path: str | None = None


def plan_line(cfg: BenchConfig) -> str:
    """What each level runs, said before it starts: the measured prompts (``--num-prompts``, the
    bench form's prompts/level) and the warmup requests before them, which the results leave out."""
    levels = cfg.levels
    if not levels:
        return ""
    counts = sorted({lv.num_prompts for lv in levels})
    measured = f"{'/'.join(map(str, counts))} prompts/level measured"
    if all(lv.mode == "closed" and lv.warmup is None for lv in levels):
        return f"{measured}, after C warmup requests (not counted)"  # the default: one per worker
    warm = sorted({lv.warmup_count for lv in levels})
    if warm == [0]:
        return f"{measured}, no warmup"
    return f"{measured}, after {'/'.join(map(str, warm))} warmup requests (not counted)"


# Prefix-cache flush endpoints. SGLang answers 400 while requests run; vLLM's exists only with
# VLLM_SERVER_DEV_MODE=1 (https://docs.vllm.ai/en/v0.14.0/api/vllm/entrypoints/serve/cache/api_router/).
FLUSH_PATHS = {"sglang": "/flush_cache", "vllm": "/reset_prefix_cache"}


async def flush_cache(e: EngineTarget) -> str:
    """POST the engine's cache-flush endpoint; returns "flushed" or why not (recorded per level)."""
    path = FLUSH_PATHS.get(e.profile.name)
    if path is None:
        return f"unsupported by {e.profile.name}"
    client = HTTPClient(e.url)
    try:
        resp = await client.request("POST", path, body=b"", headers=auth_headers(e.api_key), timeout=10.0)
    except HTTPError as exc:
        return f"failed: {exc}"
    finally:
        client.close()
    return "flushed" if resp.status == 200 else f"failed: HTTP {resp.status}"


def run_order(n_engines: int, repeats: int) -> list[tuple[int, int]]:
    """(engine index, repeat) in ABBA order: forward on even repeats, backward on odd ones."""
    out: list[tuple[int, int]] = []
    for r in range(repeats):
        idx = range(n_engines) if r % 2 == 0 else range(n_engines - 1, -1, -1)
        out.extend((i, r) for i in idx)
    return out


async def check_ready(engines: Sequence[EngineTarget], *, model: str | None = None, timeout: float = 5.0) -> list[str]:
    """GET {base}/models on every engine; returns the model each will be asked for: ``model`` when
    given, else the first one the engine lists.

    Raises ``HTTPError`` with a one-line reason naming the engine that is not ready.
    """
    models: list[str] = []
    for e in engines:
        client = HTTPClient(e.url, connect_timeout=timeout)
        try:
            ids = await list_models(client, e.profile.api, e.api_key, timeout=timeout)
        except HTTPError as exc:
            raise HTTPError(f"engine {e.name} ({e.url}) is not ready: {exc}") from None
        finally:
            client.close()
        if model and model not in ids and e.profile.name != "tgi":  # TGI ignores the model field
            raise HTTPError(f"engine {e.name} does not serve model {model!r} (it serves: {', '.join(ids)})")
        models.append(model or ids[0])
    return models


def _install_fast_loop() -> None:
    try:
        import uvloop  # type: ignore[import-not-found]
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def run_bench(
    cfg: BenchConfig,
    models: Sequence[str],
    progress: ProgressFn | None = None,
    *,
    interruptible: bool = False,
    stop_signals: Sequence[int] = STOP_SIGNALS,
) -> dict[str, Any]:
    """Run every (engine, repeat) in ABBA order; returns the result document (JSON-ready).

    ``interruptible`` (main thread only): any of ``stop_signals`` (SIGINT, SIGTERM, SIGHUP) stops the
    run and the document holds the levels that finished, with ``"interrupted": true``."""
    started = _dt.datetime.now(_dt.UTC)
    raw_by_key: dict[tuple[int, int, int], LevelRaw] = {}
    collect = default_collect() if cfg.gpu == "nvml" else None
    order = run_order(len(cfg.engines), cfg.repeats)
    swaps: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    swapper = None
    interrupted = False
    if cfg.swap:
        from console.client.swap import Swapper

        swapper = await asyncio.to_thread(Swapper, cfg.config_path, [e.name for e in cfg.engines])
    loop = asyncio.get_running_loop()
    work = loop.create_task(_run_all(cfg, models, order, raw_by_key, collect, swapper, swaps, progress, runs))

    def on_sigint() -> None:
        nonlocal interrupted
        if not interrupted:  # once: a second cancel would cut the level's own clean-up short
            interrupted = True
            work.cancel()

    if interruptible:
        for signum in stop_signals:
            loop.add_signal_handler(signum, on_sigint)
    try:
        await work
    except asyncio.CancelledError:
        if not interrupted:
            raise  # cancelled from outside, not by Ctrl-C
    finally:
        if interruptible:
            for signum in stop_signals:
                loop.remove_signal_handler(signum)
                # The result is still to be sent: a late stop (the bench asks again each second)
                # must not kill this process with the signal's default action.
                signal.signal(signum, signal.SIG_IGN)
        if swapper is not None:
            swapper.close()
    # A level cut short is not a result: only the levels that finished are kept.
    runs = [r for r in runs if r["levels"]]
    labels = short_labels(cfg.engines)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "created": started.isoformat(),
        "finished": _dt.datetime.now(_dt.UTC).isoformat(),
        "enginedeck_version": _version(),
        "host": {"hostname": platform.node(), "python": sys.version.split()[0], "cpus": os.cpu_count()},
        "config": _config_dict(cfg),
        "engines": [
            {
                "name": e.name, "label": labels[i], "profile": e.profile.name, "url": e.url, "model": models[i],
                "api_key_env": e.api_key_env, "length_mode": length_mode(e.profile.api, cfg.params.fixed_length),
                "continuous_usage_requested": e.profile.api.supports_continuous_usage,
            }
            for i, e in enumerate(cfg.engines)
        ],
        "order": [{"engine": cfg.engines[ei].name, "repeat": rep} for ei, rep in order],
        "runs": runs,
    }
    if cfg.swap:
        doc["swaps"] = swaps
    doc["interrupted"] = interrupted
    doc["prompt_token_check"] = prompt_token_check(cfg, raw_by_key)
    doc["summary"] = combine(doc)
    return doc


async def _run_all(
    cfg: BenchConfig,
    models: Sequence[str],
    order: list[tuple[int, int]],
    raw_by_key: dict[tuple[int, int, int], LevelRaw],
    collect: Any,
    swapper: Any,
    swaps: list[dict[str, Any]],
    progress: ProgressFn | None,
    runs: list[dict[str, Any]],
) -> None:
    """Appends to ``runs`` as levels finish, so an interrupted run keeps what it completed."""
    for pos, (ei, rep) in enumerate(order):
        e = cfg.engines[ei]
        target = Target(e, models[ei], cfg.endpoint)
        if swapper is not None:
            if progress:
                progress(SwapStarted(e.name))
            swaps.append(await asyncio.to_thread(swapper.activate, e.name))
        if progress:
            progress(RunStarted(e.name, rep, position=pos, of=len(order)))
        levels_out: list[dict[str, Any]] = []
        runs.append({"engine": e.name, "repeat": rep, "position": pos, "levels": levels_out})
        for li, spec in enumerate(cfg.levels):
            warm = spec.warmup_count
            prompts = generate(cfg.workload, warm + spec.num_prompts, cfg.seed, tag=f"L{li}R{rep}-")
            if cfg.gpu == "simulated":
                gpu: GpuSampler | None = GpuSampler(SimulatedGpuCollect(e.name, e.profile.name, e.url))
            else:
                gpu = GpuSampler(collect, e.gpus) if collect is not None else None
            flushed = await flush_cache(e) if cfg.flush_cache else "not requested"
            raw = await run_level(
                target, spec, prompts, cfg.params, progress=progress, gpu=gpu,
                scrape_metrics=cfg.scrape_metrics, request_timeout=cfg.request_timeout,
            )  # fmt: skip
            raw_by_key[(ei, rep, li)] = raw
            summary = summarize(raw, cfg.slo)
            summary["cache_flush"] = flushed
            words = [p.input_words for p in prompts[warm:]]
            # the client's estimate (one token per word) next to the server's usage.prompt_tokens
            summary["tokens"]["prompt_words_mean"] = sum(words) / len(words) if words else None
            summary["records"] = [record_dict(r, raw.t_start_ns, events=cfg.keep_events) for r in raw.records]
            levels_out.append(summary)
            if progress:
                lat = summary["latency"]
                progress(LevelDone(
                    e.name, rep, spec.label, completed=summary["requests"]["completed"],
                    failed=summary["requests"]["failed"], ttft_p50_ms=lat["ttft_ms"]["p50"],
                    tpot_p50_ms=lat["tpot_ms"]["p50"], output_tput=summary["throughput"].get("output_tput"),
                    cut=summary["requests"]["cut"],
                ))  # fmt: skip


def short_labels(engines: Sequence[EngineTarget]) -> list[str]:
    """Column titles: configured names as they are; PROFILE@URL as the profile (plus port if ambiguous)."""
    base = [e.profile.name if "@" in e.name else e.name for e in engines]
    out = []
    for e, b in zip(engines, base, strict=True):
        if base.count(b) > 1 and "@" in e.name:
            port = e.url.rsplit(":", 1)[-1].split("/")[0]
            b = f"{b}:{port}"
        out.append(b)
    return out if len(set(out)) == len(out) else [e.name for e in engines]


def prompt_token_check(cfg: BenchConfig, raws: dict[tuple[int, int, int], LevelRaw]) -> dict[str, Any]:
    """Same prompt, same ``usage.prompt_tokens`` on every engine? Mismatches mean different work."""
    compared = 0
    mismatches: list[dict[str, Any]] = []
    for (ei, rep, li), raw in raws.items():
        if ei == 0:
            continue
        base = raws.get((0, rep, li))
        if base is None:
            continue
        a = {r.index: r.prompt_tokens for r in base.records}
        for r in raw.records:
            pa = a.get(r.index)
            if pa is None or r.prompt_tokens is None:
                continue
            compared += 1
            if pa != r.prompt_tokens:
                mismatches.append({
                    "level": cfg.levels[li].label, "repeat": rep, "prompt": r.prompt_id,
                    cfg.engines[0].name: pa, cfg.engines[ei].name: r.prompt_tokens,
                })  # fmt: skip
    return {"compared": compared, "mismatches": len(mismatches), "examples": mismatches[:5], "ok": not mismatches}


# Which way is better for a metric: "lower" (latencies, failures, energy per token), "higher"
# (throughput, goodput, hit rate, tokens per joule) or "neutral" (what describes the work or the
# test itself rather than the engine's quality: token counts, GPU load, the load generator's health).
Direction = Literal["lower", "higher", "neutral"]
# What B is against A on one metric, by its direction; None where it has none or a value is missing.
Verdict = Literal["better", "worse", "same"]

# The one table of the metrics combined across repeats: (key, path into a level summary, direction).
# The screen, the CLI's table, Markdown and the JSON document (``summary.direction``) all read it.
SUMMARY_METRICS: tuple[tuple[str, tuple[str, ...], Direction], ...] = (
    # Out of the same prompts: more answered is better (fewer is a failure the next rows count).
    ("completed", ("requests", "completed"), "higher"),
    ("failed", ("requests", "failed"), "lower"),
    # Still running when --max-duration ended the level: the test's time limit, counted apart.
    ("cut", ("requests", "cut"), "neutral"),
    ("error_rate", ("requests", "error_rate"), "lower"),
    ("ttft_p50_ms", ("latency", "ttft_ms", "p50"), "lower"),
    ("ttft_p90_ms", ("latency", "ttft_ms", "p90"), "lower"),
    ("ttft_p99_ms", ("latency", "ttft_ms", "p99"), "lower"),
    ("ttfo_p50_ms", ("latency", "ttfo_ms", "p50"), "lower"),
    ("tpot_p50_ms", ("latency", "tpot_ms", "p50"), "lower"),
    ("tpot_p90_ms", ("latency", "tpot_ms", "p90"), "lower"),
    ("tpot_p99_ms", ("latency", "tpot_ms", "p99"), "lower"),
    ("itl_p50_ms", ("latency", "itl_ms", "p50"), "lower"),
    ("itl_p90_ms", ("latency", "itl_ms", "p90"), "lower"),
    ("itl_p99_ms", ("latency", "itl_ms", "p99"), "lower"),
    ("chunk_gap_p99_ms", ("latency", "chunk_gap_ms", "p99"), "lower"),
    ("e2e_p50_ms", ("latency", "e2e_ms", "p50"), "lower"),
    ("e2e_p90_ms", ("latency", "e2e_ms", "p90"), "lower"),
    ("e2e_p99_ms", ("latency", "e2e_ms", "p99"), "lower"),
    ("request_tput", ("throughput", "request_tput"), "higher"),
    ("output_tput", ("throughput", "output_tput"), "higher"),
    ("steady_output_tput", ("throughput", "steady_output_tput"), "higher"),
    ("total_tput", ("throughput", "total_tput"), "higher"),
    ("goodput", ("throughput", "goodput"), "higher"),
    ("slo_attainment", ("throughput", "slo_attainment"), "higher"),
    # Closed loop it is about C whatever the engine; open loop it follows latency, counted there.
    ("avg_inflight", ("throughput", "avg_inflight"), "neutral"),
    # The work itself: a different count means a different tokenizer or template, not a better engine.
    ("prompt_tokens_mean", ("tokens", "prompt_mean"), "neutral"),
    ("output_tokens_mean", ("tokens", "output_mean"), "neutral"),
    ("bundling_mean", ("tokens", "bundling_mean"), "neutral"),
    ("prefix_hit_rate", ("server", "prefix_hit_rate"), "higher"),
    # A share of each engine's own KV pool, which each sizes its own way (vLLM's gpu_memory_utilization,
    # SGLang's mem_fraction_static): two engines' peaks are not better or worse than each other.
    ("kv_usage_peak", ("server", "kv_usage_peak"), "neutral"),
    ("preemptions", ("server", "preemptions"), "lower"),
    ("server_ttft_p50_ms", ("server", "ttft", "p50_ms"), "lower"),
    # Network and client overhead, give or take a histogram bucket (it can be negative): not the engine.
    ("client_minus_server_ttft_p50_ms", ("server", "client_minus_server_ttft_p50_ms"), "neutral"),
    # Load and power alone say nothing without the work done: tokens per joule does.
    ("gpu_util_mean", ("gpu", "util_mean_percent"), "neutral"),
    ("gpu_power_mean_w", ("gpu", "power_mean_w"), "neutral"),
    ("tokens_per_joule", ("gpu", "tokens_per_joule"), "higher"),
    ("joules_per_1k_output", ("gpu", "joules_per_1k_output"), "lower"),
    ("joules_per_response", ("gpu", "joules_per_response"), "lower"),
    # The load generator's own health (CLIENT-BOUND), not the engine's.
    ("client_cpu_percent", ("client", "cpu_percent"), "neutral"),
    ("loop_lag_p99_ms", ("client", "loop_lag_ms", "p99"), "neutral"),
    ("schedule_lag_p99_ms", ("client", "schedule_lag_ms", "p99"), "neutral"),
)
DIRECTION: dict[str, Direction] = {key: d for key, _, d in SUMMARY_METRICS}

# B within 3% of A (either way) is "same", not better or worse: a difference that small is not a
# result of one run. Measured A/A (two identical simulators, 32 requests per level, a busy 2-core
# host): requests/s and the p50 latencies came out 0.2-2.4% apart at C=1, so 3% keeps an engine
# against its twin "same" there; but the p50s at C=8 differed by up to 11%, and TTFT p99 at C=1 by
# 28%, which no fixed band can absorb without hiding real differences: that is what --repeats is
# for, whose spread widens "same" (``verdict``).
SAME_BAND = 0.03


def verdict(key: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> Verdict | None:
    """B against A on metric ``key`` from their combined cells (``{median, min, max, n}``): "better",
    "worse" or "same" by the metric's direction; None for a neutral metric or a missing value.

    "same" when B's median is within ``SAME_BAND`` of A's, or, with repeats on both, when their
    min-max ranges overlap (the difference is within what the repeats already disagree by)."""
    direction = DIRECTION.get(key, "neutral")
    if direction == "neutral" or a is None or b is None:
        return None
    va, vb = a["median"], b["median"]
    if va == vb:
        return "same"
    if va > 0 and vb >= 0 and abs(vb / va - 1) < SAME_BAND:
        return "same"
    if a.get("n", 1) > 1 and b.get("n", 1) > 1 and a["min"] <= b["max"] and b["min"] <= a["max"]:
        return "same"
    # From A = 0 (no failure, no preemption) any B is infinitely far: the sign says which way.
    return "better" if (vb < va) == (direction == "lower") else "worse"


def _dig(d: Any, path: Sequence[str]) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def combine(doc: dict[str, Any]) -> dict[str, Any]:
    """Per level: for every engine median/min/max of each metric over repeats; B/A ratios of medians."""
    names = [e["name"] for e in doc["engines"]]
    n_levels = len(doc["config"]["levels"])
    levels = []
    for li in range(n_levels):
        if not any(li < len(run["levels"]) for run in doc["runs"]):
            continue  # an interrupted run never reached this level
        per_engine: dict[str, dict[str, Any]] = {}
        flags: dict[str, dict[str, Any]] = {}
        for name in names:
            sums = [run["levels"][li] for run in doc["runs"] if run["engine"] == name and li < len(run["levels"])]
            metrics: dict[str, Any] = {}
            for key, path, _ in SUMMARY_METRICS:
                vals = [v for s in sums if isinstance(v := _dig(s, path), int | float) and not math.isnan(v)]
                metrics[key] = (
                    {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}
                    if vals else None
                )  # fmt: skip
            per_engine[name] = metrics
            flags[name] = {
                "client_bound": any(_dig(s, ("client", "client_bound")) for s in sums),
                "client_bound_reasons": sorted(
                    {x for s in sums for x in (_dig(s, ("client", "client_bound_reasons")) or [])}
                ),
                "bundled": any((_dig(s, ("tokens", "bundled_requests")) or 0) > 0 for s in sums),
                "tokens_estimated": any((_dig(s, ("tokens", "estimated_requests")) or 0) > 0 for s in sums),
                "length_mode": sums[0]["length_mode"] if sums else None,
                "server_metrics": any(_dig(s, ("server", "available")) for s in sums),
                "server_metrics_error": next((e for s in sums if (e := _dig(s, ("server", "error")))), ""),
                "gpu_reason": next((e for s in sums if (e := _dig(s, ("gpu", "reason")))), ""),
                "stopped_early": next((e for s in sums if (e := _dig(s, ("requests", "stopped_early")))), ""),
            }
        ratio: dict[str, float | None] = {}
        verdicts: dict[str, Verdict | None] = {}
        if len(names) >= 2:
            a, b = per_engine[names[0]], per_engine[names[1]]
            for key, _, _ in SUMMARY_METRICS:
                va, vb = a.get(key), b.get(key)
                # Ratios only of positive quantities (a signed difference has no meaningful ratio).
                ok = va is not None and vb is not None and va["median"] > 0 and vb["median"] >= 0
                ratio[key] = vb["median"] / va["median"] if ok and va is not None and vb is not None else None
                verdicts[key] = verdict(key, va, vb)
        levels.append({
            "label": doc["config"]["levels"][li]["label"], "engines": per_engine, "flags": flags, "ratio_b_a": ratio,
            "verdict_b_a": verdicts,
        })  # fmt: skip
    return {"levels": levels, "engines": names, "direction": dict(DIRECTION), "same_band": SAME_BAND}


def _config_dict(cfg: BenchConfig) -> dict[str, Any]:
    p = cfg.params
    return {
        "levels": [lv.describe() for lv in cfg.levels],
        "workload": cfg.workload.describe(),
        "params": {
            "max_tokens": p.max_tokens, "temperature": p.temperature, "fixed_length": p.fixed_length,
            "top_p": p.top_p, "seed": p.seed, "extra": dict(p.extra),
        },
        "repeats": cfg.repeats,
        "seed": cfg.seed,
        "slo_ms": dict(cfg.slo),
        "endpoint": cfg.endpoint,
        "stream_options": "include_usage (+continuous_usage_stats where the profile supports it)",
        "cache_flushed_between_levels": cfg.flush_cache,
        "scrape_metrics": cfg.scrape_metrics,
    }


def _version() -> str:
    try:
        from console import __version__

        return str(__version__)
    except ImportError:  # pragma: no cover
        return "unknown"


# ---- child process -------------------------------------------------------------------------------------------
# The child puts its progress events on the queue, then one _Result or _ChildFailed.


@dataclass(frozen=True, slots=True)
class _Result:
    doc: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _ChildFailed:
    message: str  # one line: the exception's type and text


def _watch_parent(parent: int) -> None:
    """End this load process as soon as the bench that started it is gone (killed with SIGKILL, say):
    nobody would read its results, and it must not keep sending requests to the engine."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _child(cfg: BenchConfig, models: list[str], q: Any, quiet: bool = False, parent: int | None = None) -> None:
    # Ctrl-C, a terminal's hangup and a group-wide SIGTERM reach this process too (same process
    # group): run_bench turns each into "stop and report the levels that finished"; until its
    # handlers are in place, ignore them.
    # A signal the bench started with ignored (nohup: SIGHUP) reaches us ignored and stays so.
    # ASK_STOP is the bench's own request (``run_in_subprocess``), whatever the user's signals are.
    stop_signals = (*(s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN), ASK_STOP)
    for signum in stop_signals:
        signal.signal(signum, signal.SIG_IGN)
    if parent is not None:
        _watch_parent(parent)
    if quiet:  # under a full-screen UI nothing may reach the terminal
        devnull = open(os.devnull, "w")  # noqa: SIM115
        os.dup2(devnull.fileno(), 1)
        os.dup2(devnull.fileno(), 2)
    _install_fast_loop()

    try:
        doc = asyncio.run(run_bench(cfg, models, q.put, interruptible=True, stop_signals=stop_signals))
    except BaseException as exc:  # report any failure as one line to the parent
        q.put(_ChildFailed(f"{type(exc).__name__}: {exc}"))
        return
    q.put(_Result(doc))


class BenchFailed(Exception):
    pass


def run_in_subprocess(
    cfg: BenchConfig,
    models: Sequence[str],
    on_progress: ProgressFn | None = None,
    *,
    should_stop: Callable[[], bool] | None = None,
    interrupted: Callable[[], bool] | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run the bench in a fresh process; progress events are passed to ``on_progress`` here.

    ``interrupted`` (polled between progress events, e.g. a flag a SIGINT/SIGTERM/SIGHUP handler
    sets) or a KeyboardInterrupt here asks the child to stop: the document it returns holds the
    levels that finished and ``"interrupted": true``; a second KeyboardInterrupt gives up at once
    (the child is killed). ``should_stop``: abandon the run (BenchFailed). ``quiet``: the child's
    stdout/stderr go to /dev/null (use it under a full-screen UI)."""
    ctx = mp.get_context("spawn")
    saved = sys.stderr
    try:
        # A UI that captures stderr (Textual) gives it no usable fd; multiprocessing's resource
        # tracker passes stderr's fd to its helper process, so hand it the real one while starting.
        try:
            sys.stderr.fileno()
        except (OSError, ValueError, AttributeError):
            sys.stderr = sys.__stderr__
        else:
            if sys.stderr.fileno() < 0:
                sys.stderr = sys.__stderr__
        _start_resource_tracker()
        q: Any = ctx.Queue()  # its semaphore needs the resource tracker
        proc = ctx.Process(target=_child, args=(cfg, list(models), q, quiet, os.getpid()), daemon=True,
                           name="enginedeck-bench")  # fmt: skip
        proc.start()
    finally:
        sys.stderr = saved

    def ask_child_to_stop() -> None:
        if proc.pid is not None and proc.is_alive():
            os.kill(proc.pid, ASK_STOP)  # also when only we got the signal (kill -TERM PID)

    try:
        return _collect(proc, q, on_progress, should_stop, interrupted, ask_child_to_stop)
    except KeyboardInterrupt:
        if interrupted is not None and interrupted():
            raise  # a second stop after ``interrupted``: give up at once
        # Raised wherever this thread was: inside the queue's read it can leave the read lock
        # taken and the child's result unread (seen under load as "did not stop within 30 s").
        # Callers that own the signals pass ``interrupted`` instead, as `enginedeck bench` does.
        return _collect(proc, q, on_progress, None, lambda: True, ask_child_to_stop)
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(1)
        q.close()


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with SIGHUP ignored (an ignored signal stays ignored
    across exec). It ignores SIGINT and SIGTERM itself but not SIGHUP: a terminal's hangup would
    kill it, and its replacement prints tracebacks about the queue's semaphores."""
    import threading
    from multiprocessing import resource_tracker

    if threading.current_thread() is not threading.main_thread():
        resource_tracker.ensure_running()
        return
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        resource_tracker.ensure_running()
    finally:
        signal.signal(signal.SIGHUP, old)


def _collect(
    proc: Any,
    q: Any,
    on_progress: ProgressFn | None,
    should_stop: Callable[[], bool] | None,
    interrupted: Callable[[], bool] | None,
    ask_child_to_stop: Callable[[], object],
) -> dict[str, Any]:
    """Progress events until the child's result (or its error, or its death). Once ``interrupted``
    says so, the child is asked to stop and gets INTERRUPT_GRACE seconds to send what finished."""
    deadline: float | None = None
    asked = 0.0
    while True:
        if should_stop is not None and should_stop():
            raise BenchFailed("stopped")
        now = time.monotonic()
        if deadline is None and interrupted is not None and interrupted():
            deadline = now + INTERRUPT_GRACE
        if deadline is not None:
            if now > deadline:
                raise BenchFailed(f"the bench process did not stop within {INTERRUPT_GRACE:g} s of Ctrl-C")
            if now - asked >= ASK_AGAIN_S:
                asked = now
                ask_child_to_stop()
        try:
            ev: BenchEvent | _Result | _ChildFailed = q.get(timeout=0.2)
        except _queue.Empty:
            if not proc.is_alive():
                raise BenchFailed(f"bench process exited with code {proc.exitcode}") from None
            continue
        if isinstance(ev, _Result):
            return ev.doc
        if isinstance(ev, _ChildFailed):
            raise BenchFailed(ev.message)
        if on_progress is not None:
            on_progress(ev)


