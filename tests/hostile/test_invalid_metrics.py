"""Group 8: invalid metric values are marked invalid with their reason, never shown as a fresh number.

A NaN or infinite counter used to read as 0 tok/s, decreasing buckets and a ``_count`` far from the
+Inf bucket gave quantiles and means that cannot all be true, a NaN ``le`` was accepted and a series
given twice kept its last value, with nothing in the ``invalid`` list. Each case serves a valid
payload, then the hostile one, from a fake engine on 127.0.0.1, and reads it through the real scrape
path (``EngineCollector``: the probe's HTTP client, the engine's ScrapeParser and NormalizeMemo, the
windows) and, for some, through ``status --json`` and ``status``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from console.config import parse_engine_ref
from console.model import EngineSnapshot, ModelMetrics
from console.telemetry.engine.collector import EngineCollector
from tests.hostile._metrics_fakes import FakeEngine, serve


@dataclass(frozen=True)
class Engine:
    """Where one profile's counter and histogram sit in its payload."""

    profile: str
    labels: str  # the series' labels, without braces ("" for none)
    counter: str  # the raw sample read as generated tokens
    counter_kind: str  # "counter", or "histogram_sum" (TGI reads its token counts from a histogram's _sum)
    histogram: str | None  # a latency histogram's base name
    quantiles: str | None  # the ModelMetrics field it feeds


ENGINES = {
    "vllm": Engine("vllm", 'engine="0",model_name="m"', "vllm:generation_tokens_total", "counter",
                   "vllm:time_to_first_token_seconds", "ttft"),
    "sglang": Engine("sglang", 'model_name="m"', "sglang:generation_tokens_total", "counter",
                     "sglang:time_to_first_token_seconds", "ttft"),
    "trtllm": Engine("trtllm", 'model_name="m"', "trtllm_generation_tokens_total", "counter",
                     "trtllm_time_to_first_token_seconds", "ttft"),
    "tgi": Engine("tgi", "", "tgi_request_generated_tokens_sum", "histogram_sum", "tgi_request_duration", "e2e"),
    "llamacpp": Engine("llamacpp", "", "llamacpp:tokens_predicted_total", "counter", None, None),
}


def _lab(e: Engine, extra: str = "") -> str:
    inner = ",".join(p for p in (e.labels, extra) if p)
    return f"{{{inner}}}" if inner else ""


def _le(bound: str, shard: str = "", rank: str = "") -> str:
    """The labels of a bucket: ``le`` (and a shard label) as written in a payload."""
    return (f'{shard}="{rank}",' if shard else "") + f'le="{bound}"'


def _histogram_lines(e: Engine, buckets: list[tuple[str, str]], count: str | None, total: str = "3.5") -> list[str]:
    assert e.histogram is not None
    lines = [f"# TYPE {e.histogram} histogram"]
    lines += [f"{e.histogram}_bucket{_lab(e, _le(le))} {v}" for le, v in buckets]
    if count is not None:
        lines.append(f"{e.histogram}_count{_lab(e)} {count}")
    lines.append(f"{e.histogram}_sum{_lab(e)} {total}")
    return lines


_GOOD_BUCKETS = [("0.1", "2"), ("1.0", "5"), ("+Inf", "9")]


def payload(e: Engine, counter_lines: list[str] | None = None, hist_lines: list[str] | None = None,
            generated: float = 100.0, observed: int = 0) -> str:
    """A valid payload of ``e`` (``generated`` tokens, ``observed`` more observations in each bucket),
    with its counter or histogram lines replaced where given."""
    if counter_lines is None:
        counter_lines = [f"{e.counter}{_lab(e)} {generated:g}"]
    lines: list[str] = []
    if e.counter_kind == "counter":
        lines += [f"# TYPE {e.counter.removesuffix('_total')} counter", *counter_lines]
    else:  # TGI: the generated-tokens histogram, its _sum read as the counter
        base = e.counter.removesuffix("_sum")
        lines += [f"# TYPE {base} histogram", f'{base}_bucket{{le="+Inf"}} 4', f"{base}_count 4", *counter_lines]
    if e.histogram is not None:
        if hist_lines is None:
            hist_lines = _histogram_lines(e, [(le, str(int(v) + observed)) for le, v in _GOOD_BUCKETS],
                                          str(9 + observed))
        lines += hist_lines
    return "\n".join(lines) + "\n"


def collect_twice(first: str, second: str, profile: str) -> EngineSnapshot:
    """The snapshot after two scrapes of a fake engine that serves ``first``, then ``second``."""
    engine = FakeEngine(payloads=[first, second])

    async def run(url: str) -> EngineSnapshot:
        collector = EngineCollector(parse_engine_ref(f"{profile}@{url}"), period=1.0)
        try:
            await collector.collect()
            await asyncio.sleep(0.05)  # the windows need time to pass between the scrapes
            return await collector.collect()
        finally:
            collector.probe.close()

    with serve(engine) as url:
        snap = asyncio.run(run(url))
    assert engine.scrapes >= 2, "the metrics were not scraped twice"
    return snap


