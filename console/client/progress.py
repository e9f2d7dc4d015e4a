"""How far a benchmark run is, as typed events.

The load generator and the bench send them (from the bench's child process, through a queue: they
pickle) to whoever shows progress: ``enginedeck bench`` prints them, the bench screen posts them to
itself as a ``console.ui.messages.BenchProgress``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SwapStarted:
    """Single-GPU A/B: the other engines are being stopped and ``engine`` started."""

    engine: str


@dataclass(frozen=True, slots=True)
class RunStarted:
    """``engine`` begins its levels, run ``position`` of ``of`` in the ABBA order (both from 0 / a count)."""

    engine: str
    repeat: int
    position: int
    of: int


@dataclass(frozen=True, slots=True)
class LevelProgress:
    """A level under way (at most ``loadgen.PROGRESS_HZ`` times a second). The measured requests
    and the warmup ones are counted apart: ``total`` is what the level measures (``--num-prompts``,
    the bench form's prompts/level), the warmup requests run before them and are not in the results."""

    engine: str
    level: str
    completed: int  # measured requests finished (ok or failed)
    errors: int  # requests failed so far, warmup included
    total: int  # measured requests in the level, warmup not included
    events: int  # token events received so far
    warmup_completed: int = 0
    warmup_total: int = 0

    def counts(self) -> str:
        """``2/32 (+1 warmup)``; while the warmup runs ``0/32 (+3/8 warmup)``: the measured count
        reads against the prompts asked for, the warmup apart."""
        out = f"{self.completed}/{self.total}"
        if self.warmup_total:
            done = self.warmup_completed
            out += f" (+{done if done == self.warmup_total else f'{done}/{self.warmup_total}'} warmup)"
        return out


@dataclass(frozen=True, slots=True)
class LevelDone:
    """A level finished: its counts and headline figures (None when not measured)."""

    engine: str
    repeat: int
    level: str
    completed: int
    failed: int
    ttft_p50_ms: float | None
    tpot_p50_ms: float | None
    output_tput: float | None
    cut: int = 0  # still running when --max-duration ended the level


BenchEvent = SwapStarted | RunStarted | LevelProgress | LevelDone
ProgressFn = Callable[[BenchEvent], object]  # what it returns is ignored
