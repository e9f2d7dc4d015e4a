from __future__ import annotations

import tarfile
import zlib
from pathlib import Path

import pytest

GZIP_MAGIC = b"\x1f\x8b\x08"


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Audit log, process records, log copies and recordings of a test go to its own directory."""
    d = tmp_path / "state"
    monkeypatch.setenv("ENGINEDECK_STATE_DIR", str(d))
    monkeypatch.setenv("ENGINEDECK_CONFIG_DIR", str(tmp_path / "config"))
    return d


def extract(archive: Path, into: Path) -> Path:
    """The archive's one top folder, extracted (the archive has no links and no absolute paths)."""
    with tarfile.open(archive, "r:gz") as tar:
        names = tar.getnames()
        assert all(not n.startswith("/") and ".." not in n.split("/") for n in names), names
        assert all(m.isfile() for m in tar.getmembers())
        if hasattr(tarfile, "data_filter"):  # PEP 706: CPython 3.11.4+; Debian 12's 3.11.2 has none
            tar.extractall(into, filter="data")
        else:  # the members were checked above: regular files, relative paths inside the folder
            tar.extractall(into)
    tops = {n.split("/", 1)[0] for n in names}
    assert len(tops) == 1, tops
    return into / tops.pop()


def decoded(data: bytes) -> list[bytes]:
    """A file's bytes and every gzip stream inside it decompressed (a recording's frames may sit at
    any offset behind a header): what a reader of the extracted bundle can get out of it."""
    out = [data]
    at = data.find(GZIP_MAGIC)
    while at != -1:
        d = zlib.decompressobj(wbits=31)
        try:
            out.append(d.decompress(data[at:]))
        except zlib.error:
            pass
        at = data.find(GZIP_MAGIC, at + 1)
    return out
