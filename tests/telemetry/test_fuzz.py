"""Fuzz: 100,000 mutated metrics payloads through parse -> normalise -> windows -> status document,
and byte-split SSE streams through the SSE parser. Nothing may raise; nothing non-finite may reach
the status document; the SSE parser gives the same events however the bytes are cut.

A fast seeded mutator (not hypothesis: 100,000 payloads must fit in well under a minute on a
2-core CI machine) works on the real sample payloads in tests/fixtures/samples and on synthetic
ones written the way the engines write them (tests/telemetry/synth.py). Mutations: byte flips,
special tokens (``+Inf``, ``NaN``, ``1e308``, quotes, braces, backslashes, CR, invalid UTF-8),
deleted/duplicated/shuffled/truncated lines, values replaced by extremes, label sets grown past
the 64 KiB limit, changed ``# TYPE`` lines, OpenMetrics exemplars and timestamps, payloads of two
engines spliced together, and amplification to hundreds of KiB.

The figures (payloads, time, slowest ms per MB) are printed; ``ENGINEDECK_FUZZ_PAYLOADS`` and
``ENGINEDECK_FUZZ_SEED`` change the count and the seed (a failure prints the seed and index).
"""

from __future__ import annotations

import gc
import json
import math
import multiprocessing
import os
import random
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from console.client.sse import SSEParser
from console.model import EngineSnapshot, FleetSnapshot, Freshness, GpuFleet, SourceState
from console.profiles import EngineProfile, get_profile
from console.status_doc import status_doc
from console.telemetry.metrics.normalize import clear_caches, normalize
from console.telemetry.metrics.windows import EngineMetricsState
from tests.telemetry import synth

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
PAYLOADS = int(os.environ.get("ENGINEDECK_FUZZ_PAYLOADS", "100000"))
SSE_STREAMS = max(1000, PAYLOADS // 10)
WORKERS = min(4, os.cpu_count() or 1)
SEED = int(os.environ.get("ENGINEDECK_FUZZ_SEED", "20260517"))
# ms per MB is measured on mutated large inputs at least this big: below it, fixed costs (windows,
# the status document) dominate and "per MB" says nothing about the parser.
PER_MB_FLOOR = 64 * 1024
# Timings are the fastest of this many cold runs of one input (CPU time).
TIMING_RUNS = 3
# The slowest large input's parse + normalise per MB, as a share of prometheus_client's parser per MB
# on a valid payload. The share is not the same on every machine: timed alone, the same code measures
# 0.22-0.24 here (119 vs 503 ms/MB) and 0.33 on a CI runner (122 vs 367 ms/MB: that runner runs
# prometheus_client's regex-heavy parser faster, ours not). Quadratic label parsing cost 4-5x that
# parser (2.3 s/MB); the bound catches a return of such a shape cost, while the per-MB ratio of each
# mutated input to its own original (under 3x, below) catches a mutation that finds one. Neither is
# the 50 ms/MB target, which benchmarks/parse_normalize.py reports.
SLOWEST_VS_REFERENCE = 0.5

SPECIAL = [
    b"+Inf", b"-Inf", b"NaN", b"nan", b"1e308", b"-1e308", b"1e309", b"-0", b"0x10", b"9" * 400, b"1_000",
    b"\xff\xfe", b"\xc3", b"\x00", b"{", b"}", b'"', b"\\", b'\\"', b"\\n", b"\n", b"\r", b"\r\n", b"\t", b"#",
    b" ", b"=", b",", b"_bucket", b"_sum", b"_count", b"_total", b"_created", b'le="+Inf"', b'le="NaN"',
    b'le="-Inf"', b"# EOF", b"# TYPE", b"# HELP", b" # {trace_id=\"abc\"} 0.5 1700000000.1", b" 1700000000123",
    b" 1700000000.5", b'model_name="m"', b'engine="0"', b"\xe2\x80\xa8", "\u00a0".encode(),
]
KINDS = [b"counter", b"gauge", b"histogram", b"summary", b"untyped", b"unknown", b"info", b"stateset", b"bogus"]
EXTREMES = [b"+Inf", b"-Inf", b"NaN", b"1e308", b"-1e308", b"1.7976931348623157e308", b"5e-324", b"-5e-324", b"0",
            b"-0", b"1e-308", b"123456789012345678901234567890", b"-1"]


def _profile_for(name: str) -> str:
    for p in ("vllm", "sglang", "trtllm", "llamacpp", "tgi"):
        if name.startswith(p):
            return p
    return "vllm"


def _synthetic() -> dict[str, bytes]:
    """Payloads the way the engines write them, with every mapped family (samples lack some)."""
    series = [({"model_name": "m", "engine": str(i)}, 10.0 + i) for i in range(2)]
    buckets = [(0.1, 1.0), (1.0, 3.0), (math.inf, 4.0)]
    vllm = "".join([
        synth.simple("vllm:num_requests_running", "gauge", series),
        synth.simple("vllm:num_requests_waiting", "gauge", series),
        synth.simple("vllm:kv_cache_usage_perc", "gauge", [(lab, 0.5) for lab, _ in series]),
        synth.simple("vllm:prompt_tokens_total", "counter", series, created=True),
        synth.simple("vllm:generation_tokens_total", "counter", series, created=True),
        synth.simple("vllm:prefix_cache_queries_total", "counter", series),
        synth.simple("vllm:prefix_cache_hits_total", "counter", series),
        synth.simple("vllm:request_success_total", "counter",
                     [({**lab, "finished_reason": r}, v) for lab, v in series for r in ("stop", "length")]),
        synth.histogram("vllm:time_to_first_token_seconds", [(lab, buckets, 1.5) for lab, _ in series]),
        synth.histogram("vllm:inter_token_latency_seconds", [(lab, buckets, 0.7) for lab, _ in series]),
        synth.histogram("vllm:e2e_request_latency_seconds", [(lab, buckets, 9.0) for lab, _ in series]),
    ])
    return {"vllm-synthetic": vllm.encode()}


@dataclass
class Corpus:
    payloads: list[tuple[str, bytes]]  # (profile, payload)
    sse: list[bytes]


def _corpus() -> Corpus:
    payloads: list[tuple[str, bytes]] = []
    sse: list[bytes] = []
    for f in sorted(SAMPLES.glob("*.txt")):
        data = f.read_bytes()
        if data.startswith(b"data:"):
            sse.append(data)
        payloads.append((_profile_for(f.name), data))
    for name, data in _synthetic().items():
        payloads.append((_profile_for(name), data))
    assert len(payloads) >= 10 and sse, "fixture samples missing"
    return Corpus(payloads, sse)


class Mutator:
    """Seeded, fast mutations of one payload (bytes in, bytes out)."""

    def __init__(self, rng: random.Random, corpus: Corpus) -> None:
        self.rng = rng
        self.corpus = corpus
        self.ops: list[Callable[[bytes], bytes]] = [
            self.flip, self.special, self.special, self.delete_range, self.dup_line, self.shuffle_lines,
            self.truncate, self.extreme_value, self.extreme_value, self.extreme_value, self.retype, self.splice,
            self.label_noise, self.crlf, self.drop_lines,
        ]

    def mutate(self, data: bytes, *, whole: bool = False) -> bytes:
        if not whole and self.rng.random() < 0.4:
            data = self.fragment(data)
        for _ in range(self.rng.randint(1, 4)):
            data = self.rng.choice(self.ops)(data)
        return data

    def fragment(self, data: bytes) -> bytes:
        """A run of consecutive lines: what an excerpt, or a cut connection, gives."""
        lines = self._lines(data)
        i = self.rng.randrange(len(lines))
        return b"\n".join(lines[i : i + self.rng.randint(1, 40)])

    def _pos(self, data: bytes) -> int:
        return self.rng.randint(0, len(data))

    def flip(self, data: bytes) -> bytes:
        if not data:
            return data
        b = bytearray(data)
        for _ in range(self.rng.randint(1, 8)):
            b[self.rng.randrange(len(b))] = self.rng.randrange(256)
        return bytes(b)

    def special(self, data: bytes) -> bytes:
        p = self._pos(data)
        return data[:p] + self.rng.choice(SPECIAL) + data[p:]

    def delete_range(self, data: bytes) -> bytes:
        p = self._pos(data)
        return data[:p] + data[p + self.rng.randint(1, 64) :]

    def truncate(self, data: bytes) -> bytes:
        return data[: self._pos(data)]

    def _lines(self, data: bytes) -> list[bytes]:
        return data.split(b"\n")

    def dup_line(self, data: bytes) -> bytes:
        lines = self._lines(data)
        i = self.rng.randrange(len(lines))
        lines[i:i] = [lines[i]] * self.rng.randint(1, 5)
        return b"\n".join(lines)

    def drop_lines(self, data: bytes) -> bytes:
        lines = self._lines(data)
        return b"\n".join(ln for ln in lines if self.rng.random() > 0.2)

    def shuffle_lines(self, data: bytes) -> bytes:
        lines = self._lines(data)
        i = self.rng.randrange(len(lines))
        j = min(len(lines), i + self.rng.randint(2, 12))
        part = lines[i:j]
        self.rng.shuffle(part)
        lines[i:j] = part
        return b"\n".join(lines)

    def extreme_value(self, data: bytes) -> bytes:
        """Replace the value of a few sample lines with an extreme or non-finite one."""
        lines = self._lines(data)
        for _ in range(self.rng.randint(1, 6)):
            i = self.rng.randrange(len(lines))
            line = lines[i]
            if line and not line.startswith(b"#") and b" " in line:
                head, _, _ = line.rpartition(b" ")
                lines[i] = head + b" " + self.rng.choice(EXTREMES)
        return b"\n".join(lines)

    def retype(self, data: bytes) -> bytes:
        lines = self._lines(data)
        typed = [i for i, ln in enumerate(lines) if ln.startswith(b"# TYPE ")]
        if typed:
            i = self.rng.choice(typed)
            parts = lines[i].split(b" ")
            lines[i] = b" ".join([*parts[:3], self.rng.choice(KINDS)])
        return b"\n".join(lines)

    def splice(self, data: bytes) -> bytes:
        _, other = self.rng.choice(self.corpus.payloads)
        p, q = self._pos(data), self.rng.randint(0, len(other))
        return data[:p] + other[q:] if self.rng.random() < 0.5 else data + b"\n" + other[:q]

    def label_noise(self, data: bytes) -> bytes:
        """Grow one label set: many labels, a long value, sometimes past the 64 KiB limit."""
        lines = self._lines(data)
        with_labels = [i for i, ln in enumerate(lines) if b"{" in ln and not ln.startswith(b"#")]
        if not with_labels:
            return data
        i = self.rng.choice(with_labels)
        size = self.rng.choice((10, 100, 2000, 70_000))
        if size < 70_000:
            extra = b",".join(b'x%d="%d"' % (k, k) for k in range(size // 8))
        else:
            extra = b'x="' + b"v" * size + b'"'
        lines[i] = lines[i].replace(b"{", b"{" + extra + b",", 1)
        return b"\n".join(lines)

    def crlf(self, data: bytes) -> bytes:
        return data.replace(b"\n", b"\r\n") if self.rng.random() < 0.5 else data.replace(b"\n", b"\r")

    def amplify(self, data: bytes, target: int) -> bytes:
        """Repeat the sample lines with a fresh label each round until the payload reaches ``target`` bytes
        (a big engine: many models, replicas and label values)."""
        lines = [ln for ln in self._lines(data) if ln]
        out = [data]
        size, n = len(data), 0
        while size < target and lines:
            n += 1
            for ln in lines:
                if ln.startswith(b"#"):
                    continue
                if b"{" in ln:
                    new = ln.replace(b"{", b'{replica="%d",' % n, 1)
                else:
                    new = ln.replace(b" ", b'{replica="%d"} ' % n, 1)
                out.append(new)
                size += len(new) + 1
        return b"\n".join(out)


def _check_finite(value: object, path: str = "doc") -> None:
    if isinstance(value, float):
        assert math.isfinite(value), f"{path} = {value}"
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_finite(v, f"{path}[{i}]")


@dataclass
class Pipeline:
    """One engine's path through the console: the hub's steps, then the status document. Times are
    the thread's CPU time, so a busy machine does not turn into slow parsing."""

    profile: EngineProfile
    state: EngineMetricsState
    t: float = 0.0
    slowest: tuple[float, int, int] = (0.0, 0, -1)  # (ms whole pipeline, bytes, index)

    def run(self, payload: bytes, index: int, full: bool) -> None:
        start = time.thread_time()
        reading = normalize(self.profile, payload, full=full)  # parse + normalise
        if reading.ok:  # the hub windows only payloads that gave samples
            self.t += 1.0
            self.state.ingest(self.t, reading)
        models, total = self.state.metrics()
        engine = EngineSnapshot(
            name="fuzz", profile=self.profile.name, url="http://127.0.0.1:1", taken_at=self.t,
            models=models, total=total, missing=reading.missing,
            raw=reading.raw if full else (), unmapped=reading.unmapped if full else (),
            metrics_freshness=Freshness(SourceState.OK, updated_at=self.t),
        )
        doc = status_doc(FleetSnapshot(taken_at=self.t, engines=(engine,), gpus=GpuFleet(source="none")))
        json.dumps(doc, allow_nan=False)  # raises on NaN/Infinity anywhere in the document
        done = time.thread_time()
        if (done - start) * 1000 > self.slowest[0]:
            self.slowest = ((done - start) * 1000, len(payload), index)


def _cold_cpu_ms(run: Callable[[], object]) -> float:
    """CPU ms of ``run`` with every parse and normalise cache cold (an engine's first scrape: label
    sets, their shapes and splits), the fastest of ``TIMING_RUNS``. Garbage from earlier inputs is
    collected first, so that no full collection of it lands in the timing; the fastest run is the
    code's cost, the slower ones add what other processes on a shared machine did to its caches."""
    best = math.inf
    for _ in range(TIMING_RUNS):
        clear_caches()
        gc.collect()
        start = time.thread_time()
        run()
        best = min(best, time.thread_time() - start)
    return best * 1000


def _normalise_ms(profile: EngineProfile, payload: bytes) -> float:
    """CPU ms of parse + normalise (what the hub does per scrape), cold."""
    return _cold_cpu_ms(lambda: normalize(profile, payload, full=False))


def _reference_ms_per_mb(corpus: Corpus) -> float:
    """This machine's speed: CPU ms per MB of prometheus_client's own text parser on a valid vLLM-shaped
    payload of 1 MiB (the synthetic one, amplified), cold like ours. Machines differ several-fold; the
    ratio of two pure-Python parsers measured in the same process does not."""
    base = next(data for name, data in _synthetic().items() if name.startswith("vllm"))
    text = Mutator(random.Random(0), corpus).amplify(base, 2**20).decode()
    ms = _cold_cpu_ms(lambda: [f.samples for f in text_string_to_metric_families(text)])
    return ms / (len(text.encode()) / 2**20)


@dataclass
class Figures:
    payloads: int = 0
    sse_streams: int = 0
    sse_events: int = 0
    cpu_s: float = 0.0
    # Large inputs: (ms per MB of the mutated payload, the same for its unmutated original, bytes).
    per_mb: list[tuple[float, float, int]] = field(default_factory=list)
    slowest: tuple[float, int, int] = (0.0, 0, -1)
    # prometheus_client's parser, ms per MB (see _reference_ms_per_mb), per worker.
    reference: list[float] = field(default_factory=list)
    # The dearest large input per MB: (ms per MB, worker part, index), to time it again alone.
    dearest: tuple[float, int, int] = (0.0, 0, -1)

    def add(self, other: Figures) -> None:
        self.payloads += other.payloads
        self.sse_streams += other.sse_streams
        self.sse_events += other.sse_events
        self.cpu_s += other.cpu_s
        self.per_mb += other.per_mb
        self.slowest = max(self.slowest, other.slowest)
        self.reference += other.reference
        self.dearest = max(self.dearest, other.dearest)


def large_input(rng: random.Random, mutator: Mutator) -> tuple[str, bytes, bytes]:
    """(profile, amplified payload, mutated amplified payload): one of the large inputs (256 KiB - 2 MiB)
    that give the per-MB figures (benchmarks/parse_normalize.py draws the same ones)."""
    profile, base = rng.choice(mutator.corpus.payloads)
    amplified = mutator.amplify(base, rng.choice((256, 512, 1024, 2048)) * 1024)
    return profile, amplified, mutator.mutate(amplified, whole=True)


def large_shares(payloads: int = PAYLOADS) -> list[int]:
    """How many large inputs each worker of a run of ``payloads`` draws (worker k: seed/k)."""
    workers = max(1, min(WORKERS, payloads // 5000))
    large = max(2, payloads // 4000)  # amplified inputs (256 KiB - 2 MiB): they give the per-MB figures
    return [large // workers] * workers


def fuzz_part(seed: int, part: int, payloads: int, sse_streams: int, large: int = 0) -> Figures:
    """One worker's share: ``large`` amplified payloads (256 KiB - 2 MiB), then small ones, then
    split SSE streams. Deterministic for (seed, part); a failure names both and the index."""
    cpu_start = time.thread_time()
    corpus = _corpus()
    rng = random.Random(f"{seed}/{part}")
    mutator = Mutator(rng, corpus)
    pipelines = {p: Pipeline(get_profile(p), EngineMetricsState(get_profile(p)))
                 for p in sorted({p for p, _ in corpus.payloads})}
    figures = Figures(payloads=payloads)
    if large:
        figures.reference.append(_reference_ms_per_mb(corpus))
    for i in range(payloads):
        if i < large:
            profile, amplified, payload = large_input(rng, mutator)
            full = False
            if len(payload) >= PER_MB_FLOOR:
                mb, base_mb = len(payload) / 2**20, len(amplified) / 2**20
                p = get_profile(profile)
                figures.per_mb.append((_normalise_ms(p, payload) / mb, _normalise_ms(p, amplified) / base_mb,
                                       len(payload)))
                figures.dearest = max(figures.dearest, (figures.per_mb[-1][0], part, i))
        else:
            profile, base = rng.choice(corpus.payloads)
            if rng.random() < 0.1:
                profile = rng.choice(list(pipelines))  # another engine's profile over this payload
            payload, full = mutator.mutate(base), rng.random() < 0.2
        try:
            pipelines[profile].run(payload, i, full=full)
        except Exception as exc:
            raise AssertionError(f"seed {seed} part {part} payload #{i} ({profile}, {len(payload)} bytes): "
                                 f"{type(exc).__name__}: {exc}; payload starts {payload[:300]!r}") from None
    for pl in pipelines.values():
        figures.slowest = max(figures.slowest, pl.slowest)
    for i in range(sse_streams):
        stream = rng.choice(corpus.sse)
        if rng.random() < 0.7:
            stream = mutator.mutate(stream)
        try:
            figures.sse_events += _check_sse_split_invariance(stream, rng)
        except Exception as exc:
            raise AssertionError(f"seed {seed} part {part} SSE stream #{i}: {type(exc).__name__}: {exc}; "
                                 f"stream starts {stream[:300]!r}") from None
    figures.sse_streams = sse_streams
    figures.cpu_s = time.thread_time() - cpu_start
    return figures


@pytest.mark.slow
def test_fuzz_metrics_payloads_and_sse_streams() -> None:
    large = large_shares()
    workers = len(large)
    started = time.perf_counter()
    figures = Figures()
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        shares = [PAYLOADS // workers + (1 if k < PAYLOADS % workers else 0) for k in range(workers)]
        parts = [pool.submit(fuzz_part, SEED, k, shares[k], SSE_STREAMS // workers, large=large[k])
                 for k in range(workers)]
        for f in parts:
            figures.add(f.result())
    elapsed = time.perf_counter() - started
    assert figures.payloads >= PAYLOADS and figures.sse_streams >= SSE_STREAMS - workers
    per_mb = sorted(figures.per_mb, reverse=True)
    worst_ratio = max(m / b for m, b, _ in per_mb)
    median = statistics.median(m for m, _, _ in per_mb)
    reference = min(figures.reference)
    print(f"\nfuzz: {figures.payloads} payloads and {figures.sse_streams} byte-split SSE streams "
          f"({figures.sse_events} events) in {elapsed:.1f} s ({figures.cpu_s:.0f} CPU s, {workers} worker(s)), "
          f"seed {SEED}: no exception")
    print(f"fuzz: parse+normalise, cold, CPU time, {len(per_mb)} inputs of 64 KiB-2 MiB: slowest {per_mb[0][0]:.0f} "
          f"ms/MB ({per_mb[0][2] / 2**20:.2f} MB; its unmutated original {per_mb[0][1]:.0f}), median {median:.0f} "
          f"ms/MB; worst mutated/original {worst_ratio:.2f}x")
    print(f"fuzz: slowest whole pipeline {figures.slowest[0]:.1f} ms CPU ({figures.slowest[1]} bytes)")
    print(f"fuzz: prometheus_client's parser on a valid 1 MiB vLLM payload here: {reference:.0f} ms/MB; slowest of "
          f"ours {per_mb[0][0] / reference:.3f}x that (bound {SLOWEST_VS_REFERENCE}), target 50 ms/MB "
          f"({'met' if per_mb[0][0] < 50 else 'NOT met'} on this machine)")
    # Machines differ several-fold (a shared 2-core CI runner is slow), so what is asserted is
    # relative. No mutation makes a payload much dearer per MB than the engine-shaped payload it
    # came from (a pathological input shape would) ...
    assert worst_ratio < 3.0, f"a mutated payload cost {worst_ratio:.1f}x its original per MB"
    # ... and the dearest input per MB (thousands of series never seen before) costs a bounded share of
    # what prometheus_client's parser takes for a plain payload on the same machine, in the same
    # process. The absolute figure is benchmarks/parse_normalize.py's to report.
    slowest_share = per_mb[0][0] / reference
    if slowest_share >= SLOWEST_VS_REFERENCE:
        # The workers time their inputs while the other worker runs on the same cores, and each
        # times the reference once, at another moment. Before calling it a regression, time the
        # dearest input and the reference again here, alone, interleaved, the fastest of each.
        ours, reference = _retime_dearest(figures.dearest)
        print(f"fuzz: timed again alone: dearest input {ours:.0f} ms/MB, prometheus_client {reference:.0f} ms/MB")
        per_mb[0] = (ours, per_mb[0][1], per_mb[0][2])
        slowest_share = ours / reference
    assert slowest_share < SLOWEST_VS_REFERENCE, (
        f"slowest input {per_mb[0][0]:.0f} ms/MB = {slowest_share:.2f}x prometheus_client's {reference:.0f} ms/MB"
    )


def _retime_dearest(dearest: tuple[float, int, int]) -> tuple[float, float]:
    """(ms per MB of the dearest large input, of prometheus_client's parser), each the fastest of
    three rounds timed in this process, one after the other; the input drawn again from its seed."""
    _ms, part, index = dearest
    corpus = _corpus()
    rng = random.Random(f"{SEED}/{part}")
    mutator = Mutator(rng, corpus)
    for _ in range(index + 1):  # the large inputs are a worker's first draws, in order
        profile, _amplified, payload = large_input(rng, mutator)
    p, mb = get_profile(profile), len(payload) / 2**20
    ours, ref = math.inf, math.inf
    for _ in range(3):
        ours = min(ours, _normalise_ms(p, payload) / mb)
        ref = min(ref, _reference_ms_per_mb(corpus))
    return ours, ref


def _check_sse_split_invariance(stream: bytes, rng: random.Random) -> int:
    """Events from the stream fed whole == events from the same bytes cut at random places."""
    whole = SSEParser()
    expected = whole.feed(stream) + whole.close()
    cut = SSEParser()
    got = []
    pos = 0
    while pos < len(stream):
        step = rng.choice((1, 1, 2, 3, 7, 64, 500))
        got += cut.feed(stream[pos : pos + step])
        pos += step
    got += cut.close()
    assert got == expected, f"split changed the events: {got[:3]} vs {expected[:3]}"
    for ev in expected:
        assert isinstance(ev.data, bytes)
    return len(expected)
