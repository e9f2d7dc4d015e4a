"""Files into one archive: each text scrubbed by the one secret rule (``console/secrets.py``) with
a count of what it masked, a manifest with a sha256 per file, and a ``.tar.gz`` readable only by
its owner (0600, written aside and renamed into place so a half-written bundle never has the name).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console import outfile, strictjson
from console.secrets import MASK, Scrubber, looks_secret

SCHEMA = "enginedeck.bundle/1"
MANIFEST = "manifest.json"
FILE_MODE = 0o600
SECRET_FIELD = "secret-named field"


@dataclass(slots=True)
class Collector:
    """One part of the bundle as the manifest reports it: what it took, and why it failed."""

    name: str
    ok: bool
    seconds: float
    note: str = ""

    def doc(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "seconds": round(self.seconds, 3), "note": self.note or None}


@dataclass
class Bundle:
    """The files of one bundle, by path inside the archive. Every text added is scrubbed on the
    way in; ``masked`` counts, per file and kind, what was masked there (never the values)."""

    scrubber: Scrubber
    files: dict[str, bytes] = field(default_factory=dict)
    masked: dict[str, dict[str, int]] = field(default_factory=dict)
    collectors: list[Collector] = field(default_factory=list)

    def count(self, path: str, kind: str, n: int = 1) -> None:
        """Record ``n`` masks of ``kind`` in ``path`` made before the text reached the bundle
        (a variable or argument masked by its secret-looking name)."""
        if n:
            where = self.masked.setdefault(path, {})
            where[kind] = where.get(kind, 0) + n

    def add_text(self, path: str, text: str) -> None:
        clean, counts = self.scrubber.counted(text)
        for kind, n in counts.items():
            self.count(path, kind, n)
        self.files[path] = clean.encode("utf-8")

    def add_json(self, path: str, data: Any) -> None:
        """``data`` as JSON, every string scrubbed and every string under a secret-looking key
        (``"api_key": ...``, ``"HF_TOKEN": ...``) masked whole, before it is serialised."""
        self.files[path] = (strictjson.dumps(self._clean(data, path), indent=2) + "\n").encode("utf-8")

    def add_jsonl(self, path: str, rows: Sequence[Any]) -> None:
        """One JSON document a line, each cleaned as ``add_json`` cleans."""
        self.files[path] = "".join(strictjson.dumps(self._clean(r, path)) + "\n" for r in rows).encode("utf-8")

    def _clean(self, value: Any, path: str, key: str = "") -> Any:
        if isinstance(value, str):
            if key and looks_secret(key) and value and value != MASK:
                self.count(path, SECRET_FIELD)
                return MASK
            clean, counts = self.scrubber.counted(value)
            for kind, n in counts.items():
                self.count(path, kind, n)
            return clean
        if isinstance(value, Mapping):
            return {(self._clean(k, path) if isinstance(k, str) else k): self._clean(v, path, str(k))
                    for k, v in value.items()}  # fmt: skip
        if isinstance(value, list | tuple):
            return [self._clean(v, path) for v in value]
        return value

    def add_binary(self, path: str, data: bytes) -> None:
        """A file that is not text (a compressed recording): its content must have been scrubbed
        before it was encoded."""
        self.files[path] = data

    def collected(self, name: str, started: float, note: str = "", *, ok: bool = True) -> None:
        self.collectors.append(Collector(name, ok, time.perf_counter() - started, note))

    def redaction_report(self) -> dict[str, Any]:
        by_kind: dict[str, int] = {}
        for counts in self.masked.values():
            for kind, n in counts.items():
                by_kind[kind] = by_kind.get(kind, 0) + n
        return {
            "rule": "console/secrets.py (the one secret rule); values are never reported",
            "masked": sum(by_kind.values()),
            "by_kind": dict(sorted(by_kind.items())),
            "by_file": {p: dict(sorted(c.items())) for p, c in sorted(self.masked.items())},
        }

    def manifest(self, head: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            **head,
            "files": [
                {"path": p, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                for p, data in sorted(self.files.items())
            ],
            "redaction": self.redaction_report(),
            "collectors": [c.doc() for c in self.collectors],
        }

    def write(self, dest: Path, head: Mapping[str, Any], *, root: str) -> int:
        """The archive at ``dest`` (``-``: standard output; see ``console.outfile``):
        ``root/manifest.json`` first, then every file under ``root/``. Returns its size in bytes."""
        manifest = self.manifest(head)
        text = self.scrubber(strictjson.dumps(manifest, indent=2) + "\n")  # names, sizes, hashes, reasons
        entries = [(MANIFEST, text.encode("utf-8")), *sorted(self.files.items())]
        if not outfile.is_stdout(dest):
            dest.parent.mkdir(parents=True, exist_ok=True)
        now = int(time.time())
        with (
            outfile.output(dest, binary=True, mode=FILE_MODE) as raw,
            _Counted(raw) as counted,
            gzip.GzipFile(fileobj=counted, mode="wb", compresslevel=6, mtime=now) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            for path, data in entries:
                info = tarfile.TarInfo(f"{root}/{path}")
                info.size = len(data)
                info.mode = FILE_MODE
                info.mtime = now
                tar.addfile(info, io.BytesIO(data))
        return counted.bytes


class _Counted:
    """A binary file that counts what goes through it (a FIFO or standard output has no size to stat)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.bytes = 0

    def __enter__(self) -> _Counted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.raw.flush()

    def write(self, data: Any) -> int:
        self.bytes += len(data)
        return int(self.raw.write(data) or len(data))

    def flush(self) -> None:
        self.raw.flush()


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of a bundle archive (tests, and whoever checks a bundle's hashes)."""
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            if member.name.endswith("/" + MANIFEST) and member.name.count("/") == 1:
                f = tar.extractfile(member)
                assert f is not None
                data: dict[str, Any] = json.loads(f.read())
                return data
    raise FileNotFoundError(f"{path}: no {MANIFEST}")
