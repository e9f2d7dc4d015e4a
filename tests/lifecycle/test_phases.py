from __future__ import annotations

from console.config import Timeouts
from console.lifecycle.phases import LoadingSignal, PhaseMachine, ProbeResult
from console.lifecycle.state import Backend
from console.model import Phase
from tests.lifecycle.conftest import FakeClock

REFUSED = ProbeResult("refused")
LOADING_503 = ProbeResult("http", 503, detail="Loading model")
READY = ProbeResult("http", 200, models=1)
NO_MODELS = ProbeResult("http", 200, models=0)


def machine(clock: FakeClock, loading: tuple[LoadingSignal, ...] = ("refused",), **timeouts: float) -> PhaseMachine:
    return PhaseMachine(
        "e1",
        timeouts=Timeouts(**timeouts),
        loading=loading,
        backend=Backend.PROCESS,
        clock=clock,
    )


def phase(m: PhaseMachine) -> Phase:
    # A call, not the property: mypy keeps `m.phase` narrowed across the method calls that change it.
    return m.phase


def test_refused_engine_goes_loading_then_ready(clock: FakeClock) -> None:
    m = machine(clock)
    m.creating()
    m.starting(pid=42, address="127.0.0.1:8000")
    assert phase(m) is Phase.STARTING
    m.probe(REFUSED)
    assert phase(m) is Phase.LOADING
    assert "refused" in m.state.detail
    m.log_line("Loading safetensors checkpoint shards: 50%")
    assert m.state.evidence.startswith("Loading safetensors")
    clock.advance(3)
    m.probe(READY)
    assert phase(m) is Phase.READY
    assert [p for p, _ in m.state.history] == [Phase.CREATING, Phase.STARTING, Phase.LOADING, Phase.READY]
    assert m.state.since == clock.now


def test_503_engine_stays_starting_while_refused(clock: FakeClock) -> None:
    m = machine(clock, loading=("503",))
    m.starting(pid=1)
    m.probe(REFUSED)
    assert phase(m) is Phase.STARTING  # llama.cpp: nothing bound yet is not "loading"
    m.probe(LOADING_503)
    assert phase(m) is Phase.LOADING
    assert m.state.detail == "503 Loading model"
    m.probe(NO_MODELS)
    assert phase(m) is Phase.LOADING
    m.probe(READY)
    assert phase(m) is Phase.READY
    assert m.state.saw(Phase.LOADING)


def test_ready_engine_degrades_and_recovers(clock: FakeClock) -> None:
    m = machine(clock)
    m.starting()
    m.probe(READY)
    m.probe(NO_MODELS)
    assert phase(m) is Phase.DEGRADED
    m.probe(ProbeResult("timeout"))
    assert phase(m) is Phase.UNHEALTHY
    m.probe(REFUSED)
    assert phase(m) is Phase.UNHEALTHY
    m.probe(READY)
    assert phase(m) is Phase.READY


def test_wrong_key_is_degraded_not_loading(clock: FakeClock) -> None:
    m = machine(clock)
    m.starting()
    m.probe(ProbeResult("http", 401))
    assert phase(m) is Phase.DEGRADED
    assert "API key" in m.state.detail


def test_slow_load_with_moving_log_only_warns(clock: FakeClock) -> None:
    m = PhaseMachine("e1", timeouts=Timeouts(loading=60), loading=("refused",), clock=clock, progress_window=30)
    m.starting()
    m.probe(REFUSED)
    for _ in range(10):  # 100 s of loading with a line every 10 s
        clock.advance(10)
        m.log_line("capturing CUDA graphs")
        verdict = m.tick()
        assert verdict.action == "none"
    assert phase(m) is Phase.LOADING
    assert "not stopping it" in m.state.warning
    assert "timeout 60 s" in m.state.warning


def test_silent_load_past_timeout_gives_up_with_reason(clock: FakeClock) -> None:
    m = PhaseMachine("e1", timeouts=Timeouts(loading=60), loading=("refused",), clock=clock, progress_window=30)
    m.starting()
    m.probe(REFUSED)
    m.log_line("loading weights")
    clock.advance(59)
    assert m.tick().action == "none"
    clock.advance(2)
    verdict = m.tick()
    assert verdict.action == "give_up"
    assert "loading timed out after 61 s (limit 60 s)" in verdict.reason
    assert "no log output for 61 s" in verdict.reason


