"""Stopping process engines does not wait out the grace period for children that have already ended:
an engine that exited on SIGTERM stays a zombie until someone reaps it, and while the console quits
nobody may (issue 10 item 11: the demo's quit waited the whole grace)."""

from __future__ import annotations

import sys
import time

from console.lifecycle import process_backend
from tests import procgroup


def test_an_ended_unreaped_child_is_not_counted_as_running() -> None:
    proc = procgroup.popen([sys.executable, "-c", "pass"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # ended, not reaped: a zombie
            with open(f"/proc/{proc.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.02)
        else:
            raise AssertionError("the child did not end")
        assert process_backend._group_pids(proc.pid) == set()
    finally:
        proc.wait()


def test_a_running_group_is_counted() -> None:
    proc = procgroup.popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert process_backend._group_pids(proc.pid) == {proc.pid}
    finally:
        proc.kill()
        proc.wait()
