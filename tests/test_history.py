"""Bounded history: rings wrap at capacity, gaps stay gaps, the store refuses runaway series."""

from __future__ import annotations

import math

from console.telemetry.history import History, Ring


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
    assert one == 3600 * 8 * 2
    for k in range(20):
        h.append(("e", f"m{k}"), 0.0, 1.0)
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
