"""The engine's own view of a benchmark level: ``/metrics`` scraped before, during and after.

Parsing and name mapping are the telemetry layer's (``console.telemetry.metrics.normalize``); this module
only differences two readings (counters and histogram buckets, summed over models and series) and
keeps the peaks of gauges sampled during the level (KV usage, running, waiting).

    prefix_hit_rate  = Δnumerator / Δdenominator (profile ``metrics.prefix_hit_rate``),
                       else the hit-rate gauge at the end of the level (trtllm's cumulative gauge)
    server TTFT p50  = histogram_quantile(0.5) of the Δ bucket counts of the ``ttft`` histogram
    preemptions      = Δ preemptions counter
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from console.profiles import EngineProfile
from console.telemetry.engine.scrape import MAX_METRICS_BYTES
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.readings import HistogramSeries, Reading
from console.telemetry.metrics.windows import histogram_quantile
from console.transport.bodies import BodyError, decode_body
from console.transport.http import HTTPClient, HTTPError


class MetricsScraper:
    """Fetch + normalise one engine's metrics with the bench's own HTTP client (separate pool)."""

    def __init__(self, profile: EngineProfile, url: str, api_key: str | None, *, timeout: float = 2.0) -> None:
        self.profile = profile
        self.client = HTTPClient(url)
        self.timeout = timeout
        path = profile.metrics.path
        self.path = path
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.error = ""
        self.enabled = not profile.metrics.destructive and profile.metrics.format == "prometheus" and bool(
            profile.metrics.map
        )

    async def scrape(self) -> Reading | None:
        if not self.enabled:
            return None
        try:
            resp = await self.client.get(self.path, headers=self.headers, timeout=self.timeout)
        except HTTPError as exc:
            self.error = str(exc)
            return None
        if resp.status != 200:
            self.error = f"GET {self.path}: HTTP {resp.status}"
            return None
        try:  # no Accept-Encoding is sent; decode anyway in case a proxy compresses regardless
            body = decode_body(resp.body, resp.headers.get("content-encoding", ""), MAX_METRICS_BYTES)
        except BodyError as exc:
            self.error = f"GET {self.path}: {exc}"
            return None
        reading = normalize(self.profile, body, full=False)
        if not reading.ok:
            self.error = f"GET {self.path}: {reading.error_summary()}"
            return None
        return reading

    def close(self) -> None:
        self.client.close()


def counter_total(reading: Reading, canonical: str) -> float | None:
    vals = [v for m in reading.models.values() if (v := m.counter_total(canonical)) is not None]
    return math.fsum(vals) if vals else None


def gauge(reading: Reading, canonical: str, how: str = "max") -> float | None:
    vals = [m.gauges[canonical] for m in reading.models.values() if canonical in m.gauges]
    if not vals:
        return None
    return max(vals) if how == "max" else math.fsum(vals)


def _hist_sum(reading: Reading, canonical: str) -> dict[tuple[float, ...], tuple[list[float], float, float]]:
    """Histograms of all models and series summed, per bucket layout."""
    out: dict[tuple[float, ...], tuple[list[float], float, float]] = {}
    for m in reading.models.values():
        for h in m.histograms.get(canonical, {}).values():
            _add(out, h)
    return out


def _add(out: dict[tuple[float, ...], tuple[list[float], float, float]], h: HistogramSeries) -> None:
    counts, s, c = out.get(h.bounds, ([0.0] * len(h.bounds), 0.0, 0.0))
    count = h.count if h.count is not None else math.nan  # unknown total: no delta count
    out[h.bounds] = ([a + b for a, b in zip(counts, h.counts, strict=True)], s + (h.sum or 0.0), c + count)


def histogram_delta_quantiles(before: Reading, after: Reading, canonical: str) -> dict[str, Any] | None:
    """p50/p90/p99 (ms), mean (ms) and count of the observations made between two readings."""
    a = _hist_sum(after, canonical)
    b = _hist_sum(before, canonical)
    if not a:
        return None
    bounds, (counts, s, c) = max(a.items(), key=lambda kv: kv[1][2])
    b_counts, b_s, b_c = b.get(bounds, ([0.0] * len(bounds), 0.0, 0.0))
    delta = tuple(max(0.0, x - y) for x, y in zip(counts, b_counts, strict=True))
    dc = c - b_c
    if not math.isfinite(dc):
        return None  # neither _count nor a +Inf bucket: the total, and so every quantile, is unknown
    if dc <= 0:
        return {"count": 0}
    out: dict[str, Any] = {"count": dc, "mean_ms": (s - b_s) / dc * 1000.0}
    for label, q in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
        v, capped = histogram_quantile(q, bounds, delta)
        out[label] = None if v is None else v * 1000.0
        if capped:
            out.setdefault("capped", []).append(label)
    return out


@dataclass(slots=True)
class LevelServerStats:
    """What the engine itself said about one level."""

    available: bool = False
    error: str = ""
    samples: int = 0
    kv_usage_peak: float | None = None
    running_peak: float | None = None
    waiting_peak: float | None = None
    prefix_hit_rate: float | None = None
    prefix_hit_rate_source: str = ""
    preemptions: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    cached_prompt_tokens: float | None = None
    ttft: dict[str, Any] | None = None
    itl: dict[str, Any] | None = None
    e2e: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def sample(self, reading: Reading) -> None:
        self.samples += 1
        for name, attr in (("kv_usage", "kv_usage_peak"), ("running", "running_peak"), ("waiting", "waiting_peak")):
            v = gauge(reading, name, "max" if name == "kv_usage" else "sum")
            if v is not None:
                cur = getattr(self, attr)
                setattr(self, attr, v if cur is None else max(cur, v))

    def finish(self, profile: EngineProfile, before: Reading | None, after: Reading | None) -> None:
        if before is None or after is None:
            return
        self.available = True
        self.sample(after)

        def delta(name: str) -> float | None:
            x, y = counter_total(after, name), counter_total(before, name)
            return None if x is None or y is None else max(0.0, x - y)

        self.preemptions = delta("preemptions")
        self.prompt_tokens = delta("prompt_tokens")
        self.generation_tokens = delta("generation_tokens")
        self.cached_prompt_tokens = delta("cached_prompt_tokens")
        hr = profile.metrics.prefix_hit_rate
        if hr is not None:
            nums = [delta(n) for n in hr.numerator]
            dens = [delta(n) for n in hr.denominator]
            if all(v is not None for v in nums + dens):
                den = math.fsum(v for v in dens if v is not None)
                if den > 0:
                    self.prefix_hit_rate = math.fsum(v for v in nums if v is not None) / den
                    self.prefix_hit_rate_source = hr.formula or "Δnumerator/Δdenominator"
        if self.prefix_hit_rate is None:
            g = gauge(after, "prefix_hit_rate_gauge", "max")
            if g is not None:
                self.prefix_hit_rate = g
                self.prefix_hit_rate_source = "gauge at end of level"
        self.ttft = histogram_delta_quantiles(before, after, "ttft")
        self.itl = histogram_delta_quantiles(before, after, "itl")
        self.e2e = histogram_delta_quantiles(before, after, "e2e")

    def to_dict(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "error": self.error,
            "samples": self.samples,
            "kv_usage_peak": self.kv_usage_peak,
            "running_peak": self.running_peak,
            "waiting_peak": self.waiting_peak,
            "prefix_hit_rate": self.prefix_hit_rate,
            "prefix_hit_rate_source": self.prefix_hit_rate_source,
            "preemptions": self.preemptions,
            "prompt_tokens": self.prompt_tokens,
            "generation_tokens": self.generation_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "ttft": self.ttft,
            "itl": self.itl,
            "e2e": self.e2e,
        }
