"""Open-loop schedules: absolute, rescaled to N/λ, seeded, ascending; closed-loop ABBA order."""

from __future__ import annotations

import itertools
import statistics

import pytest

from console.client.arrivals import schedule
from console.client.bench import run_order


@pytest.mark.parametrize("arrival", ["poisson", "gamma", "constant"])
def test_last_arrival_is_exactly_n_over_rate(arrival: str) -> None:
    s = schedule(200, 8.0, arrival=arrival, burstiness=0.5, seed=3)  # type: ignore[arg-type]
    assert len(s) == 200
    assert s[-1] == pytest.approx(200 / 8.0, rel=1e-12)
    assert all(b >= a for a, b in itertools.pairwise(s))
    assert s[0] > 0


def test_seeded_and_different_seeds_differ() -> None:
    assert schedule(50, 4.0, seed=1) == schedule(50, 4.0, seed=1)
    assert schedule(50, 4.0, seed=1) != schedule(50, 4.0, seed=2)


def test_constant_spacing() -> None:
    s = schedule(10, 2.0, arrival="constant")
    assert [round(x, 9) for x in s] == [0.5 * (i + 1) for i in range(10)]


def test_burstiness_changes_gap_dispersion() -> None:
    def cv(burst: float) -> float:
        s = schedule(4000, 10.0, arrival="gamma", burstiness=burst, seed=7)
        gaps = [b - a for a, b in zip([0.0, *s], s, strict=False)]
        return statistics.pstdev(gaps) / statistics.mean(gaps)

    # gamma(shape=β): coefficient of variation = 1/sqrt(β)
    assert cv(1.0) == pytest.approx(1.0, abs=0.08)
    assert cv(0.25) == pytest.approx(2.0, abs=0.25)
    assert cv(16.0) == pytest.approx(0.25, abs=0.03)


def test_bad_rate() -> None:
    with pytest.raises(ValueError):
        schedule(3, 0.0)


def test_abba_order() -> None:
    assert run_order(2, 4) == [(0, 0), (1, 0), (1, 1), (0, 1), (0, 2), (1, 2), (1, 3), (0, 3)]
    assert run_order(1, 2) == [(0, 0), (0, 1)]
