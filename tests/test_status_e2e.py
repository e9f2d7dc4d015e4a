"""End to end: real simulator processes -> the hub -> the numbers `status` prints.

The simulator's /_sim/state is its ground truth (its metrics are derived from the same state), so
the console's normalised values are checked against it: gauges within one scrape period, rates and
windowed quantiles within 5 % (the quantiles' truth computed here from the raw per-request TTFTs and
the engine's bucket bounds, not with the console's quantile code). Then an engine is killed mid-run
(unreachable within two periods, last values kept and marked stale) and restarted (no negative rate).
"""

from __future__ import annotations

import bisect
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from console.config import parse_engine_ref
from console.model import FleetSnapshot, Phase, Quantiles
from console.ports import free_port
from console.sim.fleet import Fleet, start_fleet
from console.telemetry.hub import Hub
from tests import procgroup

pytestmark = pytest.mark.slow
PERIOD = 1.0


def _state(url: str, requests: bool = False) -> dict[str, Any]:
    # Without the request records a poll is cheap, so the recorder samples densely on a loaded host.
    query = "" if requests else "?requests=0"
    with urllib.request.urlopen(f"{url}/_sim/state{query}", timeout=5) as resp:
        data: dict[str, Any] = json.load(resp)
    return data


class TruthRecorder(threading.Thread):
    """Polls every engine's ground truth several times per scrape period, one poller per engine
    (polled one after another, a loaded host saw only 3-4 samples of an engine in 2 s, too few
    to catch a KV-usage dip that lasts a scheduler step)."""

    def __init__(self, urls: list[str], every: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.urls = urls
        self.every = every
        self.samples: dict[str, list[dict[str, Any]]] = {u: [] for u in urls}
        self.halt = threading.Event()

    def run(self) -> None:
        pollers = [threading.Thread(target=self._poll, args=(u,), daemon=True) for u in self.urls]
        for t in pollers:
            t.start()
        for t in pollers:
            t.join()

    def _poll(self, url: str) -> None:
        while not self.halt.is_set():
            try:
                self.samples[url].append(_state(url))
            except OSError:
                pass
            self.halt.wait(self.every)

    def counter_at(self, url: str, name: str, t: float) -> float:
        s = self.samples[url]
        times = [x["time"] for x in s]
        i = bisect.bisect_left(times, t)
        if i <= 0:
            return float(s[0]["counters"][name])
        if i >= len(s):
            return float(s[-1]["counters"][name])
        a, b = s[i - 1], s[i]
        f = (t - a["time"]) / (b["time"] - a["time"])
        return float(a["counters"][name] + f * (b["counters"][name] - a["counters"][name]))

    def gauge_range(self, url: str, name: str, t0: float, t1: float) -> tuple[float, float]:
        vals = [x[name] for x in self.samples[url] if t0 <= x["time"] <= t1]
        assert vals, f"no truth samples for {name} in [{t0}, {t1}]"
        return min(vals), max(vals)


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    f = start_fleet(["vllm", "sglang", "trtllm", "tgi"], load=True, seed=7)
    try:
        yield f
    finally:
        f.stop()


def _within(value: float | None, lo: float, hi: float, rel: float, what: str) -> None:
    assert value is not None, f"{what}: console says n/a"
    assert lo * (1 - rel) - 1e-9 <= value <= hi * (1 + rel) + 1e-9, f"{what}: {value} not in [{lo}, {hi}] ±{rel:.0%}"


# Engine counter (truth name) feeding each console rate, per profile.
GEN = {"vllm": "generation_tokens", "sglang": "generation_tokens", "trtllm": "generation_tokens",
       "tgi": "generation_tokens"}
HIT = {"vllm": ("prefix_cache_hits", "prefix_cache_queries"), "sglang": ("cached_prompt_tokens", "prompt_tokens"),
       "trtllm": ("cached_prompt_tokens", "prompt_tokens")}


def _bucket_bounds(url: str, path: str, family: str) -> tuple[float, ...]:
    """The engine's bucket bounds, read straight from its payload with prometheus_client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + path, timeout=5) as resp:
        text = resp.read().decode()
    les = {s.labels.get("le") for f in text_string_to_metric_families(text) for s in f.samples
           if s.name == f"{family}_bucket"}
    return tuple(sorted(float(x) for x in les if x and x != "+Inf"))


def _truth_quantile(q: float, values: list[float], bounds: tuple[float, ...]) -> float:
    """What Prometheus' ``histogram_quantile`` gives for these raw values in these buckets, written
    here from its definition (not with the console's code): find the bucket holding the rank
    ``q * n`` (buckets are ``(previous bound, bound]``, the first starting at 0), interpolate
    linearly inside it; a rank in the +Inf bucket gives the highest finite bound."""
    rank = q * len(values)
    below = 0
    lower = 0.0
    for i, upper in enumerate(bounds):
        inside = sum(1 for v in values if (i == 0 or lower < v) and v <= upper)
        if inside and below + inside >= rank:
            return lower + (upper - lower) * (rank - below) / inside
        below += inside
        lower = upper
    return bounds[-1]


def _bucket_of(value: float, bounds: tuple[float, ...]) -> tuple[float, float]:
    """The (lower, upper] bucket holding ``value``."""
    lower = 0.0
    for upper in bounds:
        if value <= upper:
            return lower, upper
        lower = upper
    return lower, float("inf")


def test_status_agrees_with_ground_truth(fleet: Fleet) -> None:
    urls = [u for _, u, _ in fleet.endpoints]
    time.sleep(5)  # past the load's start-up burst, so the window's first scrape is not inside it
    rec = TruthRecorder(urls)
    rec.start()
    instances = [parse_engine_ref(f"{p}@{u}") for p, u, _ in fleet.endpoints]
    hub = Hub(instances, refresh=PERIOD, gpu_source="none")
    # The quantile window starts at each engine's first scrape (the arrival time the hub stamps),
    # which on a loaded host can be seconds after start(): take it from the first snapshots.
    first: dict[str, float] = {}
    all_scraped = threading.Event()

    def on_snapshot(snap: FleetSnapshot) -> None:
        for url, e in zip(urls, snap.engines, strict=True):
            if url not in first and e.metrics_freshness.updated_at is not None:
                first[url] = e.metrics_freshness.updated_at
        if len(first) == len(urls):
            all_scraped.set()

    hub.subscribe(on_snapshot)
    hub.start()
    try:
        assert all_scraped.wait(30), f"no first scrape within 30 s: {sorted(set(urls) - set(first))}"
        time.sleep(max(0.0, max(first.values()) + 22 - time.time()))
        snap = hub.latest()
        time.sleep(6)  # let requests in flight at the scrape finish, so their records exist
        finals = {u: _state(u, requests=True) for u in urls}
    finally:
        hub.stop()
        rec.halt.set()
        rec.join()
    for (profile, url, _), e in zip(fleet.endpoints, snap.engines, strict=True):
        assert e.reachable and e.phase is Phase.READY, (e.name, e.phase, e.health_detail)
        assert e.identity.version and e.identity.models, e.identity
        m = e.total
        assert m is not None
        t_scrape = e.metrics_freshness.updated_at
        assert t_scrape is not None
        # Gauges: the value of some moment within one scrape period of the scrape.
        for gauge in ("running", "waiting") + (("kv_usage",) if profile != "tgi" else ()):
            lo, hi = rec.gauge_range(url, gauge, t_scrape - PERIOD, t_scrape + PERIOD)
            got = getattr(m, gauge)
            # The recorder polls each engine every ~0.1-0.3 s and can miss a value that lasted one
            # scheduler step; allow one request (or 2% of KV) of slack for that, not for the console.
            slack = 0.02 if gauge == "kv_usage" else 1.0
            assert got is not None and lo - slack <= got <= hi + slack, f"{profile} {gauge}={got} truth [{lo},{hi}]"
        if profile == "tgi":
            assert m.kv_usage is None and m.prefix_hit_rate is None and m.ttft.p50 is None
        # Rates over 15 s: the window spans between W and W + one period before the scrape.
        w = 15.0
        name = GEN[profile]
        rates = [
            (rec.counter_at(url, name, t_scrape) - rec.counter_at(url, name, t_scrape - span)) / span
            for span in (w, w + PERIOD)
        ]
        _within(m.generation_tps.r15s, min(rates), max(rates), 0.05, f"{profile} generation tok/s")
        if profile in HIT:
            num, den = HIT[profile]
            ratios = []
            for span in (20.0, 21.0, 22.0):  # the hit-rate window covers the whole run so far
                dn = rec.counter_at(url, num, t_scrape) - rec.counter_at(url, num, t_scrape - span)
                dd = rec.counter_at(url, den, t_scrape) - rec.counter_at(url, den, t_scrape - span)
                ratios.append(dn / dd)
            got = m.prefix_hit_rate
            assert got is not None and min(ratios) - 0.05 <= got <= max(ratios) + 0.05, (profile, got, ratios)
        # Windowed quantiles: the TTFTs observed inside the window (vLLM and SGLang observe at the
        # first token, trtllm when the request finishes), bucketed like the engine's histogram.
        families = {"vllm": "vllm:time_to_first_token_seconds", "sglang": "sglang:time_to_first_token_seconds",
                    "trtllm": "trtllm_time_to_first_token_seconds"}
        if profile in families:
            path = "/prometheus/metrics" if profile == "trtllm" else "/metrics"
            bounds = _bucket_bounds(url, path, families[profile])
            assert bounds
            when = "finish" if profile == "trtllm" else "first_token"
            in_window = [r["ttft"] for r in finals[url]["requests"] if first[url] < r[when] <= t_scrape]
            assert len(in_window) >= 20
            truth = _truth_quantile(0.5, in_window, bounds)
            q: Quantiles = m.ttft
            assert q.p50 is not None
            assert abs(q.p50 - truth) <= 0.05 * truth, (profile, q.p50, truth)
            # And in the bucket of the raw median itself (a bucketed estimate cannot leave it).
            lo, hi = _bucket_of(statistics.median(in_window), bounds)
            assert lo * 0.95 <= q.p50 <= hi * 1.05, (profile, q.p50, lo, hi)
            assert q.count == pytest.approx(len(in_window), rel=0.05)
        pre = finals[url]["counters"]["preemptions"]
        if profile == "vllm":
            assert m.preemptions_total is not None and m.preemptions_total <= pre


def _start_sim(port: int) -> subprocess.Popen[bytes]:
    return procgroup.popen(
        [sys.executable, "-m", "console", "sim", "--engine", "vllm", "--port", str(port), "--seed", "3"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def _wait_http(url: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not come up")


def _drive(url: str, stop: threading.Event) -> None:
    body = json.dumps({"model": "Qwen/Qwen3-0.6B", "prompt": "the river and the city " * 20, "max_tokens": 32,
                       "ignore_eos": True}).encode()
    while not stop.is_set():
        try:
            req = urllib.request.Request(f"{url}/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=5).close()
        except OSError:
            time.sleep(0.1)


def test_killed_engine_goes_stale_then_recovers_without_negative_rates() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    period = 0.5
    proc = _start_sim(port)
    stop = threading.Event()
    drivers = [threading.Thread(target=_drive, args=(url, stop), daemon=True) for _ in range(4)]
    hub = Hub([parse_engine_ref(f"vllm@{url}")], refresh=period, gpu_source="none")
    try:
        _wait_http(url)
        for d in drivers:
            d.start()
        hub.start()
        time.sleep(6)
        before = hub.latest().engines[0]
        assert before.reachable and before.total is not None and before.total.generation_tps.r5s
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = time.monotonic()
        while time.monotonic() - killed_at < 2 * period + 0.5:
            e = hub.latest().engines[0]
            if not e.reachable:
                break
            time.sleep(0.05)
        e = hub.latest().engines[0]
        took = time.monotonic() - killed_at
        assert not e.reachable and e.phase is Phase.UNREACHABLE, (e.phase, took)
        assert took <= 2 * period + 0.5
        assert e.metrics_freshness.stale and "refused" in e.metrics_freshness.reason
        assert e.total is not None and e.total.generation_tps.r5s is not None  # last values kept
        proc = _start_sim(port)
        _wait_http(url)
        seen: list[float] = []
        t_end = time.monotonic() + 8
        while time.monotonic() < t_end:
            e = hub.latest().engines[0]
            if e.reachable and e.total is not None:
                for r in (e.total.generation_tps, e.total.prompt_tps, e.total.request_rate):
                    seen.extend(v for v in (r.r5s, r.r15s, r.r60s) if v is not None)
            time.sleep(period)
        assert seen and min(seen) >= 0
        assert hub.latest().engines[0].reachable
    finally:
        stop.set()
        hub.stop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
