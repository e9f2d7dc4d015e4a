"""Tests do not depend on the machine's state (issue 37, group 10).

Every test gets its own enginedeck folders (tests/isolation.py, set by the fixture in tests/conftest.py),
so a running `enginedeck demo` of the same user is invisible to it; test subprocesses run in their own
process group, killed whole on timeout (tests/procgroup.py); a test that leaves a process running fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests import isolation, procgroup
from tests.isolation import MachineState

REPO = Path(__file__).resolve().parents[2]
ENGINEDECK = [sys.executable, "-m", "console"]


def _gone(pid: int, within: float = 10.0) -> bool:
    """``pid`` has exited (a zombie counts: it runs nothing) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _read_pid(path: Path, within: float = 10.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.strip():
            return int(text)
        time.sleep(0.05)
    raise AssertionError(f"no pid in {path}")


def _user_env(home: Path) -> dict[str, str]:
    """The environment of a user whose home is ``home``: no folder variable, the platform defaults."""
    env = {k: v for k, v in os.environ.items()
           if k not in isolation.FOLDER_VARIABLES and k not in isolation.CLEARED_VARIABLES}  # fmt: skip
    env["HOME"] = str(home)
    return env


# -- the folders ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("function", "folder"), [("state_dir", "state"), ("config_dir", "config"),
                                                  ("cache_dir", "cache"), ("recordings_dir", "recordings")])
def test_each_enginedeck_folder_is_the_tests_own(machine_state: MachineState, function: str, folder: str) -> None:
    from console import paths

    got = getattr(paths, function)()
    assert got == getattr(machine_state, folder)
    assert got.is_relative_to(machine_state.root) and not got.is_relative_to(Path.home())


_SEEN_ROOTS: set[Path] = set()


@pytest.mark.parametrize("n", range(3))
def test_every_test_gets_fresh_folders(machine_state: MachineState, n: int) -> None:
    """Three tests in a row: three different roots, each empty when its test starts."""
    assert machine_state.root not in _SEEN_ROOTS
    _SEEN_ROOTS.add(machine_state.root)
    assert list(machine_state.root.iterdir()) == []
    machine_state.state.mkdir(parents=True)
    (machine_state.state / "left-by-this-test").write_text(str(n))


def test_the_folders_differ_from_the_users_defaults(machine_state: MachineState) -> None:
    """What console.paths says with the user's environment (the platform folders) is not what a test gets."""
    probe = "from console import paths; print(paths.state_dir()); print(paths.config_dir()); print(paths.cache_dir())"
    defaults = procgroup.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                             env=_user_env(Path.home()), cwd=REPO, check=True).stdout.split()  # fmt: skip
    assert defaults[0] == str(Path.home() / ".local" / "state" / "enginedeck")
    ours = [str(machine_state.state), str(machine_state.config), str(machine_state.cache)]
    assert not set(defaults) & set(ours)
    assert all(not Path(d).is_relative_to(machine_state.root) for d in defaults)


def test_a_subprocess_inherits_the_tests_folders(machine_state: MachineState) -> None:
    probe = "from console import paths; print(paths.state_dir()); print(paths.recordings_dir())"
    out = procgroup.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO,
                        check=True).stdout.split()  # fmt: skip
    assert out == [str(machine_state.state), str(machine_state.recordings)]


def test_the_users_recording_folder_variable_does_not_reach_a_test() -> None:
    assert "ENGINEDECK_RECORDING_DIR" not in os.environ
    assert all(os.environ.get(name) for name in isolation.FOLDER_VARIABLES)


def test_the_provisioning_cache_stays_the_users(machine_state: MachineState) -> None:
    """The built llama-server wheel, the tiny model and the Hugging Face cache are found where
    provisioning put them (XDG_CACHE_HOME, else ~/.cache), not in the test's folders."""
    from tests.integration import helpers

    assert not helpers.cache_dir().is_relative_to(machine_state.root)
    assert not Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").is_relative_to(machine_state.root)


# -- a running demo of the same user ----------------------------------------------------------------------

# The engines of a user's `enginedeck demo`: managed process simulators whose process records are in the
# user's default state folder (HOME given by the test), running until stdin closes.
_DEMO = """
import sys
from console.commands.demo import demo_config
from console.lifecycle.manager import LifecycleManager
from console.ports import free_port
manager = LifecycleManager(demo_config({f: free_port() for f in ("vllm", "sglang", "tgi", "trtllm", "llamacpp")}))
manager.start("vllm-sim").result(timeout=60)
print(manager.wait("vllm-sim", timeout=60).phase.name, flush=True)
sys.stdin.read()
manager.stop("vllm-sim").result(timeout=30)
manager.close()
"""


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The home folder of a user running a demo engine (``vllm-sim``)."""
    home = tmp_path_factory.mktemp("home")
    proc = procgroup.popen([sys.executable, "-c", _DEMO], cwd=REPO, env=_user_env(home), text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "READY"
        assert list((home / ".local" / "state" / "enginedeck" / "processes").glob("vllm-sim.json"))
        yield home
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        finally:
            procgroup.kill_group(proc)


def _enginedeck(home: Path, *args: str, isolated: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)} if isolated else _user_env(home)
    return procgroup.run([*ENGINEDECK, *args], capture_output=True, text=True, timeout=60, env=env, cwd=REPO)


def test_the_running_demo_is_seen_by_its_user(demo_home: Path) -> None:
    """The control: without the test's folders, `ps` lists the demo's engine (so the next two tests
    would see it too if the fixture did not hide it)."""
    ps = _enginedeck(demo_home, "ps", "--json", isolated=False)
    assert "vllm-sim" in [e["name"] for e in json.loads(ps.stdout)["engines"]], ps.stdout


def test_a_test_does_not_see_the_running_demo(demo_home: Path) -> None:
    ps = _enginedeck(demo_home, "ps", "--json")
    assert ps.returncode == 0, ps.stderr
    assert "vllm-sim" not in [e["name"] for e in json.loads(ps.stdout)["engines"]]


def test_record_without_an_engine_fails_at_once_beside_a_running_demo(demo_home: Path, tmp_path: Path) -> None:
    """The failure this fixture fixes: `record` with no engine picked up the demo's and recorded it."""
    started = time.monotonic()
    r = _enginedeck(demo_home, "record", "--dir", str(tmp_path / "r"))
    assert r.returncode == 1 and "no engine to record" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert time.monotonic() - started < 30
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


