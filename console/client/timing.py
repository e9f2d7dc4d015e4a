"""Per-request timing record and the metric definitions (also in docs/bench-json-schema.md).

All raw times are ``time.perf_counter_ns()`` integers taken in the I/O process; metrics are in
milliseconds. The formulas, so every number can be traced back:

    TTFT   = t_1 - t_send                    first token-bearing event (any channel, reasoning included)
    TTFO   = t_first_visible - t_send        first event with visible ``content``/``text``
    E2E    = t_K - t_send                    last token-bearing event
    TPOT   = (t_K - t_1) / (N - 1), N >= 2   == vLLM/SGLang TPOT == aiperf/GenAI-Perf/GuideLLM "ITL"
    chunk gaps        = t_k - t_{k-1}, k = 2..K           == vLLM/SGLang "ITL" samples
    ITL (per token)   = for k = 2..K: n_k samples of (t_k - t_{k-1}) / n_k
    client_queue      = t_send - t_sched
    E2E_from_sched    = t_K - t_sched

``n_k`` is the completion-token delta of event k when the engine sends usage on every chunk
(continuous usage); otherwise ``N / K`` for every event (the bundling correction), and when no
usage arrives at all ``N = K`` and the count is flagged as estimated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

NS_PER_MS = 1_000_000.0
BUNDLING_BADGE = 1.05  # show "chunk bundling xB" above this tokens-per-event ratio


@dataclass(slots=True)
class RequestRecord:
    """Everything observed about one request. Raw, so any tool's definition can be recomputed."""

    index: int  # position in the workload
    prompt_id: str = ""
    t_sched_ns: int = 0
    t_send_ns: int = 0
    t_headers_ns: int | None = None
    t_first_event_ns: int | None = None  # first SSE event of any kind (role-only included): diagnostic
    t_first_visible_ns: int | None = None
    t_done_ns: int | None = None  # [DONE] or end of stream
    event_t_ns: list[int] = field(default_factory=list)  # token-bearing events, arrival times
    event_usage: list[int | None] = field(default_factory=list)  # completion-token delta per event, if sent
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # authoritative N from usage
    cached_tokens: int | None = None
    finish_reason: str | None = None
    status: int | None = None
    error: str | None = None
    cancelled: bool = False
    # Cut off by --max-duration while still running: neither ok nor failed (the engine did nothing
    # wrong), counted apart so a time-bounded run of a healthy engine shows no error rate.
    cut: bool = False
    streamed: bool = True  # False when the server answered with one JSON body
    text: str = ""  # only when asked to keep it
    reasoning: str = ""
    warmup: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled and self.status is not None and 200 <= self.status < 300


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    """Derived per-request metrics (ms). ``None`` = not defined for this request."""

    ttft_ms: float | None
    ttfo_ms: float | None
    e2e_ms: float | None
    tpot_ms: float | None
    output_tokens: float  # N (authoritative or estimated)
    tokens_estimated: bool
    events: int  # K
    bundling: float | None  # N / K
    continuous_usage: bool
    client_queue_ms: float
    e2e_from_sched_ms: float | None
    chunk_gaps_ms: tuple[float, ...]
    itl_ms: tuple[float, ...]  # per-token samples
    token_counts: tuple[float, ...]  # n_k per event

    @property
    def decode_tok_s(self) -> float | None:
        return 1000.0 / self.tpot_ms if self.tpot_ms else None

    @property
    def bundled(self) -> bool:
        return self.bundling is not None and self.bundling > BUNDLING_BADGE


def token_counts(rec: RequestRecord) -> tuple[list[float], float, bool, bool]:
    """(n_k per event, N, estimated, continuous) for a record, per section 6.2."""
    k = len(rec.event_t_ns)
    usage = rec.event_usage
    continuous = k > 0 and len(usage) == k and all(u is not None for u in usage)
    if continuous:
        n: list[float] = [float(u) for u in usage if u is not None]
        total = float(rec.completion_tokens) if rec.completion_tokens is not None else sum(n)
        return n, total, False, True
    if rec.completion_tokens is not None:
        total = float(rec.completion_tokens)
        return ([total / k] * k if k else []), total, False, False
    return [1.0] * k, float(k), True, False


def compute(rec: RequestRecord) -> RequestMetrics:
    ts = rec.event_t_ns
    n, total, estimated, continuous = token_counts(rec)
    k = len(ts)
    send = rec.t_send_ns
    queue = (send - rec.t_sched_ns) / NS_PER_MS if rec.t_sched_ns else 0.0
    if not rec.streamed and rec.t_done_ns is not None:
        e2e = (rec.t_done_ns - send) / NS_PER_MS
        return RequestMetrics(
            e2e, e2e, e2e, None, total, estimated, k, None, False, queue,
            (rec.t_done_ns - rec.t_sched_ns) / NS_PER_MS if rec.t_sched_ns else None, (), (), tuple(n),
        )  # fmt: skip
    if k == 0:
        return RequestMetrics(None, None, None, None, total, estimated, 0, None, continuous, queue, None, (), (), ())
    t1, tk = ts[0], ts[-1]
    ttft = (t1 - send) / NS_PER_MS
    ttfo = (rec.t_first_visible_ns - send) / NS_PER_MS if rec.t_first_visible_ns is not None else None
    e2e = (tk - send) / NS_PER_MS
    tpot = (tk - t1) / NS_PER_MS / (total - 1) if total >= 2 else None
    gaps = tuple((ts[i] - ts[i - 1]) / NS_PER_MS for i in range(1, k))
    itl = tuple(itl_samples(ts, n))
    e2e_sched = (tk - rec.t_sched_ns) / NS_PER_MS if rec.t_sched_ns else None
    return RequestMetrics(
        ttft, ttfo, e2e, tpot, total, estimated, k, (total / k) if k else None, continuous, queue, e2e_sched,
        gaps, itl, tuple(n),
    )  # fmt: skip


def itl_samples(ts: Sequence[int], n: Sequence[float]) -> list[float]:
    """Per-token ITL: each gap split over the tokens its event carried.

    An event that carried 0 tokens (continuous usage said so) hands its gap on to the next event.
    With fractional ``n_k`` (even bundling correction) the number of copies is rounded on the
    running total, so the count of samples is the number of tokens after the first event.
    """
    out: list[float] = []
    carried = 0.0
    cum = n[0] if n else 0.0
    emitted = round(cum)
    for i in range(1, len(ts)):
        gap = (ts[i] - ts[i - 1]) / NS_PER_MS + carried
        nk = n[i]
        if nk <= 0:
            carried = gap
            continue
        carried = 0.0
        cum += nk
        copies = round(cum) - emitted
        emitted += copies
        if copies > 0:
            out.extend([gap / nk] * copies)
    return out


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default ``method="linear"``)."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    if n == 1:
        return float(sorted_values[0])
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


@dataclass(frozen=True, slots=True)
class Dist:
    """Summary of a distribution of samples (ms or whatever the samples are in)."""

    n: int
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> Dist:
        vals = sorted(v for v in values if v is not None and not math.isnan(v))
        n = len(vals)
        if n == 0:
            return cls(0)
        mean = sum(vals) / n
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / n)
        return cls(
            n, mean, std, vals[0], percentile(vals, 50), percentile(vals, 90), percentile(vals, 95),
            percentile(vals, 99), vals[-1],
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("n", "mean", "std", "min", "p50", "p90", "p95", "p99", "max")}
