"""An engine's histograms rebuilt only where values moved (``NormalizeMemo``) give exactly what a
reading from scratch gives, whatever changes between payloads, and the shortcut is taken when only
a few values moved."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from console.profiles import load_profiles
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.normmemo import NormalizeMemo
from console.telemetry.metrics.promdelta import ScrapeParser
from console.telemetry.metrics.readings import Reading
from tests.telemetry.test_promdelta import TEXTS, _mutate, _value_lines, case_seed

PROFILES = load_profiles()


def _view(r: Reading) -> object:
    # Values as text: NaN equals itself then. Dict order counts (the UI lists models and series in it).
    def hist(h: object) -> str:
        return repr(h)

    models = [
        (name, repr(m.gauges), repr(m.kv_usage_mean), m.replicas, repr(m.counters), repr(m.created),
         [(c, [(k, hist(h)) for k, h in series.items()]) for c, series in m.histograms.items()])
        for name, m in r.models.items()
    ]
    return models, r.resolved, r.missing, r.unmapped, r.errors, r.sample_count


def _check(text: str, profile: str, seed: int, steps: int = 40) -> NormalizeMemo:
    rng = random.Random(seed)
    print(f"differential seed={seed}")  # shown with the failure's captured output, or with -s
    prof = PROFILES[profile]
    parser, memo = ScrapeParser(), NormalizeMemo()
    lines = text.split("\n")
    for step in range(steps):
        payload = "\n".join(lines)
        for full in (False, True) if step % 7 == 0 else (False,):
            kept = normalize(prof, payload.encode(), full=full, parser=parser, memo=memo)
            fresh = normalize(prof, payload.encode(), full=full)
            assert _view(kept) == _view(fresh), f"seed={seed} profile={profile} step={step}: {payload[:200]!r}"
        lines = _mutate(lines, rng) if rng.random() < 0.6 else _mutate(text.split("\n"), rng)
    return memo


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.stem)
@pytest.mark.parametrize("profile", ["vllm", "sglang", "llamacpp", "tgi", "trtllm"])
def test_equals_a_reading_from_scratch_whatever_changes(path: Path, profile: str) -> None:
    _check(path.read_text(), profile, seed=case_seed(path.name, profile))


def _sharded_payload(rng: random.Random) -> str:
    """SGLang histograms over two models, DP replicas and TP shards, of equal counts on dp_rank 0."""
    out = ["# HELP sglang:time_to_first_token_seconds TTFT.", "# TYPE sglang:time_to_first_token_seconds histogram"]
    for model in ("a", "b"):
        for dp in ("0", "1"):
            for tp in ("0", "1", "2"):
                labels = f'model_name="{model}",dp_rank="{dp}",tp_rank="{tp}"'
                running = 0
                for le in ("0.1", "0.5", "1.0", "+Inf"):
                    # dp_rank 0: every shard ends at a count of 12, so the first of equals is kept.
                    running = 12 if dp == "0" and le == "+Inf" else running + rng.randrange(4)
                    out.append(f'sglang:time_to_first_token_seconds_bucket{{{labels},le="{le}"}} {running}')
                out.append(f"sglang:time_to_first_token_seconds_sum{{{labels}}} {running * 0.3}")
                out.append(f"sglang:time_to_first_token_seconds_count{{{labels}}} {running}")
    return "\n".join(out) + "\n"


def test_shards_of_a_series_keep_the_largest_whole_as_values_move() -> None:
    rng = random.Random(3)
    text = _sharded_payload(rng)
    memo = _check(text, "sglang", seed=5, steps=60)
    assert memo.planned >= 1
    # Values moving on a TP shard change which shard is kept: still equal to a reading from scratch.
    parser, memo = ScrapeParser(), NormalizeMemo()
    lines = text.split("\n")
    values = _value_lines(lines)
    for step in range(30):
        payload = "\n".join(lines)
        got = normalize(PROFILES["sglang"], payload, full=False, parser=parser, memo=memo)
        assert _view(got) == _view(normalize(PROFILES["sglang"], payload, full=False)), step
        for j in rng.sample(values, k=3):
            head, _, value = lines[j].rpartition(" ")
            lines[j] = f"{head} {float(value) + rng.randrange(1, 50)}"
    assert memo.planned == 1  # one plan, then only changed series rebuilt


def _sim_payload(data_parallel: int) -> str:
    """The simulated vLLM's exposition (prometheus_client), ``data_parallel`` engine ranks."""
    from prometheus_client import generate_latest

    from console.sim.engines import FLAVOURS, SimOptions

    flavour = FLAVOURS["vllm"](SimOptions(engine="vllm", model="m", data_parallel=data_parallel))
    return generate_latest(flavour.metrics_registry()).decode()


