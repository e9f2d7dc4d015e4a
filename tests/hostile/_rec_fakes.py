"""Fakes and helpers for the recording and bundle hostile-input tests (symlinks, damage, credentials).

- ``write_recording``: a recording folder written by the real ``RecordingWriter`` from status
  documents of a small fleet (``tests.recording.fleetdocs``).
- ``LoggingProxy``: a reverse proxy on 127.0.0.1 in front of a real simulator that notes every
  request (path, query, Authorization header) and can answer chosen paths with an error body of
  its own (one that quotes credentials, as a gateway's error page does).
- ``tar_bomb``: a small .tar.gz whose members claim (and decompress to) gigabytes of zeros, built
  from repeated gzip members, so it is made in milliseconds.
- ``run_cli``: the enginedeck CLI as a process with its own state, config and temporary folders.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import http.server
import io
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from console.recording import Recording, RecordingWriter
from tests.recording.fleetdocs import docs

ROOT = Path(__file__).resolve().parents[2]
ENGINEDECK = [sys.executable, "-m", "console"]


def write_recording(directory: Path, n: int = 75, **kwargs: object) -> Path:
    """``n`` documents, one a second, into ``directory`` (one segment); returns the segment's path."""
    w = RecordingWriter(directory, **kwargs)  # type: ignore[arg-type]
    for t, doc in docs(n, engines=2, gpus=2):
        w.add(doc, at=t)
    w.close()
    (segment,) = directory.glob("*.edrec")
    return segment


def everything_in(path: Path) -> bytes:
    """Every byte a recording (folder or cut) holds, its frames decompressed: files, documents, rows,
    raw payloads (with their engine names) and dictionaries."""
    rec = Recording.open(path)
    out = [p.read_bytes() for p in ([path] if path.is_file() else sorted(path.iterdir())) if p.is_file()]
    for ref in rec.doc_frames + rec.raw_frames:
        out.append(ref.segment.payload(ref.info) or b"")
        if ref.rows is not None:
            out.append(ref.segment.payload(ref.rows) or b"")
    out += [seg.zdict or b"" for seg in rec.segments]
    return b"\n".join(out)


def cli_env(tmp: Path) -> dict[str, str]:
    """A CLI process's own state, config, recording and temporary folders (a running demo's state
    is not seen, and what the process leaves in TMPDIR can be looked at)."""
    (tmp / "tmpdir").mkdir(exist_ok=True)
    return {**os.environ, "ENGINEDECK_STATE_DIR": str(tmp / "state"), "ENGINEDECK_CONFIG_DIR": str(tmp / "config"),
            "ENGINEDECK_RECORDING_DIR": str(tmp / "recordings"), "TMPDIR": str(tmp / "tmpdir")}


def run_cli(tmp: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI to its end; its whole process group is killed if it outlives ``timeout``."""
    p = start_cli(tmp, *args)
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        stop_group(p)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def start_cli(tmp: Path, *args: str, stdout: int = subprocess.PIPE) -> subprocess.Popen[str]:
    return subprocess.Popen([*ENGINEDECK, *args], cwd=ROOT, env=cli_env(tmp), stdout=stdout,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip


def stop_group(p: subprocess.Popen[str]) -> None:
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


def wait_for(predicate: object, timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what or predicate}")


@dataclass
class Seen:
    path: str
    query: str
    authorization: str


@dataclass
class LoggingProxy:
    """Forwards to ``upstream``; ``errors`` maps a path to the (status, body) answered instead."""

    upstream: str
    errors: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    @contextlib.contextmanager
    def running(self) -> Iterator[LoggingProxy]:
        proxy = self
        up = urllib.parse.urlsplit(self.upstream)

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                proxy.seen.append(Seen(parts.path, parts.query, self.headers.get("Authorization", "")))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if parts.path in proxy.errors:
                    status, data = proxy.errors[parts.path]
                    ctype = "text/plain"
                else:
                    conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=10)
                    try:
                        conn.request(self.command, self.path, body=body,
                                     headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                        resp = conn.getresponse()
                        status, data, ctype = resp.status, resp.read(), resp.getheader("Content-Type", "text/plain")
                    finally:
                        conn.close()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _any

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def tar_bomb(path: Path, members: list[tuple[str, int]]) -> Path:
    """A .tar.gz whose members (name, size) hold that many zero bytes, as concatenated gzip members:
    1 MiB of zeros compresses to about 1 KB, so a GiB costs about 1 MB on disk."""
    mib_of_zeros = _gz(bytes(1 << 20))
    with path.open("wb") as out:
        for name, size in members:
            info = tarfile.TarInfo(name)
            info.size = size
            info.mode = 0o600
            out.write(_gz(info.tobuf(format=tarfile.PAX_FORMAT)))
            whole, rest = divmod(size, 1 << 20)
            out.write(mib_of_zeros * whole)
            pad = (-size) % tarfile.BLOCKSIZE
            out.write(_gz(bytes(rest + pad)))
        out.write(_gz(bytes(2 * tarfile.BLOCKSIZE)))
    return path


def tar_of(path: Path, files: dict[str, bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
