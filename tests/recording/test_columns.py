"""Document frames in column form: exact text back, smaller than the plain form, and the writer's
secret check skipped only where no value can form a secret."""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from console.recording import Recording, RecordingWriter, columns, frames
from console.recording.payloads import PayloadError, docs_payload, read_doc_lines
from console.recording.writer import our_segments
from tests.recording.fleetdocs import T0, docs


def _frames(lines: list[tuple[float, bytes]], size: int = 9) -> list[list[tuple[float, bytes]]]:
    return [lines[k:k + size] for k in range(0, len(lines), size)]


def _encode(frame: list[tuple[float, bytes]]) -> bytes:
    return columns.encode([t for t, _ in frame], [columns.split(line) for _, line in frame])


def _fleet_lines(n: int = 90) -> list[tuple[float, bytes]]:
    return [(t, orjson.dumps(d)) for t, d in docs(n, engines=3, gpus=4)]  # engine 1 drops out at 20..24


def test_a_fleets_documents_come_back_byte_for_byte() -> None:
    lines = _fleet_lines()
    for frame in _frames(lines):
        assert read_doc_lines(_encode(frame)) == frame
    # An engine that drops out changes the layout (its reason appears): a run of its own.
    head = orjson.loads(_encode(lines[18:27]).split(b"\n")[0])
    assert head["runs"] == [2, 5, 2]


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(12 if depth < 3 else 8)
    if kind == 0:
        return rng.choice([0.0, -0.0, 1e-7, 2.5e-5, 1e16, 1e22, 123456789.123456, -0.05, 0.1 + 0.2])
    if kind == 1:
        return rng.uniform(-1e6, 1e6)
    if kind == 2:
        return round(rng.uniform(0, 1e4), rng.randrange(0, 8))
    if kind == 3:
        return rng.choice([0, -1, 7, 2**53 + 1, -(2**63), 2**62])
    if kind == 4:
        return rng.choice([True, False, None])
    if kind == 5:  # strings that look like JSON values, with quotes, colons and escapes
        return rng.choice(['":5,', 'a\\":1}', ":12,", '"', "", "x\ny", "é", "Bearer abc", "[1,2]"])
    if kind in (6, 7):
        return rng.choice(["ok", "stale", "vllm@http://127.0.0.1:8000"])
    if kind == 8:
        return [rng.uniform(0, 2) for _ in range(rng.randrange(4))]
    if kind == 9:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["a", "b", "c:", 'q"', "5s", "p99"]) + str(k): _value(rng, depth + 1)
            for k in range(rng.randrange(1, 5))}


def _mutate(rng: random.Random, v: Any) -> Any:
    """The same document a second later: most numbers move a little, now and then a value changes kind."""
    if isinstance(v, dict):
        return {k: _mutate(rng, x) for k, x in v.items()}
    if isinstance(v, list):
        return [_mutate(rng, x) for x in v]
    if rng.random() < 0.05:
        return _value(rng)
    if isinstance(v, float):
        if rng.random() < 0.05:
            return rng.choice([-0.0, 0.0, -0.05])  # a negative zero after other decimals
        return v + rng.choice([0.0, 0.5, -1.25, rng.uniform(-1, 1)])
    if isinstance(v, int) and not isinstance(v, bool):
        return v + rng.randrange(3)
    return v


def test_fuzzed_documents_come_back_byte_for_byte() -> None:
    rng = random.Random(20261202)
    for _ in range(300):
        doc = {f"k{n}": _value(rng) for n in range(rng.randrange(1, 8))}
        frame = []
        for k in range(rng.randrange(1, 12)):
            frame.append((T0 + k, orjson.dumps(doc)))
            doc = _mutate(rng, doc)
        assert read_doc_lines(_encode(frame)) == frame


def test_split_is_lossless_on_any_text() -> None:
    rng = random.Random(7)
    alphabet = b'":,[]{}0123456789.-etrufalsn \\'
    for _ in range(2000):
        text = bytes(rng.choice(alphabet) for _ in range(rng.randrange(40)))
        assert columns.join(*columns.split(text)) == text


def test_a_bad_payload_is_a_payload_error() -> None:
    good = _encode(_fleet_lines(9))
    lines = good.split(b"\n")
    bad = [
        b"{not json\n",
        b'{"t": [1, 2], "runs": [1]}\n{}\n[]\n',  # fewer documents than times
        b'{"t": ["x"], "runs": [1]}\n{}\n[]\n',
        b"\n".join([lines[0], lines[1], b"[[3, 4, 1]]", b""]),  # a column of the wrong length
        b"\n".join([lines[0], lines[1], b"[[99999, null, 1, 2, 3, 4, 5, 6, 7, 8]]", b""]),  # no such value
        b"\n".join([lines[0], lines[1], b"[[3, -1, 1, 2", b""]),
    ]
    for payload in bad:
        with pytest.raises(PayloadError):
            read_doc_lines(payload)


