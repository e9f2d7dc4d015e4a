"""The process backend through LifecycleManager, with real processes (the simulator, small scripts)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from console.config import Config, parse_config
from console.lifecycle.audit import AuditLog
from console.lifecycle.errors import LifecycleError
from console.lifecycle.manager import LifecycleManager
from console.lifecycle.process_backend import log_path, read_record
from console.lifecycle.state import InstanceState
from console.model import Phase
from console.ports import free_port


def config(**engines: dict[str, Any]) -> Config:
    data = {
        "engines": {name: {"profile": "vllm", "managed": "process", "model": "m", **e} for name, e in engines.items()}
    }
    return parse_config(data, "test.toml")


def py(code: str) -> list[str]:
    return ["{python}", "-c", textwrap.dedent(code)]


def sim(port: int, *extra: str) -> list[str]:
    return [
        "{python}",
        "-m",
        "console",
        "sim",
        "--engine",
        "vllm",
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--model",
        "{served_name}",
        "--no-access-log",
        *extra,
    ]


@pytest.fixture
def make_manager(_state_dir: Path) -> Iterator[Any]:
    made: list[LifecycleManager] = []

    def make(cfg: Config) -> LifecycleManager:
        m = LifecycleManager(cfg, audit=AuditLog(_state_dir / "audit.log"))
        made.append(m)
        return m

    yield make
    for m in made:  # stop whatever a failed test left running, by our own handles
        for name in m.names:
            if m.status(name).running:
                try:
                    m.stop(name, timeout=2).result(timeout=30)
                except LifecycleError:
                    pass
        m.close()


def gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_simulator_process_start_ready_stop(make_manager: Any, _state_dir: Path) -> None:
    port = free_port()
    m = make_manager(config(s1={"port": port, "command": sim(port, "--load-time", "1")}))
    states: list[InstanceState] = []
    m.subscribe(states.append)
    st = m.start("s1").result(timeout=30)
    assert st.phase is Phase.STARTING and st.pid
    pid = st.pid
    rec = read_record("s1")
    assert rec is not None and rec.pid == pid and rec.owner_pid == os.getpid()
    st = m.wait("s1", timeout=60)
    assert st.phase is Phase.READY, st.one_line()
    assert st.saw(Phase.LOADING)  # vLLM semantics: refused while loading
    assert st.address == f"127.0.0.1:{port}"
    st = m.stop("s1").result(timeout=60)
    assert st.phase is Phase.EXITED and st.detail.startswith("stopped (exit code")
    assert gone(pid)
    assert read_record("s1") is None
    assert any(s.phase is Phase.STOPPING for s in states)
    assert "Starting vLLM API server" in "\n".join(ln.text for ln in m.logs("s1").lines())
    actions = [(e.action, e.result) for e in AuditLog(_state_dir / "audit.log").read()]
    assert actions == [("start", "ok"), ("stop", "ok")]
    assert log_path("s1").read_text().count("Starting vLLM API server") == 1


def test_stubborn_group_gets_countdown_then_sigkill(make_manager: Any) -> None:
    code = """
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
        child = subprocess.Popen([sys.executable, "-c", deaf])
        print("child", child.pid, flush=True)
        while True:
            time.sleep(0.1)
    """
    m = make_manager(config(stub={"port": free_port(), "command": py(code)}))
    countdowns: list[int] = []
    m.subscribe(lambda s: countdowns.append(s.countdown) if s.countdown is not None else None)
    st = m.start("stub").result(timeout=30)
    leader = st.pid
    deadline = time.monotonic() + 10
    while not m.logs("stub").search(r"^child \d+$", regex=True) and time.monotonic() < deadline:
        time.sleep(0.05)
    hit = m.logs("stub").get(m.logs("stub").search(r"^child \d+$", regex=True)[0])
    assert hit is not None
    child = int(hit.text.split()[1])
    t0 = time.monotonic()
    st = m.stop("stub", timeout=2).result(timeout=60)
    took = time.monotonic() - t0
    assert st.phase is Phase.EXITED
    assert st.exit_code == 137  # SIGKILL
    assert took >= 1.9
    assert countdowns[0] == 2 and 0 in countdowns and 1 in countdowns
    assert gone(leader) and gone(child)  # the whole process group


def test_exit_at_once_is_a_failed_start_with_last_lines(make_manager: Any) -> None:
    code = """
        import sys
        print("engine: loading config", flush=True)
        print("ValueError: unknown model architecture", flush=True)
        sys.exit(3)
    """
    m = make_manager(config(bad={"port": free_port(), "command": py(code)}))
    m.start("bad").result(timeout=30)
    st = m.wait("bad", timeout=30)
    assert st.phase is Phase.FAILED
    assert st.exit_code == 3
    assert st.last_log_lines[-1] == "ValueError: unknown model architecture"
    assert "exit code 3: ValueError: unknown model architecture" in st.detail
    assert read_record("bad") is None


def test_port_in_use_is_refused_before_launch(make_manager: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        m = make_manager(config(p={"port": port, "command": sim(port)}))
        with pytest.raises(LifecycleError) as info:
            m.start("p").result(timeout=30)
    assert info.value.message.startswith(f"port 127.0.0.1:{port} is already in use")
    assert m.status("p").phase is Phase.FAILED
    assert read_record("p") is None


def test_silent_load_past_timeout_is_stopped_with_the_reason(make_manager: Any) -> None:
    code = "import time; time.sleep(120)"
    m = make_manager(config(q={"port": free_port(), "command": py(code), "timeouts": {"loading": 1, "stopping": 2}}))
    pid = m.start("q").result(timeout=30).pid
    st = m.wait("q", timeout=30)
    assert st.phase is Phase.FAILED
    assert "loading timed out" in st.detail and "no log output yet" in st.detail
    assert gone(pid)


def test_slow_load_with_moving_log_is_not_killed(make_manager: Any) -> None:
    code = """
        import time
        for i in range(600):
            print(f"loading shard {{i}}", flush=True)
            time.sleep(0.2)
    """
    m = make_manager(config(slow={"port": free_port(), "command": py(code), "timeouts": {"loading": 1}}))
    m.start("slow").result(timeout=30)
    deadline = time.monotonic() + 20
    while not m.status("slow").warning and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    st = m.status("slow")
    assert st.phase is Phase.LOADING, st.one_line()
    assert "log is still moving" in st.warning
    assert st.evidence.startswith("loading shard")
    assert m.stop("slow", timeout=5).result(timeout=30).phase is Phase.EXITED


def test_crash_after_ready_reports_exit_code(make_manager: Any) -> None:
    port = free_port()
    m = make_manager(config(c={"port": port, "command": sim(port, "--fault", "crash-after=4")}))
    m.start("c").result(timeout=30)
    assert m.wait("c", until={Phase.READY}, timeout=60).phase is Phase.READY
    st = m.wait("c", until={Phase.EXITED, Phase.FAILED}, timeout=60)
    assert st.phase is Phase.EXITED
    assert st.exit_code not in (None, 0)
    assert st.detail.startswith("exited unexpectedly with exit code")
    assert st.last_log_lines


ORPHAN_SCRIPT = """
import sys, time
from console.config import parse_config
from console.lifecycle.manager import LifecycleManager
from console.lifecycle.process_backend import install_signal_cleanup
install_signal_cleanup()
engine = ("import subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)")
cfg = parse_config({"engines": {"o": {"profile": "vllm", "managed": "process", "model": "m", "port": %d,
    "command": ["{python}", "-c", engine]}}}, "t.toml")
