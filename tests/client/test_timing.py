"""Metric definitions (docs/bench-json-schema.md) on hand-computed synthetic timelines."""

from __future__ import annotations

import numpy as np
import pytest

from console.client.timing import Dist, RequestRecord, compute, itl_samples, percentile

MS = 1_000_000


def rec(
    events_ms: list[float], usage: list[int | None] | None = None, n: int | None = None, sched: int = 0, **kw: object
) -> RequestRecord:
    r = RequestRecord(index=0, t_sched_ns=sched, t_send_ns=100 * MS)
    r.event_t_ns = [int(t * MS) for t in events_ms]
    r.event_usage = usage if usage is not None else [None] * len(events_ms)
    r.completion_tokens = n
    r.status = 200
    for k, v in kw.items():
        setattr(r, k, v)
    return r


def test_one_token_per_event() -> None:
    # send at 100 ms, tokens at 150, 160, 170, 185 ms; N = 4 from the final usage
    m = compute(rec([150, 160, 170, 185], n=4))
    assert m.ttft_ms == pytest.approx(50)
    assert m.e2e_ms == pytest.approx(85)
    assert m.tpot_ms == pytest.approx((185 - 150) / 3)
    assert m.chunk_gaps_ms == pytest.approx((10, 10, 15))
    assert m.itl_ms == pytest.approx((10, 10, 15))
    assert m.bundling == 1.0 and not m.bundled and not m.tokens_estimated


def test_bundling_correction_with_final_usage_only() -> None:
    # 3 events but the server says 9 tokens: B = 3, each gap split over 3 tokens
    m = compute(rec([150, 180, 210], n=9))
    assert m.bundling == 3.0 and m.bundled
    assert m.tpot_ms == pytest.approx((210 - 150) / 8)
    assert m.chunk_gaps_ms == pytest.approx((30, 30))
    assert m.itl_ms == pytest.approx((10,) * 6)  # 2 gaps x 3 tokens of 10 ms
    assert m.output_tokens == 9


def test_continuous_usage_deltas_split_each_gap() -> None:
    # events carry 1, 2, 4 tokens (continuous usage): gap 20 ms over 2 tokens, 40 ms over 4
    m = compute(rec([150, 170, 210], usage=[1, 2, 4], n=7))
    assert m.continuous_usage
    assert m.itl_ms == pytest.approx((10, 10, 10, 10, 10, 10))
    assert m.tpot_ms == pytest.approx(60 / 6)


def test_zero_token_event_hands_its_gap_on() -> None:
    assert itl_samples([0, 10 * MS, 30 * MS], [1, 0, 2]) == pytest.approx([15.0, 15.0])


def test_no_usage_means_estimated_count() -> None:
    m = compute(rec([150, 160], n=None))
    assert m.tokens_estimated and m.output_tokens == 2


def test_ttfo_differs_from_ttft_with_reasoning() -> None:
    m = compute(rec([150, 160, 170], n=3, t_first_visible_ns=170 * MS))
    assert m.ttft_ms == pytest.approx(50) and m.ttfo_ms == pytest.approx(70)


def test_schedule_lag_and_e2e_from_schedule() -> None:
    m = compute(rec([150, 160], n=2, sched=90 * MS))
    assert m.client_queue_ms == pytest.approx(10) and m.e2e_from_sched_ms == pytest.approx(70)


def test_single_token_has_no_tpot() -> None:
    m = compute(rec([150], n=1))
    assert m.tpot_ms is None and m.itl_ms == ()


def test_non_streamed_fallback() -> None:
    r = rec([], n=5, streamed=False, t_done_ns=400 * MS)
    m = compute(r)
    assert m.ttft_ms == m.e2e_ms == pytest.approx(300) and m.tpot_ms is None


def test_percentile_matches_numpy_linear() -> None:
    vals = sorted([3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3])
    for q in (0, 10, 50, 90, 99, 100):
        assert percentile(vals, q) == pytest.approx(float(np.percentile(vals, q)))
    d = Dist.of(vals)
    assert d.p50 == pytest.approx(float(np.median(vals))) and d.n == 7