def _invalid(m: ModelMetrics | None, field: str) -> str:
    assert m is not None
    reasons = [f.describe() for f in m.invalid if f.field == field]
    assert reasons, f"{field} not marked invalid: {[f.describe() for f in m.invalid]}"
    return reasons[0]


# ---------------------------------------------------------------------------- the valid control
@pytest.mark.parametrize("profile", sorted(ENGINES))
def test_valid_payloads_give_numbers_and_no_invalid_mark(profile: str) -> None:
    e = ENGINES[profile]
    snap = collect_twice(payload(e, generated=100), payload(e, generated=160, observed=4), profile)
    m = snap.total
    assert m is not None and m.invalid == (), [f.describe() for f in m.invalid] if m else None
    assert m.generation_tps.r5s is not None and m.generation_tps.r5s > 0
    if e.quantiles:
        q = getattr(m, e.quantiles)
        assert q.count == 4 and q.p50 is not None


# ------------------------------------------------------------------------------------ counters
_COUNTER_SHAPES = {
    "nan": (["{c}{lab} NaN"], "is NaN"),
    "plus-inf": (["{c}{lab} +Inf"], "is +Inf"),
    "minus-inf": (["{c}{lab} -Inf"], "is -Inf"),
    "negative": (["{c}{lab} -250"], "is negative (-250)"),
    "duplicate": (["{c}{lab} 200", "{c}{lab} 150"], "appears twice in one payload"),
}


@pytest.mark.parametrize("shape", sorted(_COUNTER_SHAPES))
@pytest.mark.parametrize("profile", sorted(ENGINES))
def test_invalid_counter_is_marked_and_has_no_rate(profile: str, shape: str) -> None:
    e = ENGINES[profile]
    templates, why = _COUNTER_SHAPES[shape]
    hostile = [t.format(c=e.counter, lab=_lab(e)) for t in templates]
    snap = collect_twice(payload(e, generated=100), payload(e, counter_lines=hostile), profile)
    m = snap.total
    assert m is not None
    # Not 0 tok/s, not a rate made of the other series: n/a, with the reason.
    assert (m.generation_tps.r5s, m.generation_tps.r15s, m.generation_tps.r60s) == (None, None, None)
    assert "generation_tokens" not in m.counters
    reason = _invalid(m, "counters.generation_tokens")
    assert e.counter in reason and why in reason, reason
    assert snap.phase.value == "ready"  # the engine answers; its data is what is wrong


# ---------------------------------------------------------------------------------- histograms
_HIST_SHAPES: dict[str, tuple[Callable[[Engine], list[str]], str]] = {
    "decreasing-buckets": (lambda e: _histogram_lines(e, [("0.1", "8"), ("1.0", "5"), ("+Inf", "9")], "9"),
                           "buckets decrease with le"),
    "count-differs-from-inf": (lambda e: _histogram_lines(e, [("0.1", "2"), ("1.0", "5"), ("+Inf", "9")], "400"),
                               "_count 400 differs from the +Inf bucket 9"),
    "no-inf-bucket-no-count": (lambda e: _histogram_lines(e, [("0.1", "2"), ("1.0", "9")], None),
                               "no +Inf bucket and no _count"),
    "no-inf-bucket-count-below": (lambda e: _histogram_lines(e, [("0.1", "2"), ("1.0", "9")], "6"),
                                  "no +Inf bucket, and _count 6 is below the top bucket 9"),
    "negative-bucket": (lambda e: _histogram_lines(e, [("0.1", "-3"), ("1.0", "5"), ("+Inf", "9")], "9"),
                        "is negative"),
    "nan-le": (lambda e: _histogram_lines(e, [("0.1", "2"), ("NaN", "3"), ("1.0", "5"), ("+Inf", "9")], "9"),
               "le='NaN'"),
    "nan-bucket": (lambda e: _histogram_lines(e, [("0.1", "2"), ("1.0", "NaN"), ("+Inf", "9")], "9"), "is NaN"),
    "duplicate-bucket": (lambda e: _histogram_lines(e, [("0.1", "2"), ("1.0", "5"), ("1.0", "6"), ("+Inf", "9")],
                                                    "9"), "appears twice in one payload"),
}
_WITH_HISTOGRAMS = sorted(p for p, e in ENGINES.items() if e.histogram)


@pytest.mark.parametrize("shape", sorted(_HIST_SHAPES))
@pytest.mark.parametrize("profile", _WITH_HISTOGRAMS)
def test_invalid_histogram_gives_no_quantile_and_no_mean(profile: str, shape: str) -> None:
    e = ENGINES[profile]
    assert e.quantiles is not None
    make, why = _HIST_SHAPES[shape]
    snap = collect_twice(payload(e), payload(e, hist_lines=make(e), generated=150), profile)
    m = snap.total
    assert m is not None
    q = getattr(m, e.quantiles)
    assert (q.p50, q.p90, q.p99, q.mean, q.count) == (None, None, None, None, None), q
    if e.quantiles == "ttft":
        assert m.ttft_cumulative == ((), ())
    reason = _invalid(m, e.quantiles)
    assert why in reason, reason
    # The rest of the payload still counts: the counter beside it has its rate.
    assert m.generation_tps.r5s is not None and m.generation_tps.r5s > 0


