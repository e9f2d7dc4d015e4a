"""Run-level aggregates of one level and the client self-checks (definitions: docs/bench-json-schema.md).

M = successful, non-warmup requests of the level (closed loop: every request after the first C,
all sent while C streams were in flight; open loop: all requests).

    D_run          = max_M t_K - min_M t_send
    request_tput   = |M| / D_run            output_tput = Σ_M N / D_run      total_tput = Σ_M (P + N) / D_run
    goodput        = |good| / D_run         slo_attainment = |good| / |M|
    error_rate     = failed / (failed + |M|)    (a request cut at --max-duration is neither)
    avg_inflight   = Σ_M (t_K - t_send) / D_run
    steady_output_tput = tokens_in(w0, w1) / (w1 - w0), tokens of every event with w0 <= t_k < w1
                     (of successful requests only: a failed request's tokens are no output),
                     w0 = end of warmup (the C-th completion), w1 = last send (excludes the drain tail)
    cache_hit_rate (usage) = Σ P_cached / Σ P    (only where the engine fills cached_tokens)

A request is *good* iff TTFT <= SLO_ttft and TPOT <= SLO_tpot and E2E <= SLO_e2e for the SLOs
given (TPOT counts as 0 when N <= 1, as in vLLM). The run is marked client-bound when the load
generator used more than 70 % of a core or its event-loop lag p99 exceeded 5 ms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from console.client.gpu import energy_between
from console.client.loadgen import LevelRaw
from console.client.timing import NS_PER_MS, Dist, RequestMetrics, compute

CLIENT_BOUND_CPU = 70.0
CLIENT_BOUND_LAG_MS = 5.0


def parse_slo(text: str | None) -> dict[str, float]:
    """``ttft:500,tpot:50`` (ms) -> {"ttft": 500.0, "tpot": 50.0}. Raises ValueError with a reason."""
    out: dict[str, float] = {}
    if not text:
        return out
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        key, sep, val = part.partition(":")
        key = key.strip().lower().removesuffix("_ms")
        if not sep or key not in ("ttft", "tpot", "e2e"):
            raise ValueError(f"bad SLO {part!r}: use ttft:MS, tpot:MS or e2e:MS")
        try:
            out[key] = float(val)
        except ValueError:
            raise ValueError(f"bad SLO value {val!r} in {part!r}: milliseconds expected") from None
        if not out[key] > 0:
            raise ValueError(f"SLO {key} must be > 0 ms")
    return out


def is_good(m: RequestMetrics, slo: Mapping[str, float]) -> bool:
    if not slo:
        return True
    if "ttft" in slo and (m.ttft_ms is None or m.ttft_ms > slo["ttft"]):
        return False
    tpot = m.tpot_ms if m.output_tokens > 1 and m.tpot_ms is not None else 0.0
    if "tpot" in slo and tpot > slo["tpot"]:
        return False
    return not ("e2e" in slo and (m.e2e_ms is None or m.e2e_ms > slo["e2e"]))


def summarize(raw: LevelRaw, slo: Mapping[str, float] | None = None) -> dict[str, Any]:
    slo = slo or {}
    measured = [r for r in raw.records if not r.warmup]
    # Every request is counted exactly once: ok (a 2xx answer that carried a token), cut (still
    # running when --max-duration ended the level: no fault of the engine's) or failed.
    ok = [r for r in measured if r.ok and (r.event_t_ns or not r.streamed)]
    cut = [r for r in measured if r.cut]
    failed = [r for r in measured if not r.cut and not (r.ok and (r.event_t_ns or not r.streamed))]
    metrics = [compute(r) for r in ok]
    out: dict[str, Any] = {"level": raw.spec.describe(), "length_mode": raw.length_mode}
    n_ok = len(ok)
    out["requests"] = {
        "sent": len(measured),
        "completed": n_ok,
        "failed": len(failed),
        "cut": len(cut),
        "warmup": len(raw.records) - len(measured),
        "error_rate": len(failed) / (len(failed) + n_ok) if (failed or n_ok) else None,
        "errors": _error_samples(failed),
        "stopped_early": raw.stopped_early,
        "stopped_on_errors": raw.stopped_on_errors,
    }
    dists: dict[str, Any] = {}
    for key, values in (
        ("ttft_ms", [m.ttft_ms for m in metrics]),
        ("ttfo_ms", [m.ttfo_ms for m in metrics]),
        ("tpot_ms", [m.tpot_ms for m in metrics]),
        ("e2e_ms", [m.e2e_ms for m in metrics]),
        ("itl_ms", [x for m in metrics for x in m.itl_ms]),
        ("chunk_gap_ms", [x for m in metrics for x in m.chunk_gaps_ms]),
        ("client_queue_ms", [m.client_queue_ms for m in metrics]),
        ("e2e_from_sched_ms", [m.e2e_from_sched_ms for m in metrics]),
        ("decode_tok_s", [m.decode_tok_s for m in metrics]),
    ):
        dists[key] = Dist.of([v for v in values if v is not None]).to_dict()
    out["latency"] = dists

    total_n = math.fsum(m.output_tokens for m in metrics)
    p_vals = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    cached = [r.cached_tokens for r in ok if r.cached_tokens is not None]
    total_p = float(sum(p_vals))
    first_send = min((r.t_send_ns for r in ok), default=0)
    last_tok = max((r.event_t_ns[-1] if r.event_t_ns else (r.t_done_ns or 0) for r in ok), default=0)
    d_run = (last_tok - first_send) / 1e9 if n_ok else 0.0
    good = sum(1 for m in metrics if is_good(m, slo))
    tp: dict[str, Any] = {"duration_s": d_run}
    if d_run > 0:
        tp |= {
            "request_tput": n_ok / d_run,
            "output_tput": total_n / d_run,
            "total_tput": (total_n + total_p) / d_run,
            "goodput": good / d_run if slo else None,
            "avg_inflight": math.fsum((m.e2e_ms or 0.0) for m in metrics) / 1000.0 / d_run,
        }
    tp["slo_attainment"] = good / n_ok if (slo and n_ok) else None
    tp["slo"] = dict(slo)
    tp |= _steady(raw)
    out["throughput"] = tp

    out["tokens"] = {
        "output_total": total_n,
        "prompt_total": total_p if p_vals else None,
        "prompt_mean": total_p / len(p_vals) if p_vals else None,
        "output_mean": total_n / n_ok if n_ok else None,
        "estimated_requests": sum(1 for m in metrics if m.tokens_estimated),
        "continuous_usage_requests": sum(1 for m in metrics if m.continuous_usage),
        "bundling_mean": _mean([m.bundling for m in metrics if m.bundling is not None]),
        "bundled_requests": sum(1 for m in metrics if m.bundled),
        "cache_hit_rate_usage": (sum(cached) / total_p) if cached and total_p else None,
        "finish_reasons": _count(r.finish_reason or "none" for r in ok),
    }
    out["server"] = raw.server.to_dict()
    st = raw.server.ttft
    c50 = dists["ttft_ms"]["p50"]
    out["server"]["client_minus_server_ttft_p50_ms"] = (
        c50 - st["p50_ms"] if st and st.get("p50_ms") is not None and c50 is not None else None
    )
    out["gpu"] = dict(raw.gpu) if raw.gpu else {"available": False, "reason": "no GPU source"}
    out["gpu"].update(_energy(out["gpu"], raw, tp, out["tokens"]["output_mean"]))
    out["client"] = _selfcheck(raw, ok)
    return out


def _energy(gpu: dict[str, Any], raw: LevelRaw, tp: Mapping[str, Any], output_mean: float | None) -> dict[str, Any]:
    """Energy of the steady-state window from the GPUs' energy series (ML.ENERGY's method: ramp-up
    and drain excluded): tokens per joule, J per 1k output tokens, J per response. Without an energy
    series, tokens per joule from the mean sampled power (``tokens_per_joule_from`` says which)."""
    series = gpu.pop("energy_series", None) or []
    span = tp.get("steady_window_s")
    otp = tp.get("steady_output_tput")
    joules = None
    if series and raw.w0_ns is not None and raw.w1_ns is not None:
        joules = energy_between(series, raw.w0_ns, raw.w1_ns)
    if joules and otp and span:
        tokens = otp * span
        per_k = 1000.0 * joules / tokens
        return {"tokens_per_joule": tokens / joules, "joules_per_1k_output": per_k, "energy_j_steady": joules,
                "joules_per_response": per_k * output_mean / 1000.0 if output_mean else None,
                "tokens_per_joule_from": gpu.get("energy_source")}  # fmt: skip
    power = gpu.get("power_mean_w")
    otp = otp or tp.get("output_tput")
    tpj = otp / power if power and otp else None
    return {"tokens_per_joule": tpj, "joules_per_1k_output": 1000.0 / tpj if tpj else None,
            "energy_j_steady": None, "joules_per_response": None,
            "tokens_per_joule_from": "mean power" if tpj is not None else None}  # fmt: skip


def _steady(raw: LevelRaw) -> dict[str, Any]:
    w0, w1 = raw.w0_ns, raw.w1_ns
    if w0 is None or w1 is None or w1 <= w0:
        return {"steady_output_tput": None, "steady_window_s": None}
    tokens = 0.0
    for r in raw.records:
        if not r.event_t_ns or not r.ok:  # a failed request's tokens are no output
            continue
        m = compute(r)
        for t, n in zip(r.event_t_ns, m.token_counts, strict=False):
            if w0 <= t < w1:
                tokens += n
    span = (w1 - w0) / 1e9
    return {"steady_output_tput": tokens / span, "steady_window_s": span}


def _selfcheck(raw: LevelRaw, ok: list[Any]) -> dict[str, Any]:
    sc = raw.selfcheck
    lag = Dist.of(sc.loop_lag_ms)
    out: dict[str, Any] = {
        "cpu_percent": sc.cpu_percent,
        "cpu_s": sc.cpu_s,
        "wall_s": sc.wall_s,
        "events": sc.events,
        "events_per_s": sc.events / sc.wall_s if sc.wall_s > 0 else None,
        "loop_lag_ms": {"n": lag.n, "p50": lag.p50, "p99": lag.p99, "max": lag.max},
    }
    if raw.spec.mode == "open":
        lagv = [(r.t_send_ns - r.t_sched_ns) / NS_PER_MS for r in raw.records if r.t_sched_ns and not r.warmup]
        d = Dist.of(lagv)
        out["schedule_lag_ms"] = {"p50": d.p50, "p99": d.p99, "max": d.max}
        sends = sorted(r.t_send_ns for r in raw.records if not r.warmup)
        span = (sends[-1] - sends[0]) / 1e9 if len(sends) > 1 else 0.0
        out["achieved_rate"] = (len(sends) - 1) / span if span > 0 else None
        out["target_rate"] = raw.spec.rate
    reasons = []
    if sc.cpu_percent > CLIENT_BOUND_CPU:
        reasons.append(f"client CPU {sc.cpu_percent:.0f}% > {CLIENT_BOUND_CPU:.0f}%")
    if lag.p99 is not None and lag.p99 > CLIENT_BOUND_LAG_MS:
        reasons.append(f"loop lag p99 {lag.p99:.1f} ms > {CLIENT_BOUND_LAG_MS:g} ms")
    out["client_bound"] = bool(reasons)
    out["client_bound_reasons"] = reasons
    return out


def _error_samples(failed: list[Any], limit: int = 3) -> list[str]:
    seen: dict[str, int] = {}
    for r in failed:
        msg = r.error or ("cancelled" if r.cancelled else "no token received" if r.ok else f"HTTP {r.status}")
        seen[msg] = seen.get(msg, 0) + 1
    return [f"{m} (x{n})" for m, n in sorted(seen.items(), key=lambda kv: -kv[1])[:limit]]


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def record_dict(r: Any, t0: int, *, events: bool = True) -> dict[str, Any]:
    """One raw per-request record for export (times in ns relative to the level start)."""

    def rel(t: int | None) -> int | None:
        return None if not t else t - t0

    d: dict[str, Any] = {
        "index": r.index,
        "prompt_id": r.prompt_id,
        "warmup": r.warmup,
        "t_sched_ns": rel(r.t_sched_ns),
        "t_send_ns": rel(r.t_send_ns),
        "t_first_event_ns": rel(r.t_first_event_ns),
        "t_first_token_ns": rel(r.event_t_ns[0]) if r.event_t_ns else None,
        "t_first_visible_ns": rel(r.t_first_visible_ns),
        "t_last_token_ns": rel(r.event_t_ns[-1]) if r.event_t_ns else None,
        "t_done_ns": rel(r.t_done_ns),
        "events": len(r.event_t_ns),
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cached_tokens": r.cached_tokens,
        "finish_reason": r.finish_reason,
        "status": r.status,
        "error": r.error,
        "ok": r.ok,
    }
    if events:
        d["event_t_ns"] = [t - t0 for t in r.event_t_ns]
        d["event_usage"] = list(r.event_usage)
    return d