m = LifecycleManager(cfg)
st = m.start("o").result()
print(st.pid, flush=True)
time.sleep(0.5)
if sys.argv[1] == "exit":
    sys.exit(0)
time.sleep(120)
"""


@pytest.mark.parametrize("how", ["exit", "sigterm"])
def test_no_orphans_when_enginedeck_exits(how: str, tmp_path: Path) -> None:
    script = tmp_path / "owner.py"
    script.write_text(ORPHAN_SCRIPT % free_port())
    owner = subprocess.Popen(
        [sys.executable, str(script), how],
        stdout=subprocess.PIPE,
        cwd=os.getcwd(),
        env={**os.environ, "ENGINEDECK_STATE_DIR": str(tmp_path / "state")},
    )
    try:
        assert owner.stdout is not None
        engine_pid = int(owner.stdout.readline())
        group = {p.pid for p in psutil.process_iter() if _pgid(p.pid) == engine_pid}
        assert engine_pid in group
        deadline = time.monotonic() + 10
        while len(group) < 2 and time.monotonic() < deadline:  # the engine's own child too
            time.sleep(0.05)
            group = {p.pid for p in psutil.process_iter() if _pgid(p.pid) == engine_pid}
        if how == "sigterm":
            owner.send_signal(signal.SIGTERM)
        owner.wait(timeout=30)
        assert all(gone(pid, 10) for pid in group), "engine processes outlived enginedeck"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def test_records_let_another_enginedeck_see_and_stop_it(make_manager: Any, _state_dir: Path) -> None:
    port = free_port()
    cfg = config(shared={"port": port, "command": sim(port)})
    owner = make_manager(cfg)
    pid = owner.start("shared").result(timeout=30).pid
    assert owner.wait("shared", timeout=60).phase is Phase.READY
    other = make_manager(cfg)  # a second console on the same host (same state dir)
    rows = other.ps().result(timeout=30).rows
    row = next(r for r in rows if r.name == "shared")
    assert (row.phase, row.ident) == ("ready", f"pid {pid}")
    st = other.stop("shared", timeout=5).result(timeout=30)
    assert st.phase is Phase.EXITED
    assert gone(pid)
    st = owner.wait("shared", until={Phase.EXITED, Phase.FAILED}, timeout=30)
    assert st.exit_code == 0 or st.exit_code == 143


def test_actions_do_not_block_the_caller(make_manager: Any) -> None:
    port = free_port()
    m = make_manager(config(nb={"port": port, "command": sim(port, "--load-time", "1")}))
    t0 = time.monotonic()
    fut = m.start("nb")
    st = m.status("nb")
    assert time.monotonic() - t0 < 0.1  # returned before the engine even launched
    assert st.phase in (Phase.UNKNOWN, Phase.CREATING, Phase.STARTING)
    fut.result(timeout=30)
    done = threading.Event()
    m.stop("nb").add_done_callback(lambda f: done.set())
    assert done.wait(60)


def test_restart_runs_a_new_process(make_manager: Any) -> None:
    port = free_port()
    m = make_manager(config(r={"port": port, "command": sim(port)}))
    first = m.start("r").result(timeout=30).pid
    assert m.wait("r", timeout=60).phase is Phase.READY
    st = m.restart("r").result(timeout=60)
    assert st.pid != first and gone(first or 0)
    assert m.wait("r", timeout=60).phase is Phase.READY
    entries = [
        json.loads(x)["action"]
        for x in (Path(os.environ["ENGINEDECK_STATE_DIR"]) / "audit.log").read_text().splitlines()
    ]
    assert entries == ["start", "restart-stop", "restart"]


def test_an_engine_that_logs_its_key_does_not_show_it(make_manager: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # SGLang takes the key as an argument and logs its server args at start-up.
    monkeypatch.setenv("TEST_SGL_KEY", "sk-very-secret-42")
    code = "import sys, time; print('server_args:', sys.argv[1:], flush=True); time.sleep(60)"
    engine = {
        "profile": "sglang",
        "port": free_port(),
        "command": ["{python}", "-c", code],
        "api_key_env": "TEST_SGL_KEY",
    }
    m = make_manager(config(k=engine))
    spec = m.launch_spec("k")
    assert spec.argv[-2:] == ("--api-key", "sk-very-secret-42")
    m.start("k").result(timeout=30)
    deadline = time.monotonic() + 10
    while not m.logs("k").search("^server_args", regex=True) and time.monotonic() < deadline:
        time.sleep(0.05)
    m.stop("k", timeout=5).result(timeout=30)
    text = "\n".join(ln.text for ln in m.logs("k").lines())
    assert "server_args: ['--api-key', '****']" in text
    assert "sk-very-secret-42" not in text
    assert "sk-very-secret-42" not in log_path("k").read_text()
    assert "server_args" in log_path("k").read_text()


def test_the_demo_counts_only_engines_still_running(make_manager: Any) -> None:
    # The demo's quit line ("stopping N engines") leaves out one you already stopped.
    from console.commands.demo import engines_running

    p1, p2 = free_port(), free_port()
    m = make_manager(config(s1={"port": p1, "command": sim(p1)}, s2={"port": p2, "command": sim(p2)}))
    for name in ("s1", "s2"):
        m.start(name).result(timeout=30)
    for name in ("s1", "s2"):
        assert m.wait(name, timeout=60).phase is Phase.READY
    assert engines_running(m) == 2
    assert m.stop("s1").result(timeout=60).phase is Phase.EXITED
    assert engines_running(m) == 1
