"""`enginedeck record` against a real simulator: what it writes, SIGTERM, and kill -9."""

from __future__ import annotations

import itertools
import os
import random
import signal
import time
from pathlib import Path

from console.recording import Recording
from tests.recording.simproc import enginedeck, simulator


def _wait_for_frames(directory: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if directory.is_dir() and any(directory.glob("*.edrec")):
            rec = Recording.open(directory)
            if len(rec.doc_frames) >= n:
                return
        time.sleep(0.5)
    raise AssertionError(f"no {n} frames in {directory} after {timeout} s")


def test_record_writes_documents_and_raw_payloads_and_stops_on_sigterm(tmp_path: Path) -> None:
    rec_dir = tmp_path / "rec"
    with simulator("vllm") as url:
        p = enginedeck("record", "--engine", f"vllm@{url}", "--dir", str(rec_dir), "--gpus", "simulated",
                       "--refresh", "0.5", "--raw-every", "3s")
        try:
            _wait_for_frames(rec_dir, 1)
            time.sleep(3)
            p.send_signal(signal.SIGTERM)
            _out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    assert p.returncode == 0, err
    assert "recording vllm@" in err and "recorded" in err
    rec = Recording.open(rec_dir)
    got = list(rec.documents())
    assert len(got) >= 10
    t, doc = got[-1]
    assert doc["schema"] == "enginedeck.status/2" and doc["taken_at"] == t
    assert doc["engines"][0]["reachable"] and len(doc["gpus"]["devices"]) == 8
    # The alert rules the console evaluates, every one on the engine (ok and n/a included).
    assert doc["alerts"] and {a["engine"] for a in doc["alerts"]} == {f"vllm@{url}"}
    assert {"ok", "n/a"} & {a["state"] for a in doc["alerts"]}
    raws = list(rec.raw_payloads())
    assert raws and all(e == f"vllm@{url}" for _, e, _ in raws)
    assert b"vllm:num_requests_running" in raws[0][2]
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(raws)]
    assert all(g >= 3 for g in gaps)


def test_kill_9_loses_under_ten_seconds_and_the_torn_recording_replays(tmp_path: Path) -> None:
    rec_dir = tmp_path / "rec"
    with simulator("sglang") as url:
        p = enginedeck("record", "--engine", f"sglang@{url}", "--dir", str(rec_dir), "--gpus", "none",
                       "--refresh", "0.5")
        try:
            _wait_for_frames(rec_dir, 2)
            time.sleep(random.Random().uniform(0, 9))
            killed_at = time.time()
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        rec = Recording.open(rec_dir)
        got = list(rec.documents())
        assert killed_at - got[-1][0] < 10
        # Tear the last frame as a power cut would, and record again into the same folder.
        seg = sorted(rec_dir.glob("*.edrec"))[-1]
        data = seg.read_bytes()
        seg.write_bytes(data[: len(data) - random.Random().randint(1, 200)])
        torn = list(Recording.open(rec_dir).documents())
        assert torn == got[: len(torn)] and len(got) - len(torn) <= 20
        p = enginedeck("record", "--engine", f"sglang@{url}", "--dir", str(rec_dir), "--gpus", "none",
                       "--refresh", "0.5")
        try:
            _wait_for_frames(rec_dir, len(Recording.open(rec_dir).doc_frames) + 1)
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    after = list(Recording.open(rec_dir).documents())
    assert after[: len(torn)] == torn and len(after) > len(torn)


def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    for args, says in ((["--retain", "forever", "--engine", "vllm@http://127.0.0.1:9"], "not a duration"),
                       (["--max-size", "big", "--engine", "vllm@http://127.0.0.1:9"], "not a size"),
                       ([], "no engine to record")):
        p = enginedeck("record", "--dir", str(tmp_path / "r"), *args)
        _out, err = p.communicate(timeout=60)
        assert p.returncode == 1 and says in err and "Traceback" not in err, err


def test_the_environment_variable_wins_over_the_configured_folder(tmp_path: Path) -> None:
    """docs/recording.md: ENGINEDECK_RECORDING_DIR overrides [console] recording_dir."""
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "config.toml").write_text(f'[console]\nrecording_dir = "{tmp_path / "configured"}"\n')
    env = {"ENGINEDECK_CONFIG_DIR": str(cfg), "ENGINEDECK_RECORDING_DIR": str(tmp_path / "from-env")}
    with simulator("vllm") as url:
        p = enginedeck("record", "--engine", f"vllm@{url}", "--gpus", "none", "--refresh", "0.5", env=env)
        try:
            _wait_for_frames(tmp_path / "from-env", 1)
            p.send_signal(signal.SIGTERM)
            _out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    assert p.returncode == 0, err
    assert f"to {tmp_path / 'from-env'}" in err
    assert not (tmp_path / "configured").exists()
