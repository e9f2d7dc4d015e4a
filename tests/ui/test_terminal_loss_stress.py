"""A handful of rounds of benchmarks/terminal_loss.py: consoles in private tmux servers (attach on a
live simulated fleet, and the demo) lose their terminal in every way it measures - tmux
kill-session and kill-server, SIGHUP, SIGTERM, a stalled terminal then kill-session - and each has
ended within 2 s, with nothing left behind and the demo's simulators stopped and audited. The full
run (100 + 20) is the benchmark itself."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests import procgroup

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_few_rounds_of_the_terminal_loss_benchmark() -> None:
    proc = procgroup.run(
        [sys.executable, str(REPO / "benchmarks" / "terminal_loss.py"), "--attach", "5", "--demo", "5",
         "--stall", "3", "--time-limit", "400"],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "acceptance met" in proc.stdout
