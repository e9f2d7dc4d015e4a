"""`enginedeck status` as a cron check would run it: exit codes, one-line reasons, strict JSON."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from console.cli import main
from tests.telemetry.test_payload_hints import TRITON


def test_status_with_no_engine_configured_exits_1_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A config directory with no config file (a cron job pointing at the wrong place).
    monkeypatch.setenv("ENGINEDECK_CONFIG_DIR", str(tmp_path / "nowhere"))
    # No running engines either: a demo running on this machine would be reported (docs/engine-names.md).
    monkeypatch.setenv("ENGINEDECK_STATE_DIR", str(tmp_path / "state"))
    for json_flag in ([], ["--json"]):
        code = main(["status", "--sample", "0", "--gpus", "none", *json_flag])
        out, err = capsys.readouterr()
        assert code == 1 and out == ""
        assert err.count("\n") == 1 and "no engine" in err and "Traceback" not in err
        assert str(tmp_path / "nowhere") in err  # says where it looked
    # An explicit config file with no [engines] section is the same failure.
    f = tmp_path / "config.toml"
    f.write_text("[console]\nrefresh = 1.0\n")
    code = main(["status", "--config", str(f), "--sample", "0", "--gpus", "none"])
    _, err = capsys.readouterr()
    assert code == 1 and "no engine" in err and str(f) in err


class _Triton(BaseHTTPRequestHandler):
    """An HTTP server answering like Triton: health, a model list, nv_inference_* metrics."""

    def do_GET(self) -> None:
        if self.path == "/metrics":
            body, ctype = TRITON.encode(), "text/plain; version=0.0.4"
        elif self.path == "/v1/models":
            body, ctype = json.dumps({"object": "list", "data": [{"id": "ensemble"}]}).encode(), "application/json"
        else:
            body, ctype = b"", "text/plain"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def triton() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Triton)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_status_on_another_engines_payload_names_it_and_exits_3(
    triton: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["status", "--engine", f"vllm@{triton}", "--sample", "0", "--gpus", "none", "--json"])
    out, _ = capsys.readouterr()
    assert code == 3
    engine = json.loads(out)["engines"][0]
    assert engine["reachable"] and engine["stale"]
    reason = engine["metrics"]["reason"]
    assert "no vLLM metrics" in reason and "nv_inference_request_success" in reason and "Triton" in reason
    code = main(["status", "--engine", f"vllm@{triton}", "--sample", "0", "--gpus", "none"])
    out, _ = capsys.readouterr()
    assert code == 3 and "Triton" in out
