"""A hostile vLLM stand-in for the console's screens: every piece of text it sends (its model id, its
version, a metric's label value, an error body, the streamed reply, its log lines) carries terminal
escapes, C1 controls, bidi and zero-width characters, Rich markup and credentials in URLs.

Run in a thread (``HostileEngine``) or as a script (``python -m tests.hostile._ui_fakes --port N``;
it prints hostile log lines to stdout, as an engine's own log would hold them; ``--broken`` answers
/metrics and every POST with a 500 whose body is hostile)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# What a terminal would obey, each named for the messages of the tests.
ESCAPES: dict[str, str] = {
    "osc0-title": "\x1b]0;pwned\x07",
    "osc52-clipboard": "\x1b]52;c;aGk=\x07",
    "csi-clear": "\x1b[2J",
    "c1-csi": "\x9b31m",
    "dcs": "\x1bP1$qm\x1b\\",
    "apc": "\x1b_apc\x1b\\",
    "pm": "\x1b^pm\x1b\\",
    "bidi-rlo": "\u202e",
    "zero-width": "\u200b",
}
MARKUP = "[bold]B[/bold][link=https://evil.example]L[/link][/]"
SECRET = "Hunter2SecretPw"
TOKEN = "QueryTok3nValue"
CRED_URL = f"http://admin:{SECRET}@gw.internal:8000/v1?token={TOKEN}"
CREDENTIALS = (SECRET, TOKEN)


def hostile(tag: str) -> str:
    """``tag`` wrapped in every escape, the markup and a URL with credentials."""
    return f"{tag}<{''.join(ESCAPES.values())}{MARKUP} {CRED_URL}>"


MODEL_ID = hostile("model")
VERSION = hostile("version")
LABEL_VALUE = hostile("label")
ERROR_BODY = hostile("error-body")
REPLY_CHUNKS = ("reply-start ", *ESCAPES.values(), MARKUP, " line\nnext ", CRED_URL, " reply-end")
LOG_LINES = tuple(hostile(f"log-{i}") for i in range(3))


def _label(value: str) -> str:
    """A Prometheus label value: backslash, quote and line end escaped, the rest as it is."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def metrics_payload() -> str:
    model = f'model_name="{_label(MODEL_ID)}"'
    return "\n".join((
        "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{model}}} 1.0",
        "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{model}}} 0.0",
        "# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{{{model}}} 0.25",
        "# TYPE hostile_info gauge", f'hostile_info{{note="{_label(LABEL_VALUE)}"}} 1.0',
    )) + "\n"  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet: the test's output is its own
        return

    def _send(self, status: int, body: str, ctype: str = "application/json") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/health":
            self._send(200, "")
        elif path == "/v1/models":
            self._send(200, json.dumps({"object": "list", "data": [
                {"id": MODEL_ID, "object": "model", "max_model_len": 4096}]}))  # fmt: skip
        elif path == "/version":
            self._send(200, json.dumps({"version": VERSION}))
        elif path == "/metrics":
            if self.server.broken:
                self._send(500, ERROR_BODY, "text/plain")
            else:
                self._send(200, metrics_payload(), "text/plain; version=0.0.4")
        else:
            self._send(404, ERROR_BODY, "text/plain")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.server.broken:
            self._send(500, ERROR_BODY, "text/plain")
            return
        chat = self.path.startswith("/v1/chat")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in REPLY_CHUNKS:
            choice = {"index": 0, "delta": {"content": chunk}} if chat else {"index": 0, "text": chunk}
            event = {"id": "x", "object": "chat.completion.chunk", "model": MODEL_ID, "choices": [choice]}
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
        done = {"index": 0, "delta": {}, "finish_reason": "stop"} if chat else {"index": 0, "text": "",
                                                                               "finish_reason": "stop"}
        usage = {"prompt_tokens": 3, "completion_tokens": len(REPLY_CHUNKS), "total_tokens": 3 + len(REPLY_CHUNKS)}
        self.wfile.write(f"data: {json.dumps({'id': 'x', 'choices': [done], 'usage': usage})}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    broken = False


class HostileEngine:
    """The server in a thread on 127.0.0.1 (port 0: the system picks one)."""

    def __init__(self, *, broken: bool = False, port: int = 0) -> None:
        self.server = _Server(("127.0.0.1", port), _Handler)
        self.server.broken = broken
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> HostileEngine:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--broken", action="store_true")
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args(argv)
    engine = HostileEngine(broken=args.broken, port=args.port)
    with engine:
        for line in LOG_LINES:
            print(line, flush=True)
        while True:
            time.sleep(1)
            print(LOG_LINES[0], flush=True)


if __name__ == "__main__":
    sys.exit(main())
