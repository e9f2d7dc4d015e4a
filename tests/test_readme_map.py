"""README's architecture map names only modules and packages that exist (it is the next engineer's
first map of the tree)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _architecture_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Architecture\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _exists(ref: str) -> bool:
    ref = ref.rstrip("/").removesuffix("/*")
    if (ROOT / ref).exists():
        return True
    # Paths inside the package are written without the leading console/ (`lifecycle/manager.py`), and
    # a module alone by its file name (`hub.py`): it must then exist somewhere in the package.
    return (ROOT / "console" / ref).exists() or any((ROOT / "console").rglob(ref))


def test_every_module_the_architecture_map_names_exists() -> None:
    section = _architecture_section()
    refs = set(re.findall(r"[\w/-]+(?:\.py|\.md|/)(?![\w.])", section))
    refs |= set(re.findall(r"console/[\w/]+(?:\.py)?", section))
    assert len(refs) > 20, refs  # the map really was read
    missing = sorted(r for r in refs if not _exists(r))
    assert not missing, f"README's architecture map names what does not exist: {missing}"
