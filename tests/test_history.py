"""Bounded history: rings wrap at capacity, gaps stay gaps, the store refuses runaway series."""

from __future__ import annotations

import math

from console.telemetry.metrics.history import History, Ring


def test_ring_wraps_and_keeps_order() -> None:
    r = Ring(3)
    for i in range(5):
        r.append(float(i), float(i * 10))
    assert len(r) == 3
    assert r.values() == [20.0, 30.0, 40.0]
    assert r.points(2) == [(3.0, 30.0), (4.0, 40.0)]
    assert r.latest() == (4.0, 40.0)


def test_none_is_a_gap_not_zero() -> None:
    r = Ring(4)
    r.append(1.0, None)
    r.append(2.0, 5.0)
    v = r.values()
    assert math.isnan(v[0]) and v[1] == 5.0


def test_memory_is_bounded() -> None:
    h = History(capacity=3600, max_series=10)
    for s in range(7200):
        h.append(("e", "running"), float(s), 1.0)
    one = h.memory_bytes()
    # The ring's points (two float64 each) and an hour of 5 s summaries (a float64 time, three float32).
    assert one == 3600 * 8 * 2 + 720 * (8 + 3 * 4)
    for k in range(20):
        for s in range(7200):
            h.append(("e", f"m{k}"), float(s), 1.0)
    assert len(h.keys()) == 10
    assert h.memory_bytes() == 10 * one


def test_extend_is_append_of_each_point() -> None:
    pts: list[tuple[float, float | None]] = [(float(t), None if t % 7 == 0 else t / 3) for t in range(12)]
    for before, capacity in ((0, 20), (0, 12), (0, 5), (3, 10)):
        by_append, by_extend = History(capacity=capacity), History(capacity=capacity)
        for t, v in pts[:before]:
            by_append.append("k", t, v)
            by_extend.append("k", t, v)
        for t, v in pts[before:]:
            by_append.append("k", t, v)
        by_extend.extend("k", [t for t, _ in pts[before:]], [v for _, v in pts[before:]])
        assert str(by_extend.points("k")) == str(by_append.points("k")), (before, capacity)


def test_values_and_points_match_a_plain_list_at_every_fill_and_wrap() -> None:
    import random
    from collections import deque

    rng = random.Random(3)
    for capacity in (1, 2, 7, 64):
        ring = Ring(capacity)
        model: deque[tuple[float, float]] = deque(maxlen=capacity)
        for i in range(3 * capacity + 5):
            ring.append(float(i), float(rng.randrange(1000)))
            model.append((float(i), ring.latest()[1]))  # type: ignore[index]
            for last in (None, 0, 1, capacity - 1, capacity, capacity + 3, -1):
                want = list(model) if last is None else list(model)[len(model) - max(0, min(last, len(model))):]
                assert ring.points(last) == want, (capacity, i, last)
                assert ring.values(last) == [v for _, v in want], (capacity, i, last)


def test_window_reaches_an_hour_with_min_max_mean() -> None:
    """Past the ring, the window reads the 5 s summaries: a 5 s spike keeps its max, gaps stay NaN."""
    h = History(capacity=400)
    for s in range(3600):
        v: float | None = 200.0 if 1000 <= s < 1005 else (None if 2000 <= s < 2100 else 70.0)
        h.append(("e", "ttft_p99"), float(s), v)
    rows = h.window(("e", "ttft_p99"), 3599.0, 3600.0)
    assert rows[0][0] == 0.0 and rows[-1][0] == 3599.0
    assert max(r[2] for r in rows) == 200.0
    spike = [r for r in rows if r[2] == 200.0]
    assert [r[0] for r in spike] == [1000.0] and spike[0][1] == 200.0 and spike[0][3] == 200.0
    gaps = [r for r in rows if r[1] != r[1]]
    assert [r[0] for r in gaps] == [2000.0 + 5 * k for k in range(20)]
    # The last 400 s are the ring's own points, one a second.
    assert [r[0] for r in rows[-400:]] == [float(s) for s in range(3200, 3600)]
    # A 5-minute window is the ring alone.
    assert [r[0] for r in h.window(("e", "ttft_p99"), 3599.0, 300.0)] == [float(s) for s in range(3299, 3600)]


def test_backfill_fills_the_hour_window() -> None:
    h = History(capacity=400)
    for s in range(3000, 3100):
        h.append(("e", "running"), float(s), 5.0)
    h.backfill(("e", "running"), [float(t) for t in range(0, 3000, 10)], [1.0] * 300)
    rows = h.window(("e", "running"), 3099.0, 3600.0)
    assert rows[0][0] == 0.0 and rows[-1] == (3099.0, 5.0, 5.0, 5.0)


def test_summaries_of_finite_extremes_read_back_without_error() -> None:
    """Values past float32's range (the summaries' storage) read back as +-inf, which charts clamp."""
    h = History(capacity=4)
    for s, v in enumerate([1e308, -1e308, 1e-308, float(2**63)] * 10):
        h.append(("e", "running"), float(5 * s), v)
    rows = h.window(("e", "running"), 195.0, 3600.0)
    assert len(rows) >= 36 and rows[0][1] == float("inf") and rows[1][1] == float("-inf")


def test_buckets_add_many_sums_as_add_does() -> None:
    """The replay's rebuild (add_many) gives the summaries a point-by-point add gives, gaps included."""
    import random

    from console.telemetry.metrics.history import Buckets

    rng = random.Random(7)
    times = sorted(1000.0 + rng.random() * 200 for _ in range(500))
    values: list[float | None] = [None if rng.random() < 0.1 else float("nan") if rng.random() < 0.05
                                  else rng.uniform(-5, 5) for _ in times]
    one, many = Buckets(), Buckets()
    one.add(900.0, 1.0)
    many.add(900.0, 1.0)
    one.add(990.0, 2.0)
    for t, v in zip(times, values, strict=True):
        one.add(t, float("nan") if v is None else v)
    many.add_many([990.0, *times], [2.0, *values])
    one.add(800.0, 3.0)  # older than the open bucket: dropped by both
    many.add_many([800.0], [3.0])

    def plain(b: Buckets) -> list[tuple[float | None, ...]]:
        return [tuple(None if x != x else x for x in row) for row in b.rows()]

    assert plain(many) == plain(one) and len(plain(one)) > 30
