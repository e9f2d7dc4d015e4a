from __future__ import annotations

import json
import stat
import threading
from pathlib import Path

from console.lifecycle.audit import AuditLog


def test_record_and_read_back(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a" / "audit.log")
    e = log.record("up", "vllm-a", "ok", "container abc on 127.0.0.1:8000")
    assert e.user
    assert e.time.endswith("Z")
    lines = (tmp_path / "a" / "audit.log").read_text().splitlines()
    assert len(lines) == 1
    obj = json.loads(lines[0])
    assert set(obj) == {"time", "user", "action", "target", "result", "detail"}
    assert obj["action"] == "up" and obj["target"] == "vllm-a" and obj["result"] == "ok"
    assert [x.action for x in log.read()] == ["up"]
    assert stat.S_IMODE((tmp_path / "a" / "audit.log").stat().st_mode) == 0o600


def test_secret_values_never_reach_the_file(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log", secrets=["hf_abcdefSECRET"])
    log.record("start", "x", "failed", "env HF_TOKEN=hf_abcdefSECRET --api-key sk-123456", secrets=["sk-123456"])
    text = (tmp_path / "audit.log").read_text()
    assert "hf_abcdefSECRET" not in text and "sk-123456" not in text
    assert text.count("****") == 2


def test_default_path_is_in_the_state_dir(_state_dir: Path) -> None:
    log = AuditLog()
    log.record("pull", "e", "ok")
    assert (_state_dir / "audit.log").exists()


def test_concurrent_writers_make_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"

    def writer(k: int) -> None:
        log = AuditLog(path)
        for i in range(100):
            log.record("restart", f"e{k}", "ok", "x" * 500 + str(i))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = AuditLog(path).read()
    assert len(entries) == 400


def test_unwritable_location_does_not_raise(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    log = AuditLog(blocker / "audit.log")
    log.record("down", "e", "ok")
    assert log.last_error is not None and "cannot write audit log" in log.last_error