def test_column_form_is_much_smaller_than_the_plain_form() -> None:
    lines = _fleet_lines(180)
    zdict = lines[0][1]

    def packed(payload: bytes) -> int:
        c = zlib.compressobj(frames.ZLIB_LEVEL, zdict=zdict)
        return len(c.compress(payload) + c.flush())

    plain = sum(packed(docs_payload([t for t, _ in f], [x for _, x in f])) for f in _frames(lines))
    cols = sum(packed(_encode(f)) for f in _frames(lines))
    assert cols < 0.75 * plain, (cols, plain)


def test_the_writer_writes_column_form_and_reads_it_back(tmp_path: Path) -> None:
    items = docs(40, engines=2, gpus=2)
    with RecordingWriter(tmp_path / "rec") as w:
        for t, d in items:
            w.add(d, at=t)
        assert w._layout_clean  # a status document's values cannot form a secret: checked once a layout
    rec = Recording.open(tmp_path / "rec")
    assert [(t, orjson.loads(orjson.dumps(d))) for t, d in items] == list(rec.documents())
    (seg,) = our_segments(tmp_path / "rec")
    with open(seg, "rb") as f:
        kinds = [i.kind for i in frames.scan(f)]
    assert frames.KIND_DOCS in kinds
    first = rec.doc_frames[0]
    payload = first.segment.payload(first.info)
    assert payload is not None and payload[:1] == b"{"  # column form


def test_a_secret_in_a_layout_seen_clean_before_is_still_masked(tmp_path: Path) -> None:
    token = "hf_" + "Q7w" * 12
    items = docs(30, engines=2, gpus=1)
    items[25][1]["engines"][0]["detail"] = f"pull failed with {token}"  # the layout changes here
    items[26][1]["engines"][0]["detail"] = f"pull failed with {token}"  # and stays
    with RecordingWriter(tmp_path / "rec") as w:
        for t, d in items:
            w.add(d, at=t)
    data = b"".join(p.read_bytes() for p in (tmp_path / "rec").iterdir())
    assert token.encode() not in data
    got = [d for _t, d in Recording.open(tmp_path / "rec").documents()]
    assert "****" in got[25]["engines"][0]["detail"] and "****" in got[26]["engines"][0]["detail"]
    assert token not in orjson.dumps(got).decode()


def test_values_that_could_form_a_secret_keep_the_check_on(tmp_path: Path) -> None:
    with RecordingWriter(tmp_path / "rec") as w:
        w.add({"schema": "x", "api_key": 12}, at=T0)  # a number after a secret's name: "api_key":1111...
        assert not w._layout_clean
        w.add({"schema": "x", "count": 12}, at=T0 + 1)
        assert w._layout_clean


def test_a_cut_copies_whole_column_frames_with_their_rows(tmp_path: Path) -> None:
    from console.recording.cutfile import write_cut

    items = docs(60, engines=2, gpus=2)
    with RecordingWriter(tmp_path / "rec") as w:
        for t, d in items:
            w.add(d, at=t)
    rec = Recording.open(tmp_path / "rec")
    lo, hi = items[5][0], items[50][0]
    got = list(rec.document_frames(lo, hi))
    copied = [f for f in got if isinstance(f, columns.Payload)]
    edges = [f for f in got if not isinstance(f, columns.Payload)]
    assert copied and len(edges) == 2  # the frames cut by the window's ends are decoded; the rest copied
    assert all(f.rows is not None for f in copied)
    flat: list[Any] = [x for f in got for x in ([f] if isinstance(f, columns.Payload) else f)]
    cut = Recording.open(write_cut(flat, [], tmp_path / "cut.edrec"))
    want = [(t, d) for t, d in rec.documents() if lo <= t <= hi]
    assert list(cut.documents()) == want
    whole = [r for r in cut.doc_frames if r.rows is not None]
    assert len(whole) == len(copied)  # each copied frame kept its rows frame (a seek reads those)
    payloads = [r.segment.payload(r.info) for r in cut.doc_frames]
    assert sum(1 for p in payloads if p is not None and p[:1] == b"{") == len(copied)
