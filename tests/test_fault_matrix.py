"""The fault matrix: two simulated engines under load, one behind a fault-injecting proxy.

For each fault of engine A (refused, 503, hang, 10 s slow, garbage, over-cap body, non-finite
values, huge labels, counter reset, crash loop) the hub must mark only A, with a reason that says
what happened, while B's numbers keep moving on time; and A must come back when the fault ends.

Everything is real: simulator processes, the proxy process (tests/faultproxy.py), a load process,
and the Hub with two engines on short periods. Ports are free ports; every process is ended by its
process group, also on failure.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from console.config import parse_engine_ref
from console.model import EngineSnapshot, FleetSnapshot, Phase
from console.ports import free_port
from console.telemetry.hub import Hub
from tests import procgroup

REFRESH = 0.25
# B must never go longer than this without a new sample while A is broken. Its period is 0.25 s;
# the bound leaves room for a busy 2-core CI machine, and is far below what a blocked hub loop
# gives (a parse of megabytes of labels on the loop, or a dead loop: seconds to forever).
B_MAX_GAP = 2.0


def _spawn(args: list[str], stdin: int | None = None, stdout: int | None = None,
           stderr: int | None = None) -> subprocess.Popen[bytes]:
    return procgroup.popen([sys.executable, "-m", *args], stdin=stdin, stdout=stdout, stderr=stderr,
                           start_new_session=True)


def _end(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def _wait_http(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout:g} s")


@dataclass
class Lab:
    a_port: int
    b_port: int
    a_direct: str
    b_url: str
    proxy_url: str
    control: str
    hub: Hub
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    seen: list[tuple[float, FleetSnapshot]] = field(default_factory=list)
    _crash_stop: threading.Event | None = None
    _crash_thread: threading.Thread | None = None

    @property
    def a_name(self) -> str:
        return f"vllm@{self.proxy_url}"

    @property
    def b_name(self) -> str:
        return f"vllm@{self.b_url}"

    def fault(self, name: str | None) -> None:
        req = urllib.request.Request(f"{self.control}/fault/{name or 'none'}", method="POST", data=b"")
        urllib.request.urlopen(req, timeout=10).close()

    def engine(self, name: str) -> EngineSnapshot:
        return next(e for e in self.hub.latest().engines if e.name == name)

    def a(self) -> EngineSnapshot:
        return self.engine(self.a_name)

    def b(self) -> EngineSnapshot:
        return self.engine(self.b_name)

    def wait_for(self, what: str, pred: Callable[[], bool], timeout: float = 15.0) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if pred():
                return time.monotonic() - start
            time.sleep(0.05)
        raise AssertionError(f"not within {timeout:g} s: {what}; A = {_describe(self.a())}; B = {_describe(self.b())}")

    # -- engine A's simulator process -------------------------------------------------------------

    def start_a(self, *faults: str) -> None:
        args = ["console", "sim", "--engine", "vllm", "--port", str(self.a_port), "--no-access-log", "--seed", "1"]
        for f in faults:
            args += ["--fault", f]
        self.procs["sim-a"] = _spawn(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def restart_a(self) -> None:
        _end(self.procs.get("sim-a"))
        self.start_a()
        _wait_http(self.a_direct)

    def crash_loop(self, crash_after: float) -> None:
        """Restart A each time it exits; every run crashes ``crash_after`` s after it starts."""
        _end(self.procs.get("sim-a"))
        stop = self._crash_stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                self.start_a(f"crash-after={crash_after:g}")
                proc = self.procs["sim-a"]
                while proc.poll() is None and not stop.is_set():
                    time.sleep(0.05)

        self._crash_thread = threading.Thread(target=loop, daemon=True)
        self._crash_thread.start()

    def end_crash_loop(self) -> None:
        if self._crash_stop is not None and self._crash_thread is not None:
            self._crash_stop.set()
            self._crash_thread.join(timeout=15)
            self._crash_stop = self._crash_thread = None
        self.restart_a()

    def close(self) -> None:
        if self._crash_stop is not None:
            self._crash_stop.set()
            if self._crash_thread is not None:
                self._crash_thread.join(timeout=15)
        self.hub.stop()
        proxy = self.procs.get("proxy")
        if proxy is not None and proxy.stdin is not None:
            proxy.stdin.close()
        for proc in self.procs.values():
            _end(proc)


def _describe(e: EngineSnapshot) -> str:
    f = e.metrics_freshness
    gen = e.total.counters.get("generation_tokens") if e.total else None
    return (f"phase={e.phase.value} reachable={e.reachable} detail={e.health_detail!r} "
            f"metrics={f.state.value} reason={f.reason!r} updated={f.updated_at} generation_tokens={gen}")


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    a_port, b_port = free_port(), free_port()
    a_direct, b_url = f"http://127.0.0.1:{a_port}", f"http://127.0.0.1:{b_port}"
    procs: dict[str, subprocess.Popen[bytes]] = {}
    lab: Lab | None = None
    try:
        procs["sim-b"] = _spawn(["console", "sim", "--engine", "vllm", "--port", str(b_port), "--no-access-log",
                                 "--seed", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs["proxy"] = _spawn(["tests.faultproxy", "--upstream", a_direct], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        assert procs["proxy"].stdout is not None
        ports = json.loads(procs["proxy"].stdout.readline())
        proxy_url, control = f"http://127.0.0.1:{ports['port']}", f"http://127.0.0.1:{ports['control']}"
        inst_a = parse_engine_ref(f"vllm@{proxy_url}")
        inst_b = parse_engine_ref(f"vllm@{b_url}")
        hub = Hub([inst_a, inst_b], refresh=REFRESH, gpu_source="none")
        lab = Lab(a_port, b_port, a_direct, b_url, proxy_url, control, hub, procs)
        lab.start_a()
        _wait_http(a_direct)
        _wait_http(b_url)
        procs["load"] = _spawn(["console", "sim", "--load", f"vllm@{a_direct}", "--load", f"vllm@{b_url}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hub.subscribe(lambda snap: lab.seen.append((time.monotonic(), snap)) if lab else None)
        hub.start()
        lab.wait_for("both engines fresh with tokens generated", lambda: all(_healthy(e) for e in (lab.a(), lab.b())),
                     timeout=30)
        yield lab
    finally:
        if lab is not None:
            lab.close()
        else:
            for proc in procs.values():
                _end(proc)


def _healthy(e: EngineSnapshot) -> bool:
    return (e.reachable and e.phase is Phase.READY and not e.metrics_freshness.stale and e.total is not None
            and (e.total.counters.get("generation_tokens") or 0) > 0)


def _b_kept_moving(lab: Lab, since: float, until: float) -> None:
    """While A was broken the hub kept publishing, and in every snapshot B was fresh, its newest
    sample at most B_MAX_GAP old; B's token counter grew."""
    window = [(t, s) for t, s in lab.seen if since <= t <= until]
    # Published every REFRESH s; a blocked hub loop publishes nothing.
    assert len(window) >= max(2, (until - since) / 1.0), f"{len(window)} snapshots in {until - since:.1f} s"
    times = [since] + [t for t, _ in window] + [until]
    publish_gap = max(b - a for a, b in itertools.pairwise(times))
    assert publish_gap <= B_MAX_GAP, f"the hub published nothing for {publish_gap:.2f} s"
    b_snaps = [(s.taken_at, next(e for e in s.engines if e.name == lab.b_name)) for _, s in window]
    ages = []
    for taken_at, e in b_snaps:
        assert not e.metrics_freshness.stale and e.reachable, f"B marked while A was broken: {_describe(e)}"
        assert e.metrics_freshness.updated_at is not None
        ages.append(taken_at - e.metrics_freshness.updated_at)
    assert max(ages) <= B_MAX_GAP, f"B's newest sample was {max(ages):.2f} s old"
    first, last = b_snaps[0][1].total, b_snaps[-1][1].total
    assert first is not None and last is not None
    assert last.counters["generation_tokens"] > first.counters["generation_tokens"], "B's tokens did not move"
    print(f"B while A was broken: {len(window)} snapshots in {until - since:.1f} s, "
          f"oldest B sample {max(ages):.2f} s, longest publish gap {publish_gap:.2f} s")


