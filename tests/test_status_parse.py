"""status_parse is the inverse of status_doc: a document read back gives the same document."""

from __future__ import annotations

import math

import orjson
import pytest

from console.model import FleetSnapshot, GpuFleet, HostSnapshot
from console.status_doc import status_doc
from console.status_parse import DocumentError, snapshot_from_doc
from tests.recording.fleetdocs import T0, snapshot


def _via_json(doc: dict[str, object]) -> dict[str, object]:
    return orjson.loads(orjson.dumps(doc))  # type: ignore[no-any-return]


@pytest.mark.parametrize("i", [0, 21, 37])
def test_round_trip_of_a_full_fleet(i: int) -> None:
    doc = _via_json(status_doc(snapshot(T0 + i, i, engines=4, gpus=8)))
    back = snapshot_from_doc(doc)
    assert _via_json(status_doc(back)) == doc
    # The values the screens read are the snapshot's own.
    src = snapshot(T0 + i, i, engines=4, gpus=8)
    assert back.engines[0].total is not None and src.engines[0].total is not None
    assert back.engines[0].total.generation_tps == src.engines[0].total.generation_tps
    assert back.gpus.gpus[3].processes == src.gpus.gpus[3].processes
    assert back.engines[1].live == src.engines[1].live


def test_round_trip_of_empty_parts_and_non_finite_values() -> None:
    snap = FleetSnapshot(taken_at=T0, gpus=GpuFleet(source="none", unavailable_reason="GPU monitoring disabled"),
                         host=HostSnapshot(taken_at=T0, load_avg=(math.inf, 1.0, 2.0)))
    doc = _via_json(status_doc(snap))
    assert doc["host"]["load_avg"][0] is None  # type: ignore[index]
    assert _via_json(status_doc(snapshot_from_doc(doc))) == doc
    nohost = _via_json(status_doc(FleetSnapshot(taken_at=T0)))
    assert snapshot_from_doc(nohost).host is None


def test_a_document_of_another_shape_is_refused_in_one_line() -> None:
    with pytest.raises(DocumentError, match=r"not an enginedeck\.status/2 document"):
        snapshot_from_doc({"schema": "enginedeck.status/1"})
    doc = _via_json(status_doc(snapshot(T0, 0)))
    del doc["engines"][0]["phase"]  # type: ignore[index]
    with pytest.raises(DocumentError, match="malformed"):
        snapshot_from_doc(doc)
