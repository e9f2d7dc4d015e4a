"""Fake engines on 127.0.0.1 and hostile text for the CLI's text outputs (status, logs,
inspect-metrics, errors, remote hosts) and for the credential rule in URLs.

Each hostile payload is one kind of terminal attack, with a marker word around it so a test can find
where it landed; ``assert_terminal_safe`` checks a captured output independently of the sanitiser
under test (its own list of what a terminal acts on)."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# kind -> (raw text, the placeholder text the output must show instead)
PAYLOADS: dict[str, tuple[str, str]] = {
    "osc0-title": ("\x1b]0;pwned-title\x07", "␛]0;pwned-title␇"),
    "osc52-clipboard": ("\x1b]52;c;cHduZWQ=\x07", "␛]52;c;cHduZWQ=␇"),
    "csi-clear": ("\x1b[2J\x1b[H", "␛[2J␛[H"),
    "c1-csi": ("\x9b2J", "\\u009b2J"),
    "c1-osc": ("\x9d0;c1-title\x9c", "\\u009d0;c1-title\\u009c"),
    "dcs": ("\x1bP1$qm\x1b\\", "␛P1$qm␛\\"),
    "apc": ("\x1b_apc-data\x1b\\", "␛_apc-data␛\\"),
    "pm": ("\x1b^pm-data\x1b\\", "␛^pm-data␛\\"),
    "bidi-override": ("abc\u202edcba", "abc\\u202edcba"),
    "bidi-isolate": ("x\u2066y\u2069z", "x\\u2066y\\u2069z"),
    "zero-width": ("ze\u200bro\u200dwidth\ufeff", "ze\\u200bro\\u200dwidth\\ufeff"),
    "bell-backspace": ("bell\x07back\x08space", "bell␇back␈space"),
}
KINDS = tuple(PAYLOADS)


def hostile(kind: str) -> str:
    """The payload of ``kind`` between markers (``<<kind:`` ... ``>>``)."""
    return f"<<{kind}:{PAYLOADS[kind][0]}>>"


def placeholder(kind: str) -> str:
    return f"<<{kind}:{PAYLOADS[kind][1]}>>"


# What a terminal or a bidi algorithm acts on, or what shows nothing: listed here on its own, not
# taken from console.textsafe, so the check does not share a mistake with the code it checks.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def unsafe_chars(text: str) -> list[str]:
    return sorted({f"U+{ord(c):04X}" for c in _UNSAFE.findall(text)})


def assert_terminal_safe(text: str, where: str = "output") -> None:
    found = unsafe_chars(text)
    assert not found, f"{where} holds {found}:\n{text[-2000:]!r}"


# -- a fake engine ---------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    ctype: str = "text/plain"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeEngine:
    """A small HTTP server on 127.0.0.1 answering each path from ``routes`` (404 elsewhere) and
    recording the paths (with their query) it was asked."""

    routes: dict[str, Answer]
    asked: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeEngine:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                engine.asked.append(self.path)
                answer = engine.routes.get(self.path.partition("?")[0], Answer(404, b"not found"))
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.ctype)
                self.send_header("Content-Length", str(len(answer.body)))
                for k, v in answer.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def json_answer(doc: object, status: int = 200) -> Answer:
    return Answer(status, json.dumps(doc).encode(), "application/json")


def engine_serving(metrics: Answer, *, model_id: str = "demo-model", version: str = "0.0.1") -> FakeEngine:
    """A vLLM-like engine: health, /v1/models, /version and the given /metrics answer."""
    return FakeEngine({
        "/health": Answer(200, b""),
        "/v1/models": json_answer({"object": "list", "data": [{"id": model_id, "max_model_len": 4096}]}),
        "/version": json_answer({"version": version}),
        "/metrics": metrics,
    }).start()


def vllm_metrics(model: str, *, malformed: str = "") -> bytes:
    """A vLLM payload whose model label is ``model`` (and one malformed line, if given)."""
    label = model.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    lines = [
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{model_name="{label}"}} 3',
        "# TYPE vllm:num_requests_waiting gauge",
        f'vllm:num_requests_waiting{{model_name="{label}"}} 1',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f'vllm:kv_cache_usage_perc{{model_name="{label}"}} 0.25',
    ]
    if malformed:
        lines.append(malformed)
    return ("\n".join(lines) + "\n").encode()


def engines_config(path: Path, engines: dict[str, str]) -> Path:
    """A configuration of monitor-only vLLM engines, ``name -> url``."""
    path.write_text("".join(f'[engines.{name}]\nprofile = "vllm"\nurl = {json.dumps(url)}\n\n'
                            for name, url in engines.items()))
    return path


def fake_ssh(tmp_path: Path, *, stdout_lines: list[str], stderr: str, exit_code: int = 255) -> str:
    """An executable standing in for ssh: prints ``stdout_lines`` (status documents), writes
    ``stderr`` and exits ``exit_code`` (a host that answered once, then dropped)."""
    script = tmp_path / "fake-ssh"
    script.write_text(
        f"#!{sys.executable}\nimport sys, time\n"
        f"for line in {stdout_lines!r}:\n    print(line, flush=True)\n"
        f"time.sleep(0.3)\nsys.stderr.write({stderr!r})\nsys.stderr.flush()\nsys.exit({exit_code})\n"
    )
    script.chmod(0o755)
    return str(script)


def wait_for(check: Callable[[], bool], timeout: float = 10.0, step: float = 0.05) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


def served(engine: FakeEngine) -> Iterator[FakeEngine]:
    """For a fixture: ``yield from served(engine_serving(...))``."""
    try:
        yield engine
    finally:
        engine.stop()


@contextlib.contextmanager
def live_process_record(state: Path, name: str, command: list[str]) -> Iterator[int]:
    """A process record (as `up` writes for a process engine) for a sleeping child of this test,
    so `ps` and `logs -f` find ``name`` running with ``command``; yields the child's pid."""
    import os
    import subprocess

    import psutil
    import pytest

    from console.lifecycle.process_records import ProcessRecord, write_record

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("ENGINEDECK_STATE_DIR", str(state))
            write_record(ProcessRecord(name=name, profile="vllm", pid=sleeper.pid, pgid=sleeper.pid,
                                       create_time=psutil.Process(sleeper.pid).create_time(), owner_pid=os.getpid(),
                                       address="127.0.0.1:18999", command=command, config_hash="", gpus=""))
        yield sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()


@contextlib.contextmanager
def own_dirs(root: Path) -> Iterator[Path]:
    """State, config, cache and recording folders of this test module's own, for in-process runs
    and the subprocesses that inherit the environment (a demo running on this machine, or the
    user's alert rules, must not change what a test sees)."""
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        for var, sub in (("ENGINEDECK_STATE_DIR", "state"), ("ENGINEDECK_CONFIG_DIR", "config"),
                         ("ENGINEDECK_CACHE_DIR", "cache"), ("ENGINEDECK_RECORDING_DIR", "recordings")):
            mp.setenv(var, str(root / sub))
        yield root
