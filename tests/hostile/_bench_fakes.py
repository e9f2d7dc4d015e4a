"""Fake OpenAI-compatible servers on 127.0.0.1 for the bench's hostile-input tests.

Each server answers ``GET /v1/models`` with one model and every ``POST`` with what its ``reply``
callable writes: exactly the bad shape a test is about (a usage claim of 3e8, a chunk whose
``choices`` is a string, an endless stream...). Stdlib only, one thread per connection, HTTP/1.1 with
chunked bodies; every request is counted (with its arrival time) so a test can tell whether a
client kept sending.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
Reply = Callable[["_Handler", dict[str, Any]], None]


def chunk(text: str | None = "x", *, usage: Any = None, finish: Any = None, raw: dict[str, Any] | None = None) -> bytes:
    """One completions SSE event: ``data: {...}\\n\\n`` (``raw``: the JSON object as given)."""
    if raw is None:
        raw = {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
        if usage is not None:
            raw["usage"] = usage
    return b"data: " + json.dumps(raw).encode() + b"\n\n"


def usage(completion: Any, prompt: Any = 8) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": None}


def good_stream(n: int = 4) -> list[bytes]:
    """What a healthy engine sends for max_tokens=n: n text chunks, a usage chunk, [DONE]."""
    return [*(chunk(f"t{i} ") for i in range(n)), chunk(None, usage=usage(n), finish="length"), b"data: [DONE]\n\n"]


def claim_stream(completion: Any, n: int = 4) -> list[bytes]:
    """A normal stream whose final usage chunk claims ``completion`` tokens."""
    return [*(chunk(f"t{i} ") for i in range(n)), chunk(None, usage=usage(completion), finish="length"),
            b"data: [DONE]\n\n"]  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            listing = {"object": "list", "data": [{"id": "m", "object": "model"}]}
            status, obj = self.server.models_reply or (200, listing)
            self.send_json(status, obj)
        else:
            self.send_json(404, {"error": "not here"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        with self.server.lock:
            self.server.posts.append(time.monotonic())
        try:
            self.server.reply(self, body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # --- what replies use
    def send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_raw(self, status: int, data: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def stream(self, events: Sequence[bytes], gap: float = 0.0) -> None:
        self.start_stream()
        for ev in events:
            self.write_chunk(ev)
            if gap:
                time.sleep(gap)
        self.end_stream()


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reply: Reply) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply = reply
        self.lock = threading.Lock()
        self.posts: list[float] = []
        self.stopping = threading.Event()
        self.models_reply: tuple[int, Any] | None = None  # (status, JSON) for GET /v1/models

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up mid-stream is what many of these tests do on purpose

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def ref(self) -> str:
        return f"vllm@{self.url}"


@contextlib.contextmanager
def fake_server(reply: Reply) -> Iterator[FakeServer]:
    srv = FakeServer(reply)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.stopping.set()
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def streams(events: Sequence[bytes], gap: float = 0.0) -> Reply:
    """A reply that streams ``events`` (each one chunked write) to every request."""
    return lambda h, body: h.stream(events, gap)


def endless(gap: float = 0.05) -> Reply:
    """A stream that never ends (until the client goes or the server stops)."""

    def reply(h: _Handler, body: dict[str, Any]) -> None:
        h.start_stream()
        while not h.server.stopping.is_set():
            h.write_chunk(chunk("z "))
            time.sleep(gap)

    return reply


def isolated_env(tmp: Path) -> dict[str, str]:
    """The environment for a bench subprocess: its own config, state, cache and recording folders."""
    env = os.environ.copy()
    for name in ("CONFIG", "STATE", "CACHE", "RECORDING"):
        d = tmp / f"ed-{name.lower()}"
        d.mkdir(exist_ok=True)
        env[f"ENGINEDECK_{name}_DIR"] = str(d)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def bench_cmd(*engines: str, json_out: Path, extra: Sequence[str] = ()) -> list[str]:
    cmd = [sys.executable, "-m", "console", "bench"]
    for e in engines:
        cmd += ["--engine", e]
    return [*cmd, "--concurrency", "1", "--num-prompts", "3", "--warmup", "0", "--input-len", "8",
            "--output-len", "4", "--no-gpu", "--no-engine-metrics", "--json", str(json_out), *extra]  # fmt: skip


def run_bench(*engines: str, tmp: Path, extra: Sequence[str] = (), timeout: float = 120) -> tuple[
        subprocess.CompletedProcess[str], dict[str, Any] | None]:  # fmt: skip
    """Run ``enginedeck bench`` to its end; (the process, the JSON it wrote or None)."""
    out = tmp / "bench.json"
    cmd = bench_cmd(*engines, json_out=out, extra=extra)
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=isolated_env(tmp), start_new_session=True) as p:  # fmt: skip
        try:
            stdout, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(p.pid)
            p.communicate()
            raise
        finally:
            kill_group(p.pid)  # the load process too, whatever happened
    proc = subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, 9)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is left (zombies of other parents count as gone)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False