def _a_recovers(lab: Lab, cleared_at: float) -> None:
    lab.wait_for(
        "A fresh again with new samples after the fault ended",
        lambda: _healthy(lab.a()) and (lab.a().metrics_freshness.updated_at or 0) > cleared_at + 0.5,
        timeout=20,
    )
    before = lab.a().total
    assert before is not None
    gen0 = before.counters["generation_tokens"]
    lab.wait_for("A's tokens move again", lambda: _gen_tokens(lab.a()) > gen0)


def _gen_tokens(e: EngineSnapshot) -> float:
    return e.total.counters.get("generation_tokens", 0.0) if e.total else 0.0


def _gauges_na(e: EngineSnapshot) -> bool:
    return e.total is not None and e.total.running is None and e.total.kv_usage is None


def _reason(e: EngineSnapshot) -> str:
    return f"{e.health_detail} | {e.metrics_freshness.reason}"


# fault -> (what A shows while it lasts, as a predicate, and a description for failures)
MARKS: dict[str, tuple[str, Callable[[EngineSnapshot], bool]]] = {
    "refused": ("unreachable: connection refused",
                lambda e: not e.reachable and "connection refused" in _reason(e)),
    "503": ("marked with the 503",
            lambda e: e.metrics_freshness.stale and "503" in _reason(e) and e.phase is not Phase.READY),
    "hang": ("marked: no answer",
             lambda e: e.metrics_freshness.stale and ("no answer within" in _reason(e) or "took longer" in _reason(e))),
    "slow": ("marked: no answer (10 s slow)",
             lambda e: e.metrics_freshness.stale and ("no answer within" in _reason(e) or "took longer" in _reason(e))),
    "garbage": ("marked: unparseable payload",
                lambda e: e.reachable and e.metrics_freshness.stale and "unparseable payload" in _reason(e)),
    "overcap": ("marked: larger than 16 MiB",
                lambda e: e.reachable and e.metrics_freshness.stale and "larger than 16 MiB" in _reason(e)
                and "no samples" not in _reason(e)),
}


