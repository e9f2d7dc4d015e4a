"""How a run ended, told apart (issue 10): a crash, a stop asked for here, a stop or restart from
outside, a failed start; and the one-line view the console shows of each, every fact once."""

from __future__ import annotations

import pytest

from console.lifecycle.phases import PhaseMachine, ending_of
from console.model import Phase
from console.ui.control_lifecycle import view_of
from tests.lifecycle.conftest import FakeClock
from tests.lifecycle.test_phases import READY, REFUSED, machine


def _ready(clock: FakeClock) -> PhaseMachine:
    m = machine(clock)
    m.starting()
    m.probe(READY)
    return m


@pytest.mark.parametrize(("code", "oom", "ended"), [
    (137, False, "crashed"), (1, False, "crashed"), (139, False, "crashed"), (0, True, "crashed"),
    (0, False, "outside"), (143, False, "outside"), (130, False, "outside"), (None, False, "unknown"),
])
def test_an_exit_nobody_here_asked_for(clock: FakeClock, code: int | None, oom: bool, ended: str) -> None:
    assert ending_of(code, oom) == ended
    m = _ready(clock)
    m.exited(code, oom=oom)
    assert m.phase is Phase.EXITED and m.state.ended == ended


def test_a_stop_asked_for_here_a_failed_start_and_a_give_up(clock: FakeClock) -> None:
    m = _ready(clock)
    m.stop_requested(5)
    m.exited(143)
    assert (m.phase, m.state.ended) == (Phase.EXITED, "stopped")
    m.reset()
    m.starting()
    m.probe(REFUSED)
    m.exited(1, last_lines=("boom",))
    assert (m.phase, m.state.ended) == (Phase.FAILED, "failed")
    m.reset()
    m.starting()
    m.stop_requested(5, reason="loading timed out")
    m.exited(143)
    assert (m.phase, m.state.ended) == (Phase.FAILED, "gave-up")
    m.reset()
    assert m.state.ended == ""
    m.failed("port 8000 is already in use")
    assert m.state.ended == "failed"


def test_an_outside_stop_is_watched_then_ends_as_outside(clock: FakeClock) -> None:
    m = _ready(clock)
    m.ended_outside(143)
    assert m.phase is Phase.STOPPING and "watching for a restart" in m.state.detail
    m.exited(143)  # no restart came
    assert (m.phase, m.state.ended) == (Phase.EXITED, "outside")


def test_found_exited_container_is_classified(clock: FakeClock) -> None:
    m = machine(clock)
    m.found_exited(137, oom=True)
    assert m.state.ended == "crashed"
    m.found_exited(0)
    assert m.state.ended == "outside"


def test_view_says_the_stop_countdown_once(clock: FakeClock) -> None:
    m = _ready(clock)
    m.stop_requested(5)
    m.countdown(3.2)
    v = view_of(m.state, wall_since=None)
    assert v.detail == "SIGTERM sent; SIGKILL in 4 s" and v.countdown == 4
    m2 = _ready(clock)
    m2.stop_requested(5, reason="loading timed out")
    assert view_of(m2.state, wall_since=None).detail == "loading timed out; SIGTERM sent; SIGKILL in 5 s"
    m.exited(137)
    v = view_of(m.state, wall_since=1.0)
    assert (v.phase, v.ended, v.exit_code, v.since) == (Phase.EXITED, "stopped", 137, 1.0)


def test_singular_model_listed(clock: FakeClock) -> None:
    assert _ready(clock).state.detail == "1 model listed"
