""""Not collected yet" is a state read from a freshness's fields, not matched by its text."""

from __future__ import annotations

import time
from dataclasses import replace

import orjson

from console.config import parse_engine_ref
from console.model import NOT_COLLECTED, FleetSnapshot, SourceState, went_stale
from console.status_doc import status_doc
from console.status_parse import snapshot_from_doc
from console.telemetry.engine.collector import EngineCollector, fresh


def test_only_a_source_that_has_not_had_its_turn_is_pending() -> None:
    now = time.time()
    assert NOT_COLLECTED.pending and NOT_COLLECTED.stale
    assert not went_stale(NOT_COLLECTED, now, "connection refused").pending  # a verdict, if a bad one
    assert not fresh(now).pending
    assert replace(NOT_COLLECTED, reason="anything else").pending  # the text plays no part


def test_a_new_collector_is_pending_and_stays_so_through_a_status_document() -> None:
    snap = EngineCollector(parse_engine_ref("vllm@http://127.0.0.1:9"), period=1.0).snapshot
    assert snap.health_freshness.pending and snap.metrics_freshness.pending
    doc = orjson.loads(orjson.dumps(status_doc(FleetSnapshot(taken_at=time.time(), engines=(snap,)))))
    back = snapshot_from_doc(doc)
    assert back.engines[0].health_freshness.state is SourceState.STALE
    assert back.engines[0].health_freshness.pending
