"""`enginedeck inspect-metrics`: files, stdin, real HTTP on 127.0.0.1, and one-line errors."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from console.cli import main
from tests import procgroup
from tests.telemetry import synth

SECRET = "sk-test-not-a-real-key-1234"
LLAMA = (
    "# HELP llamacpp:requests_processing Number of requests processing\n"
    "# TYPE llamacpp:requests_processing gauge\n"
    "llamacpp:requests_processing 3\n"
    "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed\n"
    "# TYPE llamacpp:prompt_tokens_total counter\n"
    "llamacpp:prompt_tokens_total 120\n"
)
VLLM = synth.simple("vllm:num_requests_running", "gauge", [({"model_name": "m", "engine": "0"}, 2.0)]) + synth.simple(
    "vllm:gpu_cache_usage_perc", "gauge", [({"model_name": "m", "engine": "0"}, 0.5)]
)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/away"):  # a redirect to the other server: another host's numbers
            self.send_response(302)
            self.send_header("Location", f"{_Server.other}/metrics")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/here":  # a redirect within the origin
            self.send_response(301)
            self.send_header("Location", "/metrics")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/metrics" and self.server.server_port == _Server.vllm_port:  # type: ignore[attr-defined]
            self._send(200, VLLM)
        elif self.path == "/metrics":
            if self.headers.get("Authorization") != f"Bearer {SECRET}":
                self._send(401, '{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}')
            else:
                self._send(200, LLAMA)
        else:
            self._send(404, "Not Found")

    def _send(self, code: int, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server:
    vllm_port = -1
    other = ""  # the llama.cpp-like server's URL


@pytest.fixture
def servers() -> Iterator[tuple[str, str]]:
    """Two real HTTP servers on free ports: a vLLM-like one and a key-guarded llama.cpp-like one."""
    vllm_srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    llama_srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Server.vllm_port = vllm_srv.server_port
    _Server.other = f"http://127.0.0.1:{llama_srv.server_port}"
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (vllm_srv, llama_srv)]
    for t in threads:
        t.start()
    try:
        yield f"http://127.0.0.1:{vllm_srv.server_port}", f"http://127.0.0.1:{llama_srv.server_port}"
    finally:
        for s in (vllm_srv, llama_srv):
            s.shutdown()
            s.server_close()
        for t in threads:
            t.join(timeout=5)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["inspect-metrics", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_profile_at_url_appends_metrics_path_and_flags_legacy(
    servers: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    vllm_url, _ = servers
    rc, out, err = _run(capsys, f"vllm@{vllm_url}")
    assert rc == 0, err
    assert "running" in out and "vllm:num_requests_running" in out
    assert "vllm:gpu_cache_usage_perc  [legacy name]" in out
    rc, out, _ = _run(capsys, "--engine", "vllm", f"{vllm_url}/metrics", "--json")
    doc = json.loads(out)
    assert doc["schema"] == 1 and doc["format"] == "prometheus"
    (model,) = doc["models"]
    assert model["model"] == "m"
    assert model["metrics"]["running"]["value"] == 2.0
    assert model["metrics"]["kv_usage"] == {"raw_name": "vllm:gpu_cache_usage_perc", "legacy": True,
                                            "kind": "gauge", "value": 0.5, "mean": 0.5}  # fmt: skip
    assert model["metrics"]["waiting"] is None
    assert "waiting" in doc["missing"]


def test_api_key_from_env_and_401_without(
    servers: tuple[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, llama_url = servers
    monkeypatch.delenv("LLAMA_API_KEY", raising=False)
    rc, out, err = _run(capsys, "--engine", "llamacpp", llama_url)
    assert rc == 1
    assert err.count("\n") == 1 and "HTTP 401" in err and "--api-key-env" in err
    monkeypatch.setenv("MY_KEY", SECRET)
    rc, out, err = _run(capsys, "--engine", "llamacpp", llama_url, "--api-key-env", "MY_KEY")
    assert rc == 0, err
    assert "3" in out and "llamacpp:requests_processing" in out
    assert SECRET not in out + err
    # The profile's own key variable is used when the metrics path needs the key.
    monkeypatch.setenv("LLAMA_API_KEY", SECRET)
    rc, out, _ = _run(capsys, f"llamacpp@{llama_url}", "--json")
    assert rc == 0
    assert json.loads(out)["models"][0]["metrics"]["running"]["value"] == 3.0
    monkeypatch.delenv("MY_KEY")
    rc, _, err = _run(capsys, "--engine", "llamacpp", llama_url, "--api-key-env", "MY_KEY")
    assert rc == 1 and "MY_KEY" in err and err.count("\n") == 1


def test_404_mentions_how_to_enable_metrics(servers: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    vllm_url, _ = servers
    rc, _, err = _run(capsys, "--engine", "sglang", f"{vllm_url}/nope")
    assert rc == 1
    assert "HTTP 404" in err and "--enable-metrics" in err and err.count("\n") == 1


def test_connection_refused_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, out, err = _run(capsys, f"vllm@http://127.0.0.1:{port}")
    assert rc == 1
    assert err.strip().endswith("connection refused") and err.count("\n") == 1
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--engine", "nosuch", "x.txt"], "unknown engine profile 'nosuch'"),
        (["/no/such/file.txt", "--engine", "vllm"], "cannot read /no/such/file.txt"),
        (["some-file.txt"], "--engine PROFILE"),
        (["--engine", "tgi", "vllm@http://127.0.0.1:1"], "contradicts"),
        (["--engine", "vllm", "http://127.0.0.1:99999"], "Port out of range"),
    ],
)
def test_bad_input_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    rc, _, err = _run(capsys, *args)
    assert rc == 1
    assert needle in err and err.count("\n") == 1


def test_file_with_no_samples_prints_na_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "page.html"
    f.write_text("<html>\n<body>not metrics</body>\n</html>\n")
    rc, out, err = _run(capsys, "--engine", "vllm", str(f))
    assert rc == 1
    assert "no metric samples" in err and err.count("\n") == 1
    assert "running                n/a" in out


def test_stdin_in_a_real_process_never_tracebacks() -> None:
    cmd = [sys.executable, "-m", "console", "inspect-metrics", "--engine", "llamacpp", "-", "--json"]
    ok = procgroup.run(cmd, input=LLAMA.encode(), capture_output=True, timeout=60, check=False)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["models"][0]["metrics"]["prompt_tokens"]["value"] == 120.0
    bad = procgroup.run(cmd, input=b"\xff\xfe\x00garbage{{{", capture_output=True, timeout=60, check=False)
    assert bad.returncode == 1
    assert b"Traceback" not in bad.stderr and bad.stderr.count(b"\n") == 1


def test_a_redirect_to_another_host_is_not_followed(servers: tuple[str, str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Another host's numbers are not the engine's: a cross-origin redirect is refused in one line,
    one within the origin is followed."""
    vllm_url, _ = servers
    rc, out, err = _run(capsys, "--engine", "vllm", f"{vllm_url}/away")
    assert rc == 1 and out == "", out
    assert err.count("\n") == 1 and "redirects to another host" in err and _Server.other in err, err
    rc, out, err = _run(capsys, "--engine", "vllm", f"{vllm_url}/here")
    assert rc == 0 and "vllm:num_requests_running" in out, err


def test_an_error_status_is_not_said_twice() -> None:
    from console.telemetry.engine.scrape import Fetched

    assert Fetched(302, b"302: Found").reason() == "HTTP 302 Found"
    assert Fetched(404, b"404 page not found").reason() == "HTTP 404 page not found"
    assert Fetched(503, b"3000 requests queued").reason() == "HTTP 503 3000 requests queued"
