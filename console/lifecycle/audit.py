"""Append-only audit log of mutating actions (up, down, restart, remove, pull, adopt).

One JSON object per line in ``state_dir()/audit.log``: time (UTC, ISO 8601), user, action,
target, result, detail. Shared hosts have several operators, so each append takes an exclusive
``flock`` and writes one line in one ``write``. Details pass through ``scrub`` so a secret value
that slipped into an error message is replaced by ``****`` before it reaches the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from console.paths import private_dir
from console.secrets import scrub


@dataclass(frozen=True, slots=True)
class AuditEntry:
    time: str
    user: str
    action: str
    target: str
    result: str
    detail: str = ""


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


class AuditLog:
    def __init__(self, path: Path | None = None, *, secrets: Iterable[str] = ()) -> None:
        if path is None:
            from console.paths import state_dir

            path = state_dir() / "audit.log"
        self.path = path
        self._secrets = tuple(s for s in secrets if s)

    def record(
        self, action: str, target: str, result: str, detail: str = "", *, secrets: Iterable[str] = ()
    ) -> AuditEntry:
        """Append one entry. Never raises for I/O trouble: returns the entry and sets ``last_error``."""
        hide = (*self._secrets, *secrets)
        entry = AuditEntry(
            time=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            user=_user(),
            action=action,
            target=target,
            result=result,
            detail=scrub(detail, hide),
        )
        line = orjson.dumps(
            {
                "time": entry.time,
                "user": entry.user,
                "action": entry.action,
                "target": entry.target,
                "result": entry.result,
                "detail": entry.detail,
            }
        )
        self.last_error: str | None = None
        try:
            private_dir(self.path.parent)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                with contextlib.suppress(OSError):  # also an audit log made before this rule
                    os.fchmod(fd, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX)
                os.write(fd, line + b"\n")
            finally:
                os.close(fd)
        except OSError as exc:
            self.last_error = f"cannot write audit log {self.path}: {exc.strerror or exc}"
        return entry

    def read(self, limit: int | None = None) -> list[AuditEntry]:
        """The newest ``limit`` entries (all when None), oldest first. Malformed lines are skipped."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out: list[AuditEntry] = []
        for raw in data.splitlines():
            try:
                obj = orjson.loads(raw)
                out.append(
                    AuditEntry(
                        str(obj["time"]),
                        str(obj["user"]),
                        str(obj["action"]),
                        str(obj["target"]),
                        str(obj["result"]),
                        str(obj.get("detail", "")),
                    )
                )
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
        return out if limit is None else out[-limit:]
