"""Subprocesses a test starts, each in its own process group, killed as a whole group.

``subprocess.run(..., timeout=...)`` kills only the process it started when the timeout expires; an
`enginedeck` command's own children (a simulator, a load worker, an engine it launched) live on and
keep its pipes open. ``run`` and ``popen`` start the command in a new session (a new process group);
``run`` kills the whole group on timeout or on any exception, and the test-wide fixture in
tests/conftest.py calls ``kill_started`` after every test (``kill_outer`` after the session), so a
timed-out or failed test leaves no process behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any

# The groups the current test started (its body and its function-scoped fixtures), and those that
# session and module fixtures started, which outlive a test and end with their fixture (or the session).
_started: list[subprocess.Popen[Any]] = []
_outer: list[subprocess.Popen[Any]] = []


def begin_test() -> None:
    """What was started until now (by wider-scoped fixtures, set up before the test's own) is not the
    test's: ``kill_started`` leaves it to its fixture."""
    _outer.extend(_started)
    _started.clear()


def popen(args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` in a new session; its group is killed at the end of the test."""
    if "process_group" in kwargs or kwargs.get("start_new_session") is False:
        raise ValueError("procgroup.popen always starts a new session")
    kwargs["start_new_session"] = True
    proc: subprocess.Popen[Any] = subprocess.Popen(args, **kwargs)
    _started.append(proc)
    return proc


def kill_group(proc: subprocess.Popen[Any], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to every process of ``proc``'s group, and reap ``proc`` after a SIGKILL."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
    if sig == signal.SIGKILL:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def run(args: Sequence[str], *, timeout: float, input: Any = None, capture_output: bool = False,
        check: bool = False, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` with a required timeout, after which the whole process group is killed
    and ``subprocess.TimeoutExpired`` raised with what the command wrote until then."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    proc = popen(args, **kwargs)
    with proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            kill_group(proc)
            # Whatever escaped the group may still hold the pipes: read what is there, briefly.
            with contextlib.suppress(subprocess.TimeoutExpired):
                exc.stdout, exc.stderr = proc.communicate(timeout=5)
            raise
        except BaseException:
            kill_group(proc)
            raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def kill_started() -> list[int]:
    """Kill the group of every process ``run`` or ``popen`` started since the last call; the pids
    of the groups that still had a live member (a test that did not stop what it started)."""
    alive: list[int] = []
    while _started:
        proc = _started.pop()
        if _group_alive(proc.pid):
            alive.append(proc.pid)
            kill_group(proc)
        elif proc.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
    return alive


def kill_outer() -> None:
    """At the end of the session: the groups of wider-scoped fixtures that are still there."""
    _started.extend(_outer)
    _outer.clear()
    kill_started()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pgid reused by another user's process: not ours
        return False
    return True