# -- process groups ---------------------------------------------------------------------------------------

# A shell that starts a grandchild which ignores SIGTERM (an ignored signal stays ignored across exec),
# writes its pid, says so, and waits.
def _parent(pidfile: Path) -> list[str]:
    return ["sh", "-c", f'trap "" TERM; sleep 300 & echo $! > {pidfile}; echo started; wait']


def test_a_timeout_kills_the_grandchildren_too(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        procgroup.run(_parent(pidfile), capture_output=True, text=True, timeout=2)
    assert "started" in (timed_out.value.stdout or "")  # what it wrote before the timeout comes back
    assert _gone(_read_pid(pidfile))


def test_subprocess_run_alone_leaves_the_grandchild_running(tmp_path: Path) -> None:
    """The control: what ``procgroup.run`` fixes (the grandchild is killed here by hand)."""
    pidfile = tmp_path / "grandchild.pid"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(_parent(pidfile), stdout=subprocess.DEVNULL, timeout=2, start_new_session=True)
    grandchild = _read_pid(pidfile)
    try:
        assert not _gone(grandchild, within=0.5)
    finally:
        os.killpg(os.getpgid(grandchild), signal.SIGKILL)
    assert _gone(grandchild)


def test_an_exception_while_waiting_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            procgroup.run(_parent(pidfile), stdout=subprocess.DEVNULL, timeout=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert _gone(_read_pid(pidfile))


def test_run_returns_what_the_command_wrote_and_checks_the_exit() -> None:
    done = procgroup.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(3)"],
                         input="abc", capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout) == (3, "ABC\n")
    with pytest.raises(subprocess.CalledProcessError):
        procgroup.run([sys.executable, "-c", "raise SystemExit(2)"], timeout=60, check=True)


def test_a_test_end_kills_the_groups_it_started(tmp_path: Path) -> None:
    """What the fixture does after every test: a Popen's whole group, grandchild included."""
    pidfile = tmp_path / "grandchild.pid"
    parent = procgroup.popen(_parent(pidfile), stdout=subprocess.DEVNULL)
    grandchild = _read_pid(pidfile)
    assert procgroup.kill_started() == [parent.pid]
    assert parent.returncode == -signal.SIGKILL and _gone(grandchild)


def test_popen_always_starts_a_new_group() -> None:
    with pytest.raises(ValueError, match="new session"):
        procgroup.popen(["true"], start_new_session=False)
    proc = procgroup.popen([sys.executable, "-c", "import os; print(os.getpgid(0) == os.getpid())"],
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.communicate(timeout=60)[0].strip() == "True"


# -- what a test leaves behind ----------------------------------------------------------------------------


def test_an_escaped_process_is_found_and_killed(machine_state: MachineState) -> None:
    """A process out of every group the test knows (its own session) is found by its environment."""
    before = isolation.pids()
    escaped = subprocess.Popen(["sleep", "300"], start_new_session=True)
    scratch = subprocess.Popen(["sleep", "300"], start_new_session=True, env={"PATH": os.environ["PATH"]})
    try:
        left = isolation.leftovers(machine_state.root, before, grace=0.3)
        assert list(left) == [escaped.pid] and left[escaped.pid] == "sleep 300"
        assert escaped.wait(timeout=10) == -signal.SIGKILL
        assert scratch.poll() is None  # not the test's: an environment made from scratch
    finally:
        for proc in (escaped, scratch):
            proc.kill()
            proc.wait(timeout=10)


def test_a_process_that_ends_within_the_grace_is_not_a_leftover(machine_state: MachineState) -> None:
    before = isolation.pids()
    ending = subprocess.Popen(["sleep", "0.5"], start_new_session=True)
    assert isolation.leftovers(machine_state.root, before, grace=5) == {}
    assert ending.wait(timeout=10) == 0


_LEAKY_TESTS = """
import os, subprocess

def test_leaves_a_sleeper():
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    open(os.environ["LEAK_PIDFILE"], "w").write(str(proc.pid))

def test_stops_what_it_starts():
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    proc.kill()
    proc.wait()
"""


def test_a_test_that_leaves_a_process_fails_and_the_process_is_killed(tmp_path: Path) -> None:
    """The whole fixture, in a pytest of its own: the leaking test fails naming what it left, the
    clean one passes, and nothing survives."""
    (tmp_path / "leaky").mkdir()
    (tmp_path / "leaky" / "test_leaky.py").write_text(_LEAKY_TESTS)
    pidfile = tmp_path / "leak.pid"
    r = procgroup.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q",
                       "--basetemp", str(tmp_path / "basetemp"), "--rootdir", str(tmp_path / "leaky"),
                       str(tmp_path / "leaky" / "test_leaky.py")],
                      capture_output=True, text=True, timeout=120, cwd=REPO,
                      env={**os.environ, "LEAK_PIDFILE": str(pidfile)})  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "2 passed, 1 error" in out and "left 1 process(es) running (killed now)" in out, out
    leaked = _read_pid(pidfile)
    assert f"{leaked}: sleep 300" in out
    assert _gone(leaked)
