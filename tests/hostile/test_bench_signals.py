"""Group 3 of the hostile-input suite: SIGTERM and SIGHUP stop `bench` the way Ctrl-C does.

A real `enginedeck bench` runs against a fake server on 127.0.0.1 that streams forever. A signal to
the bench alone or to its whole process group ends the load process too (nothing of the group is
left, checked by process group, and the server gets no request after the bench exited), writes the
JSON marked interrupted and exits 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP). A bench killed with
SIGKILL leaves no orphan load process either.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hostile._bench_fakes import (
    ROOT,
    FakeServer,
    bench_cmd,
    endless,
    fake_server,
    group_alive,
    isolated_env,
    kill_group,
)


def _default_stop_signals() -> None:
    """The bench under test starts with the stop signals at their defaults, as from a terminal (a
    runner started in the background hands its children SIGINT ignored, nohup SIGHUP)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _nohup() -> None:
    _default_stop_signals()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _start(srv: FakeServer, tmp: Path, preexec: Callable[[], None] | None = None) -> tuple[subprocess.Popen[str], Path]:
    out = tmp / "bench.json"
    proc = subprocess.Popen(bench_cmd(srv.ref, json_out=out, extra=["--concurrency", "2", "--num-prompts", "50"]),
                            cwd=ROOT, env=isolated_env(tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=preexec or _default_stop_signals)  # fmt: skip
    deadline = time.monotonic() + 60
    while len(srv.posts) < 2:  # both streams of the level are under way
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the bench sent nothing"
        time.sleep(0.05)
    return proc, out


def _gone(pgid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return True
        time.sleep(0.05)
    return False


def _quiet_after_exit(srv: FakeServer, wait: float = 1.0) -> int:
    """Requests the server got in ``wait`` seconds after the bench ended (an orphan keeps sending)."""
    n = len(srv.posts)
    time.sleep(wait)
    return len(srv.posts) - n


CASES = [
    ("SIGTERM", "parent", 143),
    ("SIGHUP", "parent", 129),
    ("SIGINT", "parent", 130),
    ("SIGTERM", "group", 143),
    ("SIGHUP", "group", 129),
]


@pytest.mark.parametrize(("name", "to", "code"), [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in CASES])
def test_a_stop_signal_ends_the_load_writes_the_json_and_exits(tmp_path: Path, name: str, to: str, code: int) -> None:
    signum = getattr(signal, name)
    with fake_server(endless(0.05)) as srv:
        proc, out = _start(srv, tmp_path)
        try:
            if to == "group":
                os.killpg(proc.pid, signum)
            else:
                proc.send_signal(signum)
            _, err = proc.communicate(timeout=60)
            assert _gone(proc.pid), "a process of the bench's group is still alive"
            assert _quiet_after_exit(srv) == 0, "requests kept coming after the bench exited"
        finally:
            kill_group(proc.pid)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "interrupted" in err
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True
    if name != "SIGINT":
        assert doc["interrupted_by"] == name


def test_sigkill_of_the_bench_leaves_no_orphan_load_process(tmp_path: Path) -> None:
    with fake_server(endless(0.05)) as srv:
        proc, _ = _start(srv, tmp_path)
        try:
            proc.kill()
            proc.wait(10)
            assert _gone(proc.pid, timeout=10), "the load process outlived its bench"
            assert _quiet_after_exit(srv) == 0
        finally:
            kill_group(proc.pid)


def test_a_bench_started_under_nohup_outlives_a_hangup(tmp_path: Path) -> None:
    """SIGHUP ignored at start (nohup) stays ignored; SIGTERM still stops the run as usual."""
    with fake_server(endless(0.05)) as srv:
        proc, out = _start(srv, tmp_path, preexec=_nohup)
        try:
            os.killpg(proc.pid, signal.SIGHUP)
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(1.5)
            sent = len(srv.posts)
            os.killpg(proc.pid, signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            kill_group(proc.pid)
    assert proc.returncode == 143, err
    assert sent >= 2
    assert json.loads(out.read_text())["interrupted_by"] == "SIGTERM"


def _background() -> None:
    _default_stop_signals()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_bench_started_in_the_background_still_stops_its_load_on_sigterm(tmp_path: Path) -> None:
    """SIGINT ignored at start (a shell's `&`): the bench still asks its load process to stop."""
    with fake_server(endless(0.05)) as srv:
        proc, out = _start(srv, tmp_path, preexec=_background)
        try:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
            assert _gone(proc.pid), "a process of the bench's group is still alive"
            assert _quiet_after_exit(srv) == 0, "requests kept coming after the bench exited"
        finally:
            kill_group(proc.pid)
    assert proc.returncode == 143, err
    assert json.loads(out.read_text())["interrupted"] is True
