"""The shutdown deadline (console/ui/terminal_guard.py) on its own: a process whose main thread is
blocked for good - as Textual's was, in ``Queue.put`` - still ends within the deadline on SIGTERM,
SIGHUP, SIGINT or a hung-up terminal, after its terminal-loss action ran; a normal end gives the
signal handlers back."""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 0.6
SLACK = 2.0  # scheduling on a busy 2-core machine; the guard itself is exact to a few ms

CHILD = textwrap.dedent("""
    import os, queue, subprocess, sys, threading, time
    from console.ui.terminal_guard import TerminalGuard

    out, deadline, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    if mode == "starved":  # the deadline thread never gets to exit (a GIL it cannot get)
        g = TerminalGuard(deadline=deadline, helper_extra=HELPER_EXTRA,
                          exit_hard=lambda code: threading.Event().wait())
        engine = subprocess.Popen(["sleep", "60"], start_new_session=True)
    else:  # the helper process late enough that the deadline thread always ends it first
        g = TerminalGuard(deadline=deadline, helper_extra=5.0)
    g.add_action(lambda reason, by: open(out, "w").write(f"{reason}|{by - time.monotonic():.3f}"))
    g.add_final(lambda: open(out + ".final", "w").write("final"))
    g.install()
    print("ready", flush=True)
    if mode in ("block", "starved"):
        if mode == "starved":
            print(engine.pid, flush=True)
        q = queue.Queue(1)
        q.put(1)
        q.put(2)  # blocks for good, as Textual's WriterThread.stop() did behind a dead writer
    elif mode == "graceful":
        while not g.begun.is_set():
            time.sleep(0.01)
        g.settle()
        g.close()  # shutdown began: ends the process here, with the signal's status
        print("not reached", flush=True)
    elif mode == "normal":
        import signal
        print(g._helper.pid, flush=True)
        before = signal.getsignal(signal.SIGTERM)
        g.close()
        after = signal.getsignal(signal.SIGTERM)
        print("restored" if after is signal.SIG_DFL and before is not after
              and signal.set_wakeup_fd(-1) == -1 else "not restored", flush=True)
""").replace("HELPER_EXTRA", "0.3")
HELPER_EXTRA = 0.3


def _start(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], Path]:
    out = tmp_path / "action.txt"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(out), str(DEADLINE), mode], cwd=REPO,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc, out


def _wait(proc: subprocess.Popen[str]) -> float:
    t0 = time.monotonic()
    try:
        proc.wait(timeout=DEADLINE + SLACK + 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return time.monotonic() - t0


@pytest.mark.parametrize(("sig", "name"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGHUP"),
                                           (signal.SIGINT, "SIGINT")])
def test_a_blocked_main_thread_still_ends_at_the_deadline(tmp_path: Path, sig: int, name: str) -> None:
    proc, out = _start(tmp_path, "block")
    time.sleep(0.2)  # the main thread is in Queue.put now
    proc.send_signal(sig)
    took = _wait(proc)
    assert proc.returncode == 128 + sig
    assert DEADLINE * 0.9 <= took < DEADLINE + SLACK
    reason, left = out.read_text().split("|")
    assert reason == f"{name} received"
    assert float(left) > 0  # the action had time left before the hard exit
    assert Path(f"{out}.final").read_text() == "final"  # and the last word before it


def test_a_hung_up_terminal_ends_it_too(tmp_path: Path) -> None:
    out = tmp_path / "action.txt"
    pid, master = pty.fork()
    if pid == 0:  # the child: session leader on the pty, stdin/stdout/stderr on it
        os.chdir(REPO)
        os.execv(sys.executable, [sys.executable, "-c", CHILD, str(out), str(DEADLINE), "block"])
    try:
        buf = b""
        while b"ready" not in buf:
            buf += os.read(master, 1024)
        time.sleep(0.2)
        os.close(master)  # what sshd or tmux do when the connection or the session goes
        master = -1
        t0 = time.monotonic()
        status = 0
        while time.monotonic() - t0 < DEADLINE + SLACK + 5:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.01)
        took = time.monotonic() - t0
    finally:
        if master >= 0:
            os.close(master)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 128 + signal.SIGHUP
    assert took < DEADLINE + SLACK
    # The kernel sends SIGHUP with the hang-up; whichever the guard saw first is the reason.
    assert out.read_text().split("|")[0] in ("SIGHUP received", "the terminal hung up")


def test_a_main_thread_that_finishes_its_cleanup_ends_before_the_deadline(tmp_path: Path) -> None:
    proc, out = _start(tmp_path, "graceful")
    proc.send_signal(signal.SIGTERM)
    took = _wait(proc)
    assert proc.returncode == 128 + signal.SIGTERM
    assert proc.stdout is not None and "not reached" not in proc.stdout.read()
    assert out.read_text().startswith("SIGTERM received|")
    assert Path(f"{out}.final").read_text() == "final"
    assert took < DEADLINE + SLACK


def test_a_normal_end_gives_the_signals_back(tmp_path: Path) -> None:
    proc, _ = _start(tmp_path, "normal")
    assert proc.stdout is not None
    helper = int(proc.stdout.readline())
    assert proc.stdout.readline().strip() == "restored"
    _wait(proc)
    assert proc.returncode == 0
    assert not _running(helper)  # the helper process ended with the normal end


def test_the_helper_process_ends_a_console_whose_deadline_thread_cannot(tmp_path: Path) -> None:
    """The backstop: the helper, with an interpreter of its own, kills the console's own process
    groups (its engines) and then the console, shortly after the deadline."""
    proc, out = _start(tmp_path, "starved")
    assert proc.stdout is not None
    engine = int(proc.stdout.readline())
    try:
        time.sleep(0.2)
        proc.send_signal(signal.SIGHUP)
        took = _wait(proc)
        assert proc.returncode == -signal.SIGKILL
        assert DEADLINE + HELPER_EXTRA - 0.1 <= took < DEADLINE + HELPER_EXTRA + SLACK
        deadline = time.monotonic() + 5
        while _running(engine) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(engine)
        assert out.read_text().startswith("SIGHUP received|")  # the policy still ran in time
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(engine, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
