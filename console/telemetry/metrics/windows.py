"""Time windows over successive readings: counter rates, windowed histogram quantiles, hit rates.

``EngineMetricsState(profile)`` receives one normalised ``Reading`` per scrape (``ingest``) and
produces ``ModelMetrics`` per served model plus a total (``metrics``).

**Counter resets (per series).** A series whose value drops (the engine or one DP replica
restarted, or a series was re-created) starts a *new baseline*: the increase across the scrape
interval that contains the reset is counted as 0, later increases count normally. We do not assume
"post-reset value = increase from 0" (Prometheus' choice): after a restart with a long scrape gap
that would put everything done since the restart into one interval, a spike. New baseline never
over-counts; it under-counts at most one scrape interval of one series. Histograms use the same
rule per series (a drop of ``count`` or of any bucket), and a change of bucket layout is a new
series. Rates are therefore never negative.

**New series.** A counter series seen for the first time in a metric that was already present at the
previous scrape was born since (engines create labelled series on first use: the first
``request_error_total{http_code="500"}``, TGI's first ``request_failure{err}``): it was 0 then, and
all of its value counts. Where the engine exports ``_created`` and it is older than the previous
scrape (by more than ``CREATED_SLACK``), the series existed unseen and starts at its baseline
instead, as does every series of a metric seen for the first time (the console's first scrape).

**Windows.** A rate over W seconds is (Σ increase since the newest frame at least W old) / (elapsed
time since that frame). While the history is shorter than W (start-up) the oldest frame is used:
the rate covers what there is. With a single frame there is nothing to difference: None.

**Quantiles.** p50/p90/p99 over the last 60 s come from bucket-count deltas (all series of the model
summed), interpolated linearly inside the bucket holding the rank, like Prometheus'
``histogram_quantile`` (the first bucket's lower edge is 0). A quantile that falls in the ``+Inf``
bucket reports the highest finite bound and is listed in ``Quantiles.capped``: a lower bound, never
an invented maximum. ``count`` and ``mean`` (Δsum / Δcount) come with them. ``low_sample`` is set
below ``LOW_SAMPLE`` (20) observations in the window: below that p90 rests on two observations or
fewer; p99 is only more than "about the maximum" from ~100 observations on, so treat p99 with care
even without the flag. A histogram with neither ``_count`` nor a ``+Inf`` bucket has an unknown total:
its count, mean and quantiles are all None (n/a), as are those of a histogram the engine lacks.

**Prefix-cache hit rate** = Δ(Σ numerator counters) / Δ(Σ denominator counters) over 60 s, per the
profile's ``prefix_hit_rate``; None when Δdenominator is 0 (idle) or there is only one frame. When
the engine lacks those counters the ``prefix_hit_rate_gauge`` mapping is used instead
(``prefix_hit_rate_window = "gauge"``). None (n/a) everywhere the engine lacks a metric, never 0.

**Totals** over models: running/waiting/rates summed, KV usage max (mean of the models' means),
quantiles and hit rate from the summed deltas of all models.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from operator import add as _add
from operator import lt as _lt
from operator import sub as _sub

from console import plausible
from console.model import ModelMetrics, Quantiles, Rates
from console.profiles import EngineProfile
from console.telemetry.metrics import features
from console.telemetry.metrics.readings import HistogramSeries, Reading, SeriesKey, finite_sum

__all__ = [
    "LOW_SAMPLE",
    "QUANTILE_WINDOW",
    "RATE_WINDOWS",
    "TOTAL_MODEL",
    "EngineMetricsState",
    "histogram_quantile",
    "merge_histograms",
    "quantiles_from_buckets",
]

RATE_WINDOWS = (5.0, 15.0, 60.0)
QUANTILE_WINDOW = 60.0
HIT_RATE_WINDOW = 60.0
LOW_SAMPLE = 20
TOTAL_MODEL = "*"  # ModelMetrics.model of the all-models total

_INF = math.inf

# model -> canonical -> series -> value
_CounterTree = dict[str, dict[str, dict[SeriesKey, float]]]
_HistTree = dict[str, dict[str, dict[SeriesKey, "_HVec"]]]


def _fin(value: float | None) -> float | None:
    """None for NaN and infinities: what a window cannot compute (values near the float maximum
    overflow in differences and sums) is n/a, never ``inf`` on screen or in ``status --json``."""
    return value if value is not None and math.isfinite(value) else None


def _fsum(values: Iterable[float]) -> float:
    """``math.fsum`` that never raises (it does on inf + -inf and on overflow): NaN/inf instead,
    which ``_fin`` turns into n/a at the output."""
    total = finite_sum(values)
    return math.nan if total is None else total


@dataclass(frozen=True, slots=True)
class _HVec:
    """Reset-corrected cumulative histogram: bucket counts, then sum, then count."""

    bounds: tuple[float, ...]
    values: tuple[float, ...]  # len(bounds) bucket counts + [sum, count]


@dataclass(slots=True)
class _Frame:
    t: float
    counters: _CounterTree
    hists: _HistTree
    wall: float | None = None  # wall-clock time of the scrape, when known (to compare with _created)


@dataclass(slots=True)
class _Track:
    """Per-series reset bookkeeping: last raw value(s) and the offset(s) added to raw values."""

    last_raw: tuple[float, ...]
    offset: list[float]
    bounds: tuple[float, ...] = ()
    last_t: float = 0.0
    # A histogram's last series and what it gave: the same object next time (a normalize memo
    # reuses unchanged series) gives the same corrected vector without a pass over its buckets.
    source: HistogramSeries | None = None
    out: _HVec | None = None


def histogram_quantile(q: float, bounds: tuple[float, ...], counts: tuple[float, ...]) -> tuple[float | None, bool]:
    """Prometheus-style quantile of cumulative ``counts`` per ascending upper ``bounds``.

    Returns (value, capped): capped is True when the rank falls in the +Inf bucket, and the value is
    then the highest finite bound (None if there is none). None when there are no observations.
    """
    if not bounds or len(bounds) != len(counts):
        return None, False
    total = counts[-1]
    if not total > 0:
        return None, False
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for i, (bound, count) in enumerate(zip(bounds, counts, strict=True)):
        if count >= rank and count > 0:
            if math.isinf(bound):
                finite = [b for b in bounds if not math.isinf(b)]
                return (finite[-1] if finite else None), True
            if i == 0 and bound <= 0:
                return bound, False
            lower = prev_bound if i > 0 else 0.0
            if count == prev_count:
                return bound, False
            return lower + (bound - lower) * (rank - prev_count) / (count - prev_count), False
        prev_bound, prev_count = bound, count
    return None, False


def quantiles_from_buckets(
    bounds: tuple[float, ...], counts: tuple[float, ...], total_sum: float | None, total_count: float | None = None
) -> Quantiles:
    """Quantiles of one cumulative histogram (a window delta, or since-start values)."""
    if total_count is None and bounds and math.isinf(bounds[-1]):
        total_count = counts[-1]  # the +Inf bucket is the count
    if total_count is None or not math.isfinite(total_count):
        # Neither _count nor a +Inf bucket: how many lie above the top bucket is unknown, so are
        # the count and the rank of every quantile.
        return Quantiles()
    count = total_count
    if count <= 0:
        return Quantiles(count=0.0, low_sample=True)
    values: dict[str, float | None] = {}
    capped: list[str] = []
    for label, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        v, cap = histogram_quantile(q, bounds, counts)
        values[label] = v
        if cap:
            capped.append(label)
    mean = total_sum / count if total_sum is not None else None
    return Quantiles(
        p50=_fin(values["p50"]),
        p90=_fin(values["p90"]),
        p99=_fin(values["p99"]),
        count=count,
        mean=_fin(mean),
        low_sample=count < LOW_SAMPLE,
        capped=tuple(capped),
    )


def merge_histograms(
    series: Iterable[HistogramSeries],
) -> tuple[tuple[float, ...], tuple[float, ...], float | None, float]:
    """Sum several cumulative histograms: (bounds, cumulative counts, sum or None, count)."""
    items = [(h.bounds, list(_hvec_raw(h))) for h in series]
    if not items:
        return (), (), None, 0.0
    return _merge(items)


def _hvec_raw(h: HistogramSeries) -> tuple[float, ...]:
    # An unknown sum or count is NaN: it stays unknown through deltas and merges.
    return (*h.counts, h.sum if h.sum is not None else math.nan, h.count if h.count is not None else math.nan)


class EngineMetricsState:
    """Bounded history of one engine's readings; turns them into ``ModelMetrics``."""

    def __init__(self, profile: EngineProfile, history_seconds: float = 60.0) -> None:
        self.profile = profile
        # Keep at least the longest window, plus the frame just before it.
        self.history_seconds = max(float(history_seconds), max(RATE_WINDOWS), QUANTILE_WINDOW)
        self._frames: deque[_Frame] = deque()
        self._tracks: dict[tuple[str, str, SeriesKey], _Track] = {}
        self._latest: Reading | None = None
        self.resets = 0  # series resets seen (for diagnostics and tests)
        self.cleared = 0  # times all history was forgotten (the engine was lost, then answered again)

    # -- ingest ---------------------------------------------------------------------------------

    def ingest(self, t_monotonic: float, reading: Reading, wall: float | None = None) -> None:
        """Add one reading taken at ``t_monotonic`` (``wall``: the same moment in unix seconds, to
        compare with series' ``_created``). Readings not newer than the last are used for gauges
        only (a clock that does not advance cannot give rates)."""
        self._latest = reading
        if self._frames and t_monotonic <= self._frames[-1].t:
            return
        prev = self._frames[-1] if self._frames else None
        counters: _CounterTree = {}
        hists: _HistTree = {}
        for model, mr in reading.models.items():
            c_out: dict[str, dict[SeriesKey, float]] = {}
            for canonical, series in mr.counters.items():
                out: dict[SeriesKey, float] = {}
                for key, value in series.items():
                    ident = (model, canonical, key)
                    new = ident not in self._tracks
                    out[key] = self._correct(ident, (value,), (), t_monotonic)[0]
                    born = mr.created.get(canonical, {}).get(key)
                    if new and prev is not None and _born_since(prev, canonical, born):
                        # Created since the previous scrape: it was 0 then, so all of it counts.
                        prev.counters.setdefault(model, {}).setdefault(canonical, {})[key] = 0.0
                c_out[canonical] = out
            counters[model] = c_out
            h_out: dict[str, dict[SeriesKey, _HVec]] = {}
            for canonical, hseries in mr.histograms.items():
                h_out[canonical] = {key: self._correct_hist((model, canonical, key), h, t_monotonic)
                                    for key, h in hseries.items()}
            hists[model] = h_out
        self._frames.append(_Frame(t_monotonic, counters, hists, wall))
        self._trim(t_monotonic)

    def _correct_hist(self, key: tuple[str, str, SeriesKey], h: HistogramSeries, t: float) -> _HVec:
        track = self._tracks.get(key)
        if track is not None and track.source is h and track.out is not None:
            track.last_t = t  # the very series of the last payload: unchanged, no reset
            return track.out
        vec = _HVec(h.bounds, self._correct(key, _hvec_raw(h), h.bounds, t))
        track = self._tracks[key]
        track.source, track.out = h, vec
        return vec

    def _correct(
        self, key: tuple[str, str, SeriesKey], raw: tuple[float, ...], bounds: tuple[float, ...], t: float
    ) -> tuple[float, ...]:
        track = self._tracks.get(key)
        if track is None or track.bounds != bounds or len(track.last_raw) != len(raw):
            self._tracks[key] = _Track(raw, [0.0] * len(raw), bounds, t)
            return raw
        # A drop of the value (counters) or of the count / any bucket (histograms) is a reset. The
        # sum of a histogram is not checked: it may fall legitimately with negative observations.
        last_raw = track.last_raw
        if bounds:
            n = len(bounds)
            reset = raw[-1] < last_raw[-1] or any(map(_lt, raw[:n], last_raw[:n]))
        else:
            reset = any(map(_lt, raw, last_raw))
        if reset:
            self.resets += 1
            # New baseline: keep the corrected value where it was, so this interval adds 0.
            track.offset = [
                (last + off - r) if not (math.isnan(r) or math.isnan(last)) else off
                for r, last, off in zip(raw, track.last_raw, track.offset, strict=True)
            ]
        track.last_raw = raw
        track.last_t = t
        corrected = tuple(map(_add, raw, track.offset))
        if not any(track.offset) and _INF not in raw and -_INF not in raw:
            return corrected  # no offset yet (the usual): finite where the raw values are
        if not all(math.isfinite(c) or math.isnan(r) for c, r in zip(corrected, raw, strict=True)):
            # Values near the float maximum overflowed the offset: start a new baseline.
            self._tracks[key] = _Track(raw, [0.0] * len(raw), bounds, t)
            return raw
        return corrected

    def _trim(self, now: float) -> None:
        horizon = now - self.history_seconds
        frames = self._frames
        # Keep one frame at or before the horizon: it is the base of the longest window.
        while len(frames) >= 2 and frames[1].t <= horizon:
            frames.popleft()
        if len(self._tracks) > 64:
            stale = [k for k, tr in self._tracks.items() if tr.last_t < horizon - self.history_seconds]
            for k in stale:
                del self._tracks[k]

    def reset(self) -> None:
        """Forget all history (e.g. the engine instance was replaced)."""
        self.cleared += 1
        self._frames.clear()
        self._tracks.clear()
        self._latest = None

    # -- windows --------------------------------------------------------------------------------

    def _base_index(self, window: float) -> int | None:
        frames = self._frames
        if len(frames) < 2:
            return None
        target = frames[-1].t - window
        base = 0
        for i in range(len(frames) - 2, -1, -1):
            if frames[i].t <= target:
                base = i
                break
        return base

    def _counter_increase(self, base: int, models: list[str], canonicals: tuple[str, ...]) -> float | None:
        """Σ increase of the counters since frame ``base``; None if none of them is present now."""
        frames = self._frames
        cur = frames[-1].counters
        total = 0.0
        present = False
        for model in models:
            by_canon = cur.get(model, {})
            for canonical in canonicals:
                series = by_canon.get(canonical)
                if series is None:
                    continue
                present = True
                at_base = frames[base].counters.get(model, {}).get(canonical, {})
                for key, value in series.items():
                    start = at_base.get(key)
                    if start is None:  # born after the base frame: its first value since
                        for j in range(base + 1, len(frames) - 1):
                            start = frames[j].counters.get(model, {}).get(canonical, {}).get(key)
                            if start is not None:
                                break
                    if start is not None:
                        total += max(0.0, value - start)
        return total if present else None

    def _increase_by_label(self, base: int, models: list[str], canonical: str, label: str) -> dict[str, float]:
        """Increase since frame ``base`` per value of one label (vLLM's per-position counters)."""
        frames = self._frames
        out: dict[str, float] = {}
        for model in models:
            start = frames[base].counters.get(model, {}).get(canonical, {})
            for key, value in frames[-1].counters.get(model, {}).get(canonical, {}).items():
                at = dict(key).get(label)
                if at is not None and key in start:
                    out[at] = out.get(at, 0.0) + max(0.0, value - start[key])
        return out

    def _rates(self, models: list[str], canonical: str) -> Rates:
        out: list[float | None] = []
        for window in RATE_WINDOWS:
            base = self._base_index(window)
            if base is None:
                out.append(None)
                continue
            inc = self._counter_increase(base, models, (canonical,))
            dt = self._frames[-1].t - self._frames[base].t
            out.append(None if inc is None or dt <= 0 else _fin(inc / dt))
        mapping = self.profile.metrics.map.get(canonical)
        at_finish = mapping is not None and (mapping.at_finish or any(p.at_finish for p in mapping.plus))
        step = 0.0
        if mapping is not None and mapping.precision and self._frames:
            cur = self._frames[-1].counters
            values = [v for m in models for v in cur.get(m, {}).get(canonical, {}).values()]
            step = max((print_step(v, mapping.precision) for v in values), default=0.0)
        return Rates(out[0], out[1], out[2], at_finish=at_finish, step=step)

    def _quantiles(self, models: list[str], canonical: str) -> Quantiles:
        frames = self._frames
        cur = frames[-1].hists
        deltas: list[tuple[tuple[float, ...], list[float]]] = []
        base = self._base_index(QUANTILE_WINDOW)
        present = False
        for model in models:
            series = cur.get(model, {}).get(canonical)
            if series is None:
                continue
            present = True
            if base is None:
                continue
            at_base = frames[base].hists.get(model, {}).get(canonical, {})
            for key, vec in series.items():
                start = at_base.get(key)
                if start is None or start.bounds != vec.bounds:
                    start = None
                    for j in range(base + 1, len(frames) - 1):
                        cand = frames[j].hists.get(model, {}).get(canonical, {}).get(key)
                        if cand is not None and cand.bounds == vec.bounds:
                            start = cand
                            break
                if start is None:
                    continue
                # Non-negative increases; NaN (an unknown sum or count) stays NaN rather than becoming 0.
                values = [d if d > 0.0 or d != d else 0.0 for d in map(_sub, vec.values, start.values)]
                deltas.append((vec.bounds, values))
        if not present or not deltas:
            return Quantiles()  # no such histogram, or no window yet: n/a
        bounds, counts, dsum, dcount = _merge(deltas)
        if not bounds:
            # Count-only histogram (an excerpt without buckets): count and mean, no quantiles.
            mean = dsum / dcount if dsum is not None and dcount > 0 else None
            if not math.isfinite(dcount):
                return Quantiles()
            return Quantiles(count=dcount, mean=_fin(mean), low_sample=dcount < LOW_SAMPLE)
        return quantiles_from_buckets(bounds, counts, dsum, dcount)

    def _cumulative(self, models: list[str], canonical: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """A histogram's reset-corrected cumulative bucket counts, all series of the models summed."""
        if not self._frames:
            return (), ()
        cur = self._frames[-1].hists
        vecs = [(v.bounds, list(v.values)) for m in models for v in cur.get(m, {}).get(canonical, {}).values()]
        if not vecs:
            return (), ()
        bounds, counts, _, _ = _merge(vecs)
        return bounds, counts

    def _hit_rate(self, models: list[str], latest_gauge: float | None) -> tuple[float | None, str]:
        spec = self.profile.metrics.prefix_hit_rate
        frames = self._frames
        if spec is not None and frames:
            cur = frames[-1].counters
            needed = (*spec.numerator, *spec.denominator)
            # Counters with series (a first-use counter with none yet is no basis for a ratio).
            has_all = any(all(cur.get(m, {}).get(c) for c in needed) for m in models)
            base = self._base_index(HIT_RATE_WINDOW)
            # One scrape so far: no window yet, so the engine's own gauge (where it has one) until then.
            if has_all and base is not None:
                num = self._counter_increase(base, models, spec.numerator)
                den = self._counter_increase(base, models, spec.denominator)
                ratio = _fin(num / den) if num is not None and den is not None and den > 0 else None
                if ratio is None:
                    return None, "60s"
                return min(1.0, max(0.0, ratio)), "60s"
        if latest_gauge is not None:
            return latest_gauge, "gauge"
        return None, "60s"

    # -- output ---------------------------------------------------------------------------------

    def _model_metrics(self, name: str, models: list[str]) -> ModelMetrics:
        latest = self._latest
        assert latest is not None
        readings = [latest.models[m] for m in models if m in latest.models]
        spec_map = self.profile.metrics.map
        # Metrics whose samples in the latest payload cannot all be true, for any of these models:
        # n/a here, with the reason in ``invalid``, rather than a window over what remains.
        invalid = [f for r in readings for f in r.invalid.values()]
        poisoned = {c for r in readings for c in r.invalid} if invalid else set()

        def gauge(canonical: str, combine: str) -> float | None:
            vals = [r.gauges[canonical] for r in readings if canonical in r.gauges]
            if not vals or canonical in poisoned:
                return None
            if combine == "max":
                return _fin(max(vals))
            total = finite_sum(vals)
            if total is None or combine == "sum":
                return total
            return total / len(vals)

        kv_means = [r.kv_usage_mean for r in readings if r.kv_usage_mean is not None]
        counters: dict[str, float] = {}
        if self._frames:
            cur = self._frames[-1].counters
            for canonical in {c for m in models for c in cur.get(m, {})}:
                total = finite_sum(v for m in models for v in cur.get(m, {}).get(canonical, {}).values())
                if total is not None and canonical not in poisoned:
                    counters[canonical] = total
        hit, hit_window = self._hit_rate(models, gauge("prefix_hit_rate_gauge", "mean"))
        hit_spec = self.profile.metrics.prefix_hit_rate
        if poisoned and hit_spec is not None and hit_window == "60s" and \
                poisoned.intersection(hit_spec.numerator, hit_spec.denominator):
            hit = None

        def rates(canonical: str) -> Rates:
            return self._rates(models, canonical) if canonical in spec_map and canonical not in poisoned else Rates()

        def quant(canonical: str) -> Quantiles:
            return self._quantiles(models, canonical) if canonical in spec_map and canonical not in poisoned \
                else Quantiles()

        base = self._base_index(HIT_RATE_WINDOW)

        def increase(canonical: str) -> float | None:
            if base is None or canonical in poisoned:
                return None
            return self._counter_increase(base, models, (canonical,))

        window = None if base is None else self._frames[-1].t - self._frames[base].t

        def by_label(canonical: str, label: str) -> dict[str, float]:
            return {} if base is None else self._increase_by_label(base, models, canonical, label)

        def label_of(canonical: str, default: str) -> str:
            mapping = spec_map.get(canonical)
            return mapping.by_label if mapping is not None and mapping.by_label else default

        tiers = (by_label("prompt_cached_by_tier", label_of("prompt_cached_by_tier", "tier"))
                 if "prompt_cached_by_tier" in spec_map and any("prompt_cached_by_tier" in r.counters for r in readings)
                 else None)  # fmt: skip
        return plausible.check(ModelMetrics(
            spec=features.spec_decode(increase, lambda c: gauge(c, "mean"), counters.get,
                                      by_label("spec_accepted_per_pos", label_of("spec_accepted_per_pos", "position"))),
            kv_transfer=features.kv_transfer(increase, lambda c: gauge(c, "mean"), window,
                                             rates("kv_transfer_failures")),
            lora=features.lora(lambda c: gauge(c, "max")),
            pd_queues=features.pd_queues(lambda c: gauge(c, "sum"), rates("pd_bootstrap_failures")),
            cache_tiers=features.cache_tiers(tiers, window, increase),
            sleep_level=features.sleep_level(lambda c: gauge(c, "max")),
            waiting_capacity=gauge("waiting_capacity", "sum"),
            waiting_deferred=gauge("waiting_deferred", "sum"),
            kv_host_usage=gauge("kv_host_usage", "max"),
            admission_rejections_per_s=rates("admission_rejections"),
            prefill_time=quant("prefill_time"),
            decode_time=quant("decode_time"),
            inference_time=quant("inference_time"),
            model=name,
            running=gauge("running", "sum"),
            waiting=gauge("waiting", "sum"),
            kv_usage=gauge("kv_usage", "max"),
            kv_usage_mean=_fin(_fsum(kv_means) / len(kv_means)) if kv_means else None,
            replicas=max((r.replicas for r in readings), default=1),
            prefix_hit_rate=hit,
            prefix_hit_rate_window=hit_window,
            prompt_tps=rates("prompt_tokens"),
            generation_tps=rates("generation_tokens"),
            request_rate=rates("requests_finished"),
            error_rate=rates("requests_failed"),
            preemptions_total=counters.get("preemptions"),
            preemption_rate=rates("preemptions"),
            ttft=quant("ttft"),
            itl=quant("itl"),
            tpot=quant("tpot"),
            e2e=quant("e2e"),
            queue_time=quant("queue_time"),
            ttft_cumulative=self._cumulative(models, "ttft") if "ttft" in spec_map and "ttft" not in poisoned
            else ((), ()),
            counters=counters,
            invalid=tuple(invalid),
        ))

    def metrics(self) -> tuple[tuple[ModelMetrics, ...], ModelMetrics]:
        """(per-model metrics in payload order, all-models total named ``TOTAL_MODEL``)."""
        if self._latest is None:
            return (), ModelMetrics(model=TOTAL_MODEL)
        names = list(self._latest.models)
        per_model = tuple(self._model_metrics(n, [n]) for n in names)
        if len(per_model) == 1:
            # One model (the usual case): its total is the same computation over the same series.
            return per_model, replace(per_model[0], model=TOTAL_MODEL)
        total = plausible.merge_invalid(self._model_metrics(TOTAL_MODEL, names), per_model)
        return per_model, total

    snapshot = metrics


def print_step(value: float, digits: int) -> float:
    """The step a counter printed with ``digits`` significant digits moves in at ``value``: 0 while
    it prints exactly (below 10**digits), else 10**(its decimal exponent - digits + 1)."""
    if not math.isfinite(value) or abs(value) < 10.0**digits:
        return 0.0
    return 10.0 ** (math.floor(math.log10(abs(value))) - digits + 1)


# How much earlier than our previous scrape (by our clock) a series' _created may be and still count
# as born after it: the engine's clock may differ from ours by this much.
CREATED_SLACK = 1.0


def _born_since(prev: _Frame, canonical: str, created: float | None) -> bool:
    """Whether a counter series first seen now was born after the scrape ``prev``: the metric was
    present then (for some model, if only as a first-use counter with no series yet), and its
    ``_created`` (where exported) is not older than that scrape."""
    if not any(canonical in by_canon for by_canon in prev.counters.values()):
        return False  # the metric itself is new: its first values are a baseline
    if created is None or prev.wall is None:
        return True
    return created >= prev.wall - CREATED_SLACK


def _merge(
    deltas: list[tuple[tuple[float, ...], list[float]]],
) -> tuple[tuple[float, ...], tuple[float, ...], float | None, float]:
    """Sum window deltas of several series: (bounds, cumulative counts, Δsum, Δcount)."""
    dsum: float | None = 0.0
    dcount = 0.0
    for bounds, vals in deltas:
        s = vals[len(bounds)]
        dsum = None if dsum is None or math.isnan(s) else dsum + s
        dcount += vals[len(bounds) + 1]
    first_bounds = deltas[0][0]
    if all(b == first_bounds for b, _ in deltas):
        n = len(first_bounds)
        counts = [_fsum(col) for col in zip(*(v[:n] for _, v in deltas), strict=True)] if n else []
    else:
        # Different layouts (rare): evaluate every series' cumulative count at the union of bounds,
        # using its largest own bound not above each one (a lower estimate, still monotonic).
        first_bounds = tuple(sorted({b for bounds, _ in deltas for b in bounds}))
        counts = []
        for ub in first_bounds:
            acc = 0.0
            for bounds, vals in deltas:
                below = [vals[i] for i, b in enumerate(bounds) if b <= ub]
                acc += below[-1] if below else 0.0
            counts.append(acc)
    running = 0.0
    mono: list[float] = []
    for c in counts:
        running = max(running, c)
        mono.append(running)
    if first_bounds and mono:
        dcount = max(dcount, mono[-1]) if dcount == 0 else dcount
    return first_bounds, tuple(mono), dsum, dcount
