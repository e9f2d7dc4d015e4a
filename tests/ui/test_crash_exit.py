"""An unexpected error ends the console with a non-zero status and one line naming the crash log.

Textual ends an app on an unhandled error, prints a traceback with locals after restoring the
screen and returns from ``run`` as if all went well: the console used to exit 0 after a crash. The
failure is planted (a function of the health column raises) in a real console on a pty.
"""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from pathlib import Path

from console.crashlog import CRASH_EXIT
from console.ports import free_port
from tests import procgroup

REPO = Path(__file__).resolve().parents[2]
PLANT = """
import importlib
import sys
def planted(*args, **kwargs):
    raise RuntimeError("planted failure, token hf_abcdefghijklmnopqrstuvwxyz0123")
setattr(importlib.import_module("{module}"), "{target}", planted)
from console.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run_on_pty(args: list[str], state: Path, module: str, target: str) -> tuple[int, str]:
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.chdir(REPO)
            env = {**os.environ, "ENGINEDECK_STATE_DIR": str(state), "ENGINEDECK_CONFIG_DIR": str(state),
                   "TERM": "xterm-256color"}
            os.execve(sys.executable, [sys.executable, "-c", PLANT.format(module=module, target=target), *args], env)
        finally:
            os._exit(127)
    seen = b""
    status = None
    deadline = time.monotonic() + 60
    while status is None and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:  # the child closed the pty
                pass
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
    if status is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError(f"the console did not end: {seen[-2000:]!r}")
    os.close(master)
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


def test_a_console_crash_exits_non_zero_with_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: the row shows, its health cell is drawn
    code, screen = _run_on_pty(["attach", f"vllm@{url}", "--gpus", "none"], tmp_path, "console.ui.format", "health")
    assert code == CRASH_EXIT, screen[-2000:]
    log = tmp_path / "crash.log"
    assert "enginedeck: internal error: RuntimeError: planted failure" in screen, screen[-2000:]
    assert f"traceback in {log}" in screen.replace("\r\n", "").replace("\n", ""), screen[-2000:]
    assert "Traceback" not in screen and "locals" not in screen  # the traceback is in the log, not on screen
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "def planted" not in text and "in planted" in text
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in text + screen  # secrets masked


def test_a_headless_command_error_is_one_line_too(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    r = procgroup.run([sys.executable, "-c", PLANT.format(module="console.commands.status", target="render_text"),
                       "status", "--engine", f"vllm@{url}", "--sample", "0.1", "--gpus", "none"],
                      capture_output=True, text=True, timeout=60, cwd=REPO,
                      env={**os.environ, "ENGINEDECK_STATE_DIR": str(tmp_path)})
    assert r.returncode == CRASH_EXIT, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("enginedeck: internal error: RuntimeError"), r.stderr
    assert "Traceback (most recent call last)" in (tmp_path / "crash.log").read_text()