@pytest.mark.parametrize("fault", list(MARKS))
def test_fault_marks_only_its_engine(lab: Lab, fault: str) -> None:
    what, marked = MARKS[fault]
    lab.wait_for("both healthy before the fault", lambda: _healthy(lab.a()) and _healthy(lab.b()))
    start = time.monotonic()
    lab.fault(fault)
    try:
        lab.wait_for(f"A {what}", lambda: marked(lab.a()))
        time.sleep(1.0)  # the fault lasts a while: B must keep going meanwhile
        assert marked(lab.a()), f"A no longer marked while the fault lasts: {_describe(lab.a())}"
        _b_kept_moving(lab, start, time.monotonic())
    finally:
        lab.fault(None)
    _a_recovers(lab, time.monotonic())


def test_non_finite_values_leave_gauges_na_and_collection_alive(lab: Lab) -> None:
    lab.wait_for("both healthy before the fault", lambda: _healthy(lab.a()) and _healthy(lab.b()))
    start = time.monotonic()
    t_wall = time.time()
    lab.fault("nonfinite")
    try:
        # Every gauge is +Inf with a -Inf twin: no number for them (n/a), but counters and
        # collection go on, and nothing shows as inf or as the gauge's value from before.
        lab.wait_for("A's gauges n/a while its counters keep coming",
                     lambda: _gauges_na(s := lab.a()) and (s.metrics_freshness.updated_at or 0) > t_wall + 0.5)
        a = lab.a()
        assert not a.metrics_freshness.stale, _describe(a)
        gen = _gen_tokens(a)
        lab.wait_for("A's counters keep moving", lambda: _gen_tokens(lab.a()) > gen)
        _b_kept_moving(lab, start, time.monotonic())
    finally:
        lab.fault(None)
    _a_recovers(lab, time.monotonic())
    lab.wait_for("A's gauges back", lambda: (t := lab.a().total) is not None and t.running is not None)


def test_huge_labels_never_delay_the_other_engine(lab: Lab) -> None:
    lab.wait_for("both healthy before the fault", lambda: _healthy(lab.a()) and _healthy(lab.b()))
    start = time.monotonic()
    lab.fault("huge-labels")
    try:
        time.sleep(5.0)  # A's every payload now carries 8 MiB of labels
        _b_kept_moving(lab, start, time.monotonic())
        a = lab.a()
        # The 15 MiB label set is one malformed line (over the 64 KiB limit); the rest of A's payload
        # still gives its numbers.
        assert not a.metrics_freshness.stale and a.total is not None and a.total.running is not None, _describe(a)
    finally:
        lab.fault(None)
    _a_recovers(lab, time.monotonic())


def test_counter_reset_gives_no_negative_rates(lab: Lab) -> None:
    lab.wait_for("both healthy before the fault", lambda: _healthy(lab.a()) and _healthy(lab.b()))
    state = lab.hub._collectors[lab.a_name].state  # the windows of engine A: they count resets
    resets, cleared = state.resets, state.cleared
    start = time.monotonic()
    lab.restart_a()  # a real engine restart: every counter starts again from 0
    # Either the windows saw each series start again, or (the engine was lost between two scrapes)
    # they were emptied, so nothing from before the restart is shown as current.
    lab.wait_for("A's windows saw the counters start again",
                 lambda: state.resets > resets or state.cleared > cleared, timeout=20)
    anew = state.cleared > cleared
    _a_recovers(lab, time.monotonic())
    _b_kept_moving(lab, start, time.monotonic())
    for t, snap in lab.seen:
        a = next(e for e in snap.engines if e.name == lab.a_name)
        if t < start or a.total is None:
            continue
        # New baseline per series: never a negative rate, and the counter shown never goes back.
        for r in (a.total.generation_tps, a.total.prompt_tps, a.total.request_rate):
            assert all(v is None or v >= 0 for v in (r.r5s, r.r15s, r.r60s)), f"negative rate after reset: {r}"
    shown = [next(e for e in s.engines if e.name == lab.a_name).total for t, s in lab.seen if t >= start]
    tokens = [m.counters["generation_tokens"] for m in shown if m is not None and "generation_tokens" in m.counters]
    if anew:  # counted anew from the restart: it never goes back after its lowest point
        tokens = tokens[tokens.index(min(tokens)):] if tokens else tokens
    assert tokens == sorted(tokens), "A's token count went backwards across the reset"


def test_crash_loop_marks_only_its_engine_and_recovers(lab: Lab) -> None:
    lab.wait_for("both healthy before the fault", lambda: _healthy(lab.a()) and _healthy(lab.b()))
    start = time.monotonic()
    lab.crash_loop(crash_after=1.0)
    try:
        lab.wait_for("A marked unreachable while it crash-loops", lambda: not lab.a().reachable
                     and lab.a().metrics_freshness.stale and bool(lab.a().health_detail))
        time.sleep(3.0)
        _b_kept_moving(lab, start, time.monotonic())
    finally:
        lab.end_crash_loop()
    _a_recovers(lab, time.monotonic())
