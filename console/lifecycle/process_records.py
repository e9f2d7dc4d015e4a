"""Process records: what is persisted about each process engine an enginedeck started
(``state_dir()/processes/NAME.json``, mode 0600), so `ps`, `down` and the console of another
enginedeck run on the host find it. A PID is trusted only while its process start time matches.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

import psutil

from console.paths import private_dir


def _records_dir() -> Path:
    from console.paths import state_dir

    return state_dir() / "processes"


def open_private(path: Path) -> BinaryIO:
    """``path`` truncated for writing, mode 0600 in a 0700 directory (also when it existed)."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """What is persisted about a started process, for `ps`/`down` in another enginedeck run."""

    name: str
    profile: str
    pid: int
    pgid: int
    create_time: float
    owner_pid: int
    address: str
    command: list[str]  # masked for display
    config_hash: str
    gpus: str

    def alive(self) -> bool:
        try:
            p = psutil.Process(self.pid)
            return abs(p.create_time() - self.create_time) < 0.5 and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


def write_record(rec: ProcessRecord) -> None:
    d = _records_dir()
    with contextlib.suppress(OSError):
        tmp = d / f".{rec.name}.json.tmp"
        with open_private(tmp) as f:
            f.write(json.dumps(asdict(rec)).encode())
        os.replace(tmp, d / f"{rec.name}.json")


def read_record(name: str) -> ProcessRecord | None:
    try:
        data = json.loads((_records_dir() / f"{name}.json").read_text())
        return ProcessRecord(**data)
    except (OSError, ValueError, TypeError):
        return None


def drop_record(name: str, pid: int | None = None) -> None:
    rec = read_record(name)
    if rec is not None and (pid is None or rec.pid == pid):
        with contextlib.suppress(OSError):
            (_records_dir() / f"{name}.json").unlink()


def all_records() -> list[ProcessRecord]:
    out: list[ProcessRecord] = []
    d = _records_dir()
    if not d.is_dir():
        return out
    for path in sorted(d.glob("*.json")):
        rec = read_record(path.stem)
        if rec is not None:
            out.append(rec)
    return out
