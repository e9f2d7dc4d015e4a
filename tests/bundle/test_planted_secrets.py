"""Planted secrets never reach an incident bundle: an engine given an API key, passed-through
tokens and a secret launch argument, which prints them (and tokens the console never saw, an
``Authorization: Bearer`` header, a ``*_TOKEN=`` assignment) and serves a model whose name is
secret-shaped (so its metrics labels and ``/v1/models`` carry it), is bundled by `enginedeck bundle`;
no extracted file, and nothing decompressed from one, holds any of them; the archive is 0600."""

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

from console.ports import free_port
from console.recording import Recording
from tests import procgroup
from tests.bundle.conftest import decoded, extract

ENGINEDECK = [sys.executable, "-m", "console"]

KEY = "planted-api-key-3c1d8e"  # api_key_env
HF = "hf_" + "Bund1ePl4nt3dT0k3nAbCdEfGhIjKlMnOp"  # HF_TOKEN, passed through
WANDB = "planted-wandb-key-77a0"  # WANDB_API_KEY, passed through
ARG = "planted-arg-token-4e2f"  # a secret-looking launch argument (extra_args)
UNKNOWN = "sk-" + "bund1eUnkn0wnK3yPr1nt3dByTh3Eng1ne"  # printed by the engine; never given to the console
LABEL = "sk-" + "m0d3lN4m3L4b3lS3cr3tV4lu3"  # the served model's name: in metric labels and /v1/models
ENVTOKEN = "plain-env-token-9b7c"  # printed by the engine as GITLAB_TOKEN=...; no secret shape of its own
PLANTED = (KEY, HF, WANDB, ARG, UNKNOWN, LABEL, ENVTOKEN)

ENGINE = textwrap.dedent(
    f"""
    import os, sys
    args = sys.argv[1:]
    key = os.environ.get("VLLM_API_KEY", "")
    print("non-default args:", args, flush=True)
    print("env VLLM_API_KEY=" + key, "HF_TOKEN=" + str(os.environ.get("HF_TOKEN")), flush=True)
    print("wandb login", os.environ.get("WANDB_API_KEY"), flush=True)
    print("client headers: Authorization: Bearer " + key, flush=True)
    print("found a key on disk: {UNKNOWN}", flush=True)
    print("shell env: GITLAB_TOKEN={ENVTOKEN}", flush=True)
    from console.cli import main
    sys.exit(main(["sim", "--engine", "vllm", "--host", args[args.index("--host") + 1], "--port",
                   args[args.index("--port") + 1], "--model", "org/{LABEL}", "--api-key", key, "--speed", "20"]))
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
    return {**os.environ, "PLANTED_KEY": KEY, "HF_TOKEN": HF, "WANDB_API_KEY": WANDB}


def test_no_planted_secret_in_any_file_of_a_bundle(tmp_path: Path) -> None:
    conf = _config(tmp_path / "config.toml", free_port())
    up = subprocess.Popen([*ENGINEDECK, "up", "planted", "--config", str(conf)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=_env())  # fmt: skip
    try:
        assert up.stdout is not None
        deadline = time.monotonic() + 90
        ready = ""
        while time.monotonic() < deadline and "ready at" not in ready:
            ready = up.stdout.readline()
            if not ready and up.poll() is not None:
                break
        assert "ready at" in ready, up.stderr.read() if up.stderr else ""
        archive = tmp_path / "out" / "incident.tar.gz"
        r = procgroup.run([*ENGINEDECK, "bundle", "--config", str(conf), "-o", str(archive), "--gpus", "none"],
                          capture_output=True, text=True, timeout=120, env=_env())  # fmt: skip
    finally:
        up.send_signal(signal.SIGINT)
        up.communicate(timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == str(archive)
    for secret in PLANTED:
        assert secret not in r.stdout + r.stderr
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600

    root = extract(archive, tmp_path / "x")
    files = [p for p in root.rglob("*") if p.is_file()]
    engine = root / "engines" / "planted"
    # The parts that carried the secrets are there, masked.
    log = (engine / "log.txt").read_text()
    assert "Authorization: Bearer ****" in log and "GITLAB_TOKEN=****" in log
    assert "org/****" in (engine / "metrics.txt").read_text()
    assert "org/****" in (engine / "models.json").read_text()
    launch = json.loads((engine / "launch.json").read_text())
    assert "--hf-token" in launch["argv"] and launch["env"]["HF_TOKEN"] == "****"
    assert (engine / "process.json").exists()
    for p in files:
        for part in decoded(p.read_bytes()):
            text = part.decode("utf-8", "replace")
            leaked = [s for s in PLANTED if s in text]
            assert not leaked, f"{p.relative_to(root)} holds {leaked}"
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p

    # The recording's frames are compressed against a dictionary: read them back as a replay would.
    replay = Recording.open(root / "recording" / "window.edrec")
    docs = list(replay.documents())
    assert docs and any(e["name"] == "planted" for e in docs[-1][1]["engines"])
    text = json.dumps(docs) + "".join(engine + body.decode("utf-8", "replace")
                                      for _, engine, body in replay.raw_payloads())  # fmt: skip
    assert not [s for s in PLANTED if s in text]

    # The report counts what the bundle masked (the log copy on disk was masked when written).
    report = json.loads((root / "manifest.json").read_text())["redaction"]
    print(json.dumps(report, indent=1))
    by_file = report["by_file"]
    assert by_file["engines/planted/metrics.txt"]["openai-style key"] >= 1  # the model label
    assert by_file["engines/planted/models.json"]["openai-style key"] >= 1
    launch_counts = by_file["engines/planted/launch.json"]
    assert launch_counts["secret-named variable"] >= 2 and launch_counts["secret-named argument"] >= 1
    assert report["masked"] == sum(report["by_kind"].values()) == sum(sum(c.values()) for c in by_file.values())
    assert all(s not in json.dumps(report) for s in PLANTED)