def test_one_invalid_shard_makes_the_histogram_invalid() -> None:
    """Shards (SGLang's TP ranks) report one logical value: a valid one beside a decreasing one is no
    answer, whichever has the larger count."""
    profile, shard = "sglang", "tp_rank"
    assert shard in _shard_labels(profile)
    e = ENGINES[profile]
    assert e.histogram is not None and e.quantiles is not None
    good = [f"{e.histogram}_bucket{_lab(e, _le(le, shard, '0'))} {v}" for le, v in _GOOD_BUCKETS]
    bad = [f"{e.histogram}_bucket{_lab(e, _le(le, shard, '1'))} {v}"
           for le, v in (("0.1", "7"), ("1.0", "3"), ("+Inf", "9"))]
    lines = [f"# TYPE {e.histogram} histogram", *good, *bad]
    snap = collect_twice(payload(e), payload(e, hist_lines=lines, generated=150), profile)
    q = getattr(snap.total, e.quantiles)
    assert q.p50 is None and q.count is None
    assert "buckets decrease with le" in _invalid(snap.total, e.quantiles)


def _shard_labels(profile: str) -> frozenset[str]:
    from console.profiles import get_profile

    return frozenset(get_profile(profile).metrics.shard_labels)


def test_an_invalid_model_makes_the_total_n_a() -> None:
    """Two served models: one model's NaN counter leaves the total n/a, not the other model's rate."""
    e = ENGINES["vllm"]
    good = "\n".join(["# TYPE vllm:generation_tokens counter",
                      'vllm:generation_tokens_total{engine="0",model_name="a"} 100',
                      'vllm:generation_tokens_total{engine="0",model_name="b"} 100'])
    bad = "\n".join(["# TYPE vllm:generation_tokens counter",
                     'vllm:generation_tokens_total{engine="0",model_name="a"} 300',
                     'vllm:generation_tokens_total{engine="0",model_name="b"} NaN'])
    snap = collect_twice(good + "\n", bad + "\n", e.profile)
    by_model = {m.model: m for m in snap.models}
    assert by_model["a"].generation_tps.r5s is not None and by_model["a"].invalid == ()
    assert by_model["b"].generation_tps.r5s is None
    assert snap.total is not None and snap.total.generation_tps.r5s is None
    assert "is NaN" in _invalid(snap.total, "counters.generation_tokens")


# ------------------------------------------------------------------------------- status --json
def _status(url: str, profile: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", "status", "--engine", f"{profile}@{url}",
                           "--sample", "1.2", "--refresh", "0.4", "--gpus", "none", *extra],
                          capture_output=True, text=True, timeout=60, env=os.environ.copy())


@pytest.mark.parametrize(("profile", "shape"), [("vllm", "nan"), ("llamacpp", "plus-inf"), ("sglang", "duplicate"),
                                                ("tgi", "negative")])
def test_status_json_names_an_invalid_counter(profile: str, shape: str) -> None:
    e = ENGINES[profile]
    templates, why = _COUNTER_SHAPES[shape]
    hostile = payload(e, counter_lines=[t.format(c=e.counter, lab=_lab(e)) for t in templates])
    with serve(FakeEngine(payloads=[payload(e), hostile])) as url:
        r = _status(url, profile, "--json")
        text = _status(url, profile)
    assert r.returncode in (0, 1), r.stderr
    summary = json.loads(r.stdout)["engines"][0]["summary"]
    assert all(v is None for k, v in summary["generation_tokens_per_s"].items() if k in ("5s", "15s", "60s", "now"))
    marks = [f for f in summary["invalid"] if f["field"] == "counters.generation_tokens"]
    assert marks and why in marks[0]["reason"] and marks[0]["allowed"] == "", summary["invalid"]
    assert "invalid data, shown as n/a:" in text.stdout and why in text.stdout, text.stdout


@pytest.mark.parametrize(("profile", "shape"), [("vllm", "decreasing-buckets"), ("trtllm", "count-differs-from-inf"),
                                                ("sglang", "nan-le")])
def test_status_json_names_an_invalid_histogram(profile: str, shape: str) -> None:
    e = ENGINES[profile]
    make, why = _HIST_SHAPES[shape]
    with serve(FakeEngine(payloads=[payload(e), payload(e, hist_lines=make(e), generated=150)])) as url:
        r = _status(url, profile, "--json")
    assert r.returncode in (0, 1), r.stderr
    summary = json.loads(r.stdout)["engines"][0]["summary"]
    ttft = summary["ttft_s"]
    assert (ttft["p50"], ttft["p99"], ttft["mean"], ttft["count"]) == (None, None, None, None), ttft
    marks = [f for f in summary["invalid"] if f["field"] == "ttft"]
    assert marks and why in marks[0]["reason"], summary["invalid"]
