"""Planted secrets: set every way the console knows (API key variable, passed-through variables,
launch arguments, tokens an engine prints on its own), they never reach the screen of a headless
command, `logs`, `up` progress, `ps`, `config show`, `status --json`, the audit log, bench
exports or any file on disk; state files are 0600 in 0700 directories."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

from console.ports import free_port
from tests import procgroup

ENGINEDECK = [sys.executable, "-m", "console"]

KEY = "planted-api-key-7f3a9c"  # api_key_env
HF = "hf_" + "Pl4nt3dHfT0k3nAbCdEfGhIjKlMnOpQrSt"  # HF_TOKEN, passed through
WANDB = "planted-wandb-key-51e0"  # WANDB_API_KEY, passed through
ARG = "planted-arg-token-92b4"  # a secret-looking launch argument (extra_args)
UNKNOWN = "sk-" + "pl4nt3dUnkn0wnK3yPr1nt3dByTh3Eng1ne"  # a key the engine prints; the console never saw it
STRAY = "planted-stray-secret-0d6e"  # in the console's environment, not named by the configuration
PLANTED = (KEY, HF, WANDB, ARG, UNKNOWN, STRAY)

# A stand-in engine that prints its secrets the ways real engines do (its arguments, its environment,
# an Authorization header, a key split across two writes), then serves as the vLLM simulator in-process
# so that its command line never holds the key.
ENGINE = textwrap.dedent(
    f"""
    import os, sys, time
    args = sys.argv[1:]
    key = os.environ.get("VLLM_API_KEY", "")
    print("non-default args:", args, flush=True)
    print("env VLLM_API_KEY=" + key, "HF_TOKEN=" + str(os.environ.get("HF_TOKEN")), flush=True)
    print("wandb login", os.environ.get("WANDB_API_KEY"), "stray", os.environ.get("STRAY_SECRET_TOKEN"), flush=True)
    print("client headers: Authorization: Bearer " + key, flush=True)
    print("found a key on disk: {UNKNOWN}", flush=True)
    sys.stdout.write("split " + key[:6]); sys.stdout.flush(); time.sleep(0.3)
    sys.stdout.write(key[6:] + " done\\n"); sys.stdout.flush()
    from console.cli import main
    sys.exit(main(["sim", "--engine", "vllm", "--host", args[args.index("--host") + 1], "--port",
                   args[args.index("--port") + 1], "--model", "demo-model", "--api-key", key, "--speed", "20"]))
    """
)


def _config(path: Path, port: int) -> Path:
    command = ["{python}", "-c", ENGINE, "--host", "{host}", "--port", "{port}", "{extra}"]
    path.write_text(
        "[engines.planted]\n"
        'profile = "vllm"\nmanaged = "process"\nmodel = "demo-model"\n'
        f"port = {port}\n"
        'api_key_env = "PLANTED_KEY"\n'
        'env_passthrough = ["HF_TOKEN", "WANDB_API_KEY"]\n'
        f'extra_args = ["--hf-token", "{ARG}"]\n'
        f"command = {json.dumps(command)}\n"
    )
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "PLANTED_KEY": KEY, "HF_TOKEN": HF, "WANDB_API_KEY": WANDB, "STRAY_SECRET_TOKEN": STRAY}


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return procgroup.run([*ENGINEDECK, *args], capture_output=True, text=True, timeout=timeout, env=_env())


def _assert_clean(where: str, text: str) -> None:
    leaked = [s for s in PLANTED if s in text]
    assert not leaked, f"{where} shows {leaked}:\n{text[-3000:]}"


def test_planted_secrets_never_leave(tmp_path: Path) -> None:
    state = Path(os.environ["ENGINEDECK_STATE_DIR"])
    conf = _config(tmp_path / "config.toml", free_port())
    up = subprocess.Popen([*ENGINEDECK, "up", "planted", "--config", str(conf)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=_env())  # fmt: skip
    outputs: dict[str, str] = {}
    try:
        assert up.stdout is not None
        deadline = time.monotonic() + 90
        ready = ""
        while time.monotonic() < deadline and "ready at" not in ready:
            ready = up.stdout.readline()
            if not ready and up.poll() is not None:
                break
        assert "ready at" in ready, up.stderr.read() if up.stderr else ""
        outputs["up (stdout)"] = ready

        logs = _run("logs", "planted", "--config", str(conf))
        assert logs.returncode == 0, logs.stderr
        assert "Authorization: Bearer ****" in logs.stdout and "split **** done" in logs.stdout
        outputs["logs"] = logs.stdout + logs.stderr
        for args in (("ps",), ("ps", "--json"), ("config", "show"), ("config", "show", "--json")):
            r = _run(*args, "--config", str(conf))
            assert r.returncode == 0, r.stderr
            outputs[" ".join(args)] = r.stdout + r.stderr
        status = _run("status", "--json", "--config", str(conf), "--sample", "1", "--gpus", "none")
        assert status.returncode == 0, status.stdout + status.stderr
        outputs["status --json"] = status.stdout + status.stderr
        exports = [tmp_path / "bench.json", tmp_path / "bench.csv", tmp_path / "bench.md"]
        bench = _run("bench", "--engine", "planted", "--config", str(conf), "--concurrency", "1", "--num-prompts",
                     "3", "--input-len", "16", "--output-len", "4", "--no-gpu", "--json", str(exports[0]), "--csv",
                     str(exports[1]), "--markdown", str(exports[2]))  # fmt: skip
        assert bench.returncode == 0, bench.stdout + bench.stderr
        outputs["bench"] = bench.stdout + bench.stderr
        for p in exports:
            outputs[p.name] = p.read_text()

        # The engine's own command line holds no key (vLLM's key goes by environment).
        pid = next(r["id"] for r in json.loads(outputs["ps --json"])["engines"] if r["name"] == "planted")
        cmdline = " ".join(psutil.Process(int(pid.removeprefix("pid "))).cmdline())
        assert KEY not in cmdline and STRAY not in cmdline
    finally:
        up.send_signal(signal.SIGINT)
        out, err = up.communicate(timeout=60)
    outputs["up (rest of stdout, stderr)"] = out + err
    for where, text in outputs.items():
        _assert_clean(where, text)

    audit = (state / "audit.log").read_text()
    assert "planted" in audit
    files = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.name == "planted.log" for p in files)
    for p in files:
        _assert_clean(str(p.relative_to(state)), p.read_text(errors="replace"))
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    for d in [state, *(p for p in state.rglob("*") if p.is_dir())]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_state_files_are_private_even_when_made_before(tmp_path: Path) -> None:
    from console.config import parse_config
    from console.lifecycle.manager import LifecycleManager
    from console.lifecycle.process_backend import log_path

    state = Path(os.environ["ENGINEDECK_STATE_DIR"])
    (state / "logs").mkdir(parents=True, mode=0o755)
    state.chmod(0o755)
    old = log_path("p")
    old.write_text("an older copy\n")
    old.chmod(0o644)
    code = "import time; print('up', flush=True); time.sleep(30)"
    cfg = parse_config({"engines": {"p": {"profile": "vllm", "managed": "process", "model": "m", "port": free_port(),
                                          "command": ["{python}", "-c", code]}}}, "t.toml")  # fmt: skip
    m = LifecycleManager(cfg)
    try:
        m.start("p").result(timeout=30)
        deadline = time.monotonic() + 10
        while not m.logs("p").search("up") and time.monotonic() < deadline:
            time.sleep(0.05)
        m.stop("p", timeout=5).result(timeout=30)
    finally:
        m.close()
    modes = {str(p.relative_to(state)): stat.S_IMODE(p.stat().st_mode) for p in [state, *state.rglob("*")]}
    assert modes["."] == 0o700 and modes["logs"] == 0o700 and modes["logs/p.log"] == 0o600
    assert modes["audit.log"] == 0o600
