"""What one payload said once normalised: per-model readings (gauges, counters per series,
histograms), which raw name carried each canonical metric, and the bookkeeping the console shows
(missing, unmapped, errors, the raw series). Built by ``normalize``; read by windows, the hub, the
status document, ``inspect-metrics`` and bench's server-metrics. Imports only the model and the
parser's result types."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from console.model import InvalidFigure, RawSeries
from console.telemetry.metrics.promtext import ParseResult

__all__ = ["HistogramSeries", "ModelReading", "PayloadFormat", "Reading", "Resolution", "SeriesKey", "finite_sum"]

SeriesKey = tuple[tuple[str, str], ...]
PayloadFormat = Literal["prometheus", "trtllm-json"]


@dataclass(frozen=True, slots=True)
class Resolution:
    """Which raw name carried a canonical metric in this payload."""

    canonical: str
    raw_name: str
    legacy: bool  # not the profile's first (current) name
    kind: str  # the mapping's kind: gauge, counter, histogram, histogram_sum, histogram_count
    # No series yet: a counter the engine creates on first use (``first_use``), read as 0.
    none_yet: bool = False


@dataclass(frozen=True, slots=True)
class HistogramSeries:
    """One histogram series: cumulative counts per upper bound (ascending; the last is +Inf unless the
    payload had neither a ``+Inf`` bucket nor ``_count``, and then ``count`` is None: unknown)."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    sum: float | None
    count: float | None
    # Why the samples cannot all be true (buckets that decrease with ``le``, a ``_count`` other than
    # the +Inf bucket, a NaN ...) and the value that shows it; "" for a valid series. normalize keeps
    # no invalid series in a reading: its model's histogram is marked invalid instead.
    problem: str = ""
    problem_value: float = math.nan


@dataclass(frozen=True, slots=True)
class ModelReading:
    """One served model's values in one payload."""

    model: str
    # canonical gauge -> value combined over series with the mapping's aggregate.
    gauges: dict[str, float] = field(default_factory=dict)
    kv_usage_mean: float | None = None
    replicas: int = 1
    # canonical counter -> series key -> value (shards already collapsed by max).
    counters: dict[str, dict[SeriesKey, float]] = field(default_factory=dict)
    # canonical histogram -> series key -> histogram.
    histograms: dict[str, dict[SeriesKey, HistogramSeries]] = field(default_factory=dict)
    # canonical counter -> series key -> when the series was born (its ``_created``, unix seconds),
    # where the engine exports one.
    created: dict[str, dict[SeriesKey, float]] = field(default_factory=dict)
    # canonical -> why its samples in this payload are invalid (a NaN or negative counter, a
    # histogram whose buckets cannot all be true, a series given twice). Such a metric is left out of
    # ``gauges``, ``counters`` and ``histograms`` (n/a, never a number made of the rest).
    invalid: dict[str, InvalidFigure] = field(default_factory=dict)

    def counter_total(self, canonical: str) -> float | None:
        """Sum over series of a counter; None when the payload lacked it for this model (or the
        sum is not a finite number)."""
        series = self.counters.get(canonical)
        return None if series is None else finite_sum(series.values())


@dataclass(frozen=True, slots=True)
class Reading:
    """Everything one payload said, normalised with one profile."""

    profile: str
    format: PayloadFormat
    models: dict[str, ModelReading]
    resolved: dict[str, Resolution]
    missing: tuple[str, ...]
    unmapped: tuple[str, ...]
    errors: tuple[str, ...]
    sample_count: int
    parsed: ParseResult

    # Lazily built ``raw`` (building RawSeries for thousands of samples is the slow part).
    _raw_cache: list[tuple[RawSeries, ...]] = field(default_factory=list, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        """No sample could be parsed at all (not a metrics payload)."""
        return self.sample_count == 0

    @property
    def ok(self) -> bool:
        """At least one sample parsed (a metrics payload, possibly with some malformed lines)."""
        return self.sample_count > 0

    def error_summary(self) -> str:
        """One line: how many lines were malformed and the first reason."""
        if not self.errors:
            return "no samples" if self.empty else "no errors"
        count = max(self.parsed.error_count, len(self.errors))
        first = self.errors[0]
        return f"{count} problem{'s' if count != 1 else ''}; first: {first}"

    @property
    def raw(self) -> tuple[RawSeries, ...]:
        """Every parsed sample (all families unless the payload was parsed with ``full=False``)."""
        if not self._raw_cache:
            out: list[RawSeries] = []
            for fam in self.parsed.families.values():
                kind = fam.kind
                out.extend(RawSeries(s.name, s.labels, s.value, kind) for s in fam.samples)
            self._raw_cache.append(tuple(out))
        return self._raw_cache[0]


def finite_sum(values: Iterable[float]) -> float | None:
    """The exact sum, or None when it is not a finite number (an infinity in the input, or two
    values near the float maximum): ``math.fsum`` raises on both, and one bad payload must never
    stop an engine's collection."""
    try:
        total = math.fsum(values)
    except (OverflowError, ValueError):
        return None
    return total if math.isfinite(total) else None