def test_a_large_payload_rebuilds_only_the_series_whose_values_moved() -> None:
    text = _sim_payload(data_parallel=4)
    prof = PROFILES["vllm"]
    parser, memo = ScrapeParser(), NormalizeMemo()
    lines = text.split("\n")
    first = normalize(prof, text, full=False, parser=parser, memo=memo)
    series = sum(len(s) for m in first.models.values() for s in m.histograms.values())
    assert series >= 20 and memo.planned == len(first.models["m"].histograms)
    built = memo.rebuilt
    # One line of one histogram series moves (its _sum: a bucket alone cannot move without making the
    # series invalid): that series alone is rebuilt.
    target = next(i for i, line in enumerate(lines)
                  if line.startswith("vllm:e2e_request_latency_seconds_sum") and 'engine="2"' in line)
    lines[target] = f"{lines[target].rpartition(' ')[0]} 12345.0"
    second = normalize(prof, "\n".join(lines), full=False, parser=parser, memo=memo)
    assert memo.rebuilt == built + 1 and memo.planned == len(first.models["m"].histograms)
    assert _view(second) == _view(normalize(prof, "\n".join(lines), full=False))
    e2e_before, e2e_now = first.models["m"].histograms["e2e"], second.models["m"].histograms["e2e"]
    moved = [k for k in e2e_now if e2e_now[k] is not e2e_before[k]]
    assert moved == [k for k in e2e_now if ("engine", "2") in k]
    # The other histograms' series are the very objects of the first reading.
    assert second.models["m"].histograms["ttft"] == first.models["m"].histograms["ttft"]
    assert all(second.models["m"].histograms["ttft"][k] is v for k, v in first.models["m"].histograms["ttft"].items())


def test_the_largest_shard_is_kept_whole_and_the_first_of_equals() -> None:
    rng = random.Random(11)
    text = _sharded_payload(rng)
    reading = normalize(PROFILES["sglang"], text, full=False, parser=ScrapeParser(), memo=NormalizeMemo())
    # The shards as the payload states them, read here without normalize: (model, dp, tp) -> counts.
    counts: dict[tuple[str, str, str], list[float]] = {}
    for line in text.splitlines():
        if line.startswith("sglang:time_to_first_token_seconds_bucket"):
            labels = dict(kv.split("=") for kv in line[line.index("{") + 1:line.index("}")].split(","))
            key = (labels["model_name"].strip('"'), labels["dp_rank"].strip('"'), labels["tp_rank"].strip('"'))
            counts.setdefault(key, []).append(float(line.rpartition(" ")[2]))
    for model in ("a", "b"):
        for dp in ("0", "1"):
            shards = [counts[(model, dp, tp)] for tp in ("0", "1", "2")]
            best = shards[0]
            for c in shards[1:]:
                if c[-1] > best[-1]:
                    best = c
            got = reading.models[model].histograms["ttft"][(("dp_rank", dp),)]
            assert list(got.counts) == best, (model, dp)
    assert any(len({tuple(counts[(m, "0", tp)]) for tp in "012"}) > 1 for m in "ab")  # equal counts, other buckets


def _series_of(line: str) -> str:
    """A histogram line's series: its base name and labels without ``le``."""
    head = line.rpartition(" ")[0]
    name, _, labels = head.partition("{")
    for suffix in ("_bucket", "_sum", "_count"):
        name = name.removesuffix(suffix)
    return name + ",".join(sorted(p for p in labels.rstrip("}").split(",") if p and not p.startswith("le=")))


def _observe(lines: list[str], rng: random.Random) -> None:
    """Observations on a few histogram series (every bucket, the sum and the count grow alike), or
    now and then a reset (all of a series falls)."""
    hist = [i for i, line in enumerate(lines) if line and line[0] != "#" and "_bucket" in line.split(" ")[0]]
    for _ in range(rng.choice([0, 1, 2])):
        key = _series_of(lines[rng.choice(hist)])
        grow = rng.randrange(1, 9)
        reset = rng.random() < 0.1
        for j, line in enumerate(lines):
            if line and line[0] != "#" and _series_of(line) == key:
                head, _, value = line.rpartition(" ")
                v = float(value)
                lines[j] = f"{head} {v * 0.25 if reset else v + grow}"


@pytest.mark.parametrize("profile", ["vllm", "sglang"])
def test_windows_fed_reused_series_give_what_fresh_series_give(profile: str) -> None:
    """The windows take a series object seen before as unchanged (no pass over its buckets): their
    rates, quantiles and resets equal those of windows fed a reading from scratch each time."""
    from console.telemetry.metrics.windows import EngineMetricsState

    prof = PROFILES[profile]
    text = _sharded_payload(random.Random(1)) if profile == "sglang" else _sim_payload(data_parallel=2)
    rng = random.Random(17)
    parser, memo = ScrapeParser(), NormalizeMemo()
    kept, fresh = EngineMetricsState(prof), EngineMetricsState(prof)
    lines = text.split("\n")
    quantiles = 0
    for step in range(80):
        payload = "\n".join(lines)
        kept.ingest(100.0 + step, normalize(prof, payload, full=False, parser=parser, memo=memo), wall=1e9 + step)
        fresh.ingest(100.0 + step, normalize(prof, payload, full=False), wall=1e9 + step)
        got = kept.metrics()
        assert repr(got) == repr(fresh.metrics()), step
        quantiles += got[1].ttft.p50 is not None
        _observe(lines, rng)
    assert kept.resets == fresh.resets > 0
    assert quantiles > 40  # the windows did see observations
