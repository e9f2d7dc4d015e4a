"""`export -o` and `bundle -o` write what the path names, never replace what the path is.

They used to write FILE.part and rename it onto FILE: a symlink, a FIFO and, run as root,
/dev/null itself became regular files. A new or regular file is still written whole or not at all
(temporary name, rename); a symlink is followed, a FIFO or device written through in place, a
folder or socket refused with one line, and ``-`` is standard output. The device is stood in for by
a FIFO and by a file reached through a symlink (no real /dev node in tests), and ``resolve`` is
checked on a character device's mode.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from console import outfile
from console.errors import UserError
from console.ports import free_port
from console.recording import RecordingWriter
from tests import procgroup
from tests.recording.fleetdocs import docs

ROOT = Path(__file__).resolve().parents[1]


def _enginedeck(*args: str, state: Path) -> subprocess.CompletedProcess[bytes]:
    return procgroup.run([sys.executable, "-m", "console", *args], cwd=ROOT, capture_output=True, timeout=120,
                         env={**os.environ, "ENGINEDECK_STATE_DIR": str(state), "ENGINEDECK_CONFIG_DIR": str(state)})


def _recording(tmp_path: Path) -> Path:
    w = RecordingWriter(tmp_path / "rec")
    for t, doc in docs(20, engines=2, gpus=2):
        w.add(doc, at=t)
    w.close()
    return tmp_path / "rec"


def _drain_fifo(path: Path) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t, got


def _export(rec: Path, out: Path, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    return _enginedeck("export", str(rec), "--format", "csv", "-o", str(out), state=tmp_path / "state")


def _bundle(_rec: Path, out: Path, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    return _enginedeck("bundle", "--engine", f"vllm@http://127.0.0.1:{free_port()}", "--gpus", "none",
                       "--recording", str(tmp_path / "none"), "--log-lines", "0", "-o", str(out),
                       state=tmp_path / "state")


def _is_csv(data: bytes) -> bool:
    return data.startswith(b"time,")


def _is_bundle(data: bytes) -> bool:
    return data.startswith(b"\x1f\x8b")


WRITERS: dict[str, tuple[Callable[[Path, Path, Path], subprocess.CompletedProcess[bytes]], Callable[[bytes], bool]]]
WRITERS = {"export": (_export, _is_csv), "bundle": (_bundle, _is_bundle)}


@pytest.fixture(params=sorted(WRITERS))
def writer(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_fifo_is_written_through_and_stays_a_fifo(tmp_path: Path, writer: str) -> None:
    run, looks_right = WRITERS[writer]
    rec = _recording(tmp_path)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader, got = _drain_fifo(fifo)
    r = run(rec, fifo, tmp_path)
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and looks_right(got[0]), got[:1]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".out", "out"))) == ["out.fifo"]


def test_a_symlink_stays_a_link_and_its_target_is_written(tmp_path: Path, writer: str) -> None:
    run, looks_right = WRITERS[writer]
    rec = _recording(tmp_path)
    target = tmp_path / "elsewhere" / "target.bin"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "link.out"
    link.symlink_to(target)
    r = run(rec, link, tmp_path)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert looks_right(target.read_bytes())


def test_a_device_behind_a_symlink_is_written_through(tmp_path: Path, writer: str) -> None:
    """The shape of /dev/stdout -> /proc/self/fd/1: a link to something that is no regular file."""
    run, looks_right = WRITERS[writer]
    rec = _recording(tmp_path)
    fifo = tmp_path / "device-stand-in"
    os.mkfifo(fifo)
    link = tmp_path / "devlink"
    link.symlink_to(fifo)
    reader, got = _drain_fifo(fifo)
    r = run(rec, link, tmp_path)
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and looks_right(got[0])


def test_a_regular_file_is_replaced_whole(tmp_path: Path, writer: str) -> None:
    run, looks_right = WRITERS[writer]
    rec = _recording(tmp_path)
    out = tmp_path / "out.tar.gz"
    out.write_bytes(b"old")
    out.chmod(0o640)
    r = run(rec, out, tmp_path)
    assert r.returncode == 0, r.stderr
    assert looks_right(out.read_bytes()) and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_dash_is_standard_output(tmp_path: Path, writer: str) -> None:
    run, looks_right = WRITERS[writer]
    r = run(_recording(tmp_path), Path("-"), tmp_path)
    assert r.returncode == 0, r.stderr
    assert looks_right(r.stdout)
    if writer == "bundle":
        with tarfile.open(fileobj=__import__("io").BytesIO(r.stdout), mode="r:gz") as tar:
            assert any(n.endswith("/manifest.json") for n in tar.getnames())
    assert not (tmp_path / "-").exists()


def test_a_socket_is_refused_in_one_line(tmp_path: Path) -> None:
    rec = _recording(tmp_path)
    path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    try:
        r = _export(rec, path, tmp_path)
        assert r.returncode != 0
        assert r.stderr.decode().strip() == f"enginedeck: cannot write {path}: it is a socket", r.stderr
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        sock.close()


def test_resolve_writes_a_character_device_in_place(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A character device (what /dev/null is) is written in place: its mode, given as the kernel
    reports it for such a node."""
    path = tmp_path / "null"
    path.write_bytes(b"")
    real_stat = os.stat

    def chr_stat(p: object, *a: object, **k: object) -> os.stat_result:
        st = real_stat(p)  # type: ignore[arg-type]
        if Path(str(p)) == path:
            return os.stat_result((stat.S_IFCHR | 0o666, *tuple(st)[1:]))
        return st

    monkeypatch.setattr(os, "stat", chr_stat)
    assert outfile.resolve(path) == (path, True)
    with pytest.raises(UserError, match="it is a directory"):
        outfile.resolve(tmp_path)
