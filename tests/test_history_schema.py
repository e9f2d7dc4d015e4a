"""One history schema (``telemetry.source.ENGINE_SCHEMA``) for the hub, recordings and a Prometheus backfill."""

from __future__ import annotations

from console.prometheus.backfill import GAUGES, QUANTILES, RATES
from console.telemetry.source import ENGINE_SCHEMA, ENGINE_SERIES


def test_the_keys_are_the_schemas_in_its_order_and_unique() -> None:
    assert tuple(s.key for s in ENGINE_SCHEMA) == ENGINE_SERIES
    assert len(set(ENGINE_SERIES)) == len(ENGINE_SERIES)


def test_the_backfill_fills_exactly_the_series_the_schema_marks() -> None:
    filled = {key for key, _ in GAUGES + RATES} | {f"{p}_{q}" for p, _ in QUANTILES for q in ("p50", "p99")}
    filled.add("prefix_hit_rate")  # computed from hits and queries together
    assert filled == {s.key for s in ENGINE_SCHEMA if s.backfilled}
    assert {c for _, c in GAUGES + RATES + QUANTILES} <= {s.canonical for s in ENGINE_SCHEMA}