def test_starting_timeout_without_any_log(clock: FakeClock) -> None:
    m = PhaseMachine("e1", timeouts=Timeouts(starting=5), loading=("503",), clock=clock)
    m.starting()
    m.probe(REFUSED)
    clock.advance(6)
    verdict = m.tick()
    assert verdict.action == "give_up"
    assert "no log output yet" in verdict.reason


def test_exit_before_ready_is_a_failed_start(clock: FakeClock) -> None:
    m = machine(clock)
    m.starting()
    m.probe(REFUSED)
    m.exited(1, last_lines=("a", "RuntimeError: CUDA out of memory"))
    assert phase(m) is Phase.FAILED
    assert m.state.exit_code == 1
    assert m.state.detail == "exited during loading with exit code 1: RuntimeError: CUDA out of memory"
    assert m.state.last_log_lines[-1] == "RuntimeError: CUDA out of memory"


def test_exit_while_degraded_before_ever_ready_is_a_failed_start(clock: FakeClock) -> None:
    m = machine(clock)
    m.starting()
    m.probe(ProbeResult("http", 401))  # something answers on the port, but our engine never got ready
    m.exited(1, last_lines=("cannot listen on 127.0.0.1:8000: Address already in use",))
    assert phase(m) is Phase.FAILED
    assert m.state.detail.startswith("exited during degraded with exit code 1: cannot listen")


def test_crash_after_ready_is_exited_with_code_and_oom(clock: FakeClock) -> None:
    m = machine(clock)
    m.starting()
    m.probe(READY)
    m.exited(137, oom=True, last_lines=("killed",))
    assert phase(m) is Phase.EXITED
    assert m.state.oom_killed
    assert m.state.detail == "exited unexpectedly with exit code 137 (OOMKilled)"


def test_stop_countdown_and_kill(clock: FakeClock) -> None:
    m = machine(clock)
    m.starting()
    m.probe(READY)
    m.stop_requested(10)
    assert phase(m) is Phase.STOPPING
    assert m.state.countdown == 10
    m.countdown(8.3)
    assert m.state.countdown == 9
    m.countdown(0.2)
    assert m.state.countdown == 1
    m.killing()
    assert m.state.countdown == 0
    assert "SIGKILL" in m.state.detail
    m.exited(137, note="GPU release not verified (NVML unavailable: x)")
    assert phase(m) is Phase.EXITED
    assert m.state.countdown is None
    assert m.state.detail == "stopped (exit code 137); GPU release not verified (NVML unavailable: x)"


def test_give_up_stop_ends_failed_with_reason(clock: FakeClock) -> None:
    m = machine(clock)
    m.starting()
    m.stop_requested(5, reason="loading timed out")
    m.exited(143)
    assert phase(m) is Phase.FAILED
    assert m.state.detail.startswith("loading timed out; exit code 143")


def test_probes_do_not_change_a_stopping_or_ended_engine(clock: FakeClock) -> None:
    m = machine(clock)
    m.starting()
    m.stop_requested(5)
    m.probe(READY)
    assert phase(m) is Phase.STOPPING
    m.exited(0)
    m.probe(READY)
    assert phase(m) is Phase.EXITED


def test_found_exited_container(clock: FakeClock) -> None:
    m = machine(clock)
    m.found_exited(1, oom=True, last_lines=("boom",), container_id="abc")
    assert phase(m) is Phase.EXITED
    assert m.state.detail == "found exited (exit code 1, OOMKilled)"
    assert (m.state.exit_code, m.state.oom_killed, m.state.container_id) == (1, True, "abc")


def test_reset_forgets_the_previous_run(clock: FakeClock) -> None:
    m = machine(clock)
    m.starting()
    m.exited(3)
    m.reset()
    assert phase(m) is Phase.UNKNOWN
    assert m.state.exit_code is None
    assert m.state.history == ()


def test_pulling_progress_and_one_line(clock: FakeClock) -> None:
    m = machine(clock)
    m.pulling(42.4, "Downloading")
    assert m.state.progress == 42.4
    assert m.state.one_line() == "pulling - 42% - Downloading"
