"""Read-only mode binds the headless lifecycle commands too; `restart` confirms like `down`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from console.lifecycle.process_backend import read_record
from console.ports import free_port
from tests import procgroup
from tests.lifecycle.test_commands import wait_line, write_config

ENGINEDECK = [sys.executable, "-m", "console"]
# An engine that ends at once: were it started, the command would fail with exit 2, not 1.
QUICK_EXIT = '["{python}", "-c", "import sys; sys.exit(3)"]'


def _config(path: Path, *, read_only: bool) -> Path:
    head = "[console]\nread_only = true\n\n" if read_only else ""
    path.write_text(head + '[engines.e]\nprofile = "vllm"\nmanaged = "process"\nmodel = "m"\n'
                    f"port = {free_port()}\ncommand = {QUICK_EXIT}\n")  # fmt: skip
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return procgroup.run([*ENGINEDECK, *args], capture_output=True, text=True, timeout=60, env=os.environ.copy(),
                         stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.parametrize("how", ["config", "flag"])
@pytest.mark.parametrize("command", [["up"], ["down", "--yes"], ["restart", "--yes"], ["pull"], ["adopt", "--yes"]])
def test_read_only_refuses_every_mutating_command(tmp_path: Path, command: list[str], how: str) -> None:
    conf = _config(tmp_path / "c.toml", read_only=how == "config")
    flag = ["--read-only"] if how == "flag" else []
    r = _run(command[0], "e", "--config", str(conf), *command[1:], *flag)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.strip().count("\n") == 0 and "read-only" in r.stderr, r.stderr
    assert read_record("e") is None  # nothing was started
    audit = Path(os.environ["ENGINEDECK_STATE_DIR"]) / "audit.log"
    entries = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(x["action"], x["target"], x["result"]) for x in entries] == [(command[0], "e", "refused")]


def test_restart_asks_like_down(tmp_path: Path) -> None:
    conf = _config(tmp_path / "c.toml", read_only=False)
    r = _run("restart", "e", "--config", str(conf))
    assert r.returncode == 1 and "add --yes" in r.stderr, r.stdout + r.stderr
    assert not (Path(os.environ["ENGINEDECK_STATE_DIR"]) / "audit.log").exists()  # nothing was attempted
    # With --yes it restarts (a process engine then stays in the foreground until Ctrl-C).
    conf = write_config(tmp_path / "sim.toml", free_port(), name="e")
    proc = subprocess.Popen([*ENGINEDECK, "restart", "e", "--config", str(conf), "--yes"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_line(proc, "ready at")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def test_bench_swap_is_refused_in_read_only_mode(tmp_path: Path) -> None:
    """`bench --swap` stops and starts engines: read-only mode refuses it before anything is done."""
    conf = tmp_path / "c.toml"
    conf.write_text("[console]\nread_only = true\n\n" + "".join(
        f'[engines.{n}]\nprofile = "vllm"\nmanaged = "process"\nmodel = "m"\nport = {free_port()}\n'
        f"command = {QUICK_EXIT}\n\n" for n in ("ro1", "ro2")))
    r = _run("bench", "--config", str(conf), "--engine", "ro1", "--engine", "ro2", "--swap", "--num-prompts", "1",
             "--gpus", "none")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.strip().count("\n") == 0 and "read-only" in r.stderr, r.stderr
    assert read_record("ro1") is None and read_record("ro2") is None  # nothing was started
    audit = Path(os.environ["ENGINEDECK_STATE_DIR"]) / "audit.log"
    entries = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(x["action"], x["result"]) for x in entries] == [("swap", "refused")], entries


def test_the_manager_is_the_read_only_gate(tmp_path: Path) -> None:
    """Whatever asks (the console, a swap, the terminal-loss policy), a read-only manager starts,
    stops and restarts nothing, and audits each refusal."""
    from console.config import load_config
    from console.lifecycle.errors import ActionRefused
    from console.lifecycle.manager import LifecycleManager
    from console.lifecycle.terminal_loss import carry_out

    manager = LifecycleManager(load_config(str(_config(tmp_path / "c.toml", read_only=True))))
    try:
        for action in (manager.start, manager.stop, manager.restart):
            with pytest.raises(ActionRefused, match="read-only"):
                action("e").result(timeout=30)
        assert read_record("e") is None
        import time

        carry_out(manager, "stop", "test", time.monotonic() + 5)  # the terminal-loss policy asks too
    finally:
        manager.close()
    audit = Path(os.environ["ENGINEDECK_STATE_DIR"]) / "audit.log"
    results = [(x["action"], x["result"]) for x in map(json.loads, audit.read_text().splitlines())]
    assert results[:3] == [("start", "refused"), ("stop", "refused"), ("restart", "refused")], results
    assert all(r == "refused" for a, r in results if a in ("start", "stop", "restart")), results


def test_a_secret_written_out_in_extra_args_is_warned_about(tmp_path: Path) -> None:
    """It would end up on a command line every user of the host can read: say so, point to
    api_key_env, and never print the secret."""
    secret = "sk-abcdefghijklmnop1234567890"
    conf = tmp_path / "c.toml"
    conf.write_text('[engines.e]\nprofile = "vllm"\nmanaged = "process"\nmodel = "m"\n'
                    f'port = {free_port()}\nextra_args = ["--api-key", "{secret}"]\n')
    r = _run("config", "show", "--config", str(conf))
    assert r.returncode == 0, r.stderr
    assert "secret written out" in r.stderr and "api_key_env" in r.stderr, r.stderr
    assert secret not in r.stdout + r.stderr
    plain = tmp_path / "plain.toml"
    plain.write_text('[engines.e]\nprofile = "vllm"\nmanaged = "process"\nmodel = "m"\n'
                     f'port = {free_port()}\nextra_args = ["--max-model-len", "4096"]\n')
    assert "secret" not in _run("config", "show", "--config", str(plain)).stderr
