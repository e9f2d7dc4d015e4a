"""The docs' screenshots (docs/images/*.svg) are what scripts/screenshots.py makes of the current code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_committed_screenshots_are_current() -> None:
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts" / "screenshots.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    shots = mod.shoot_all()
    assert sorted(shots) == ["compare.svg", "detail.svg", "overview.svg"]
    for name, svg in shots.items():
        committed = (ROOT / "docs" / "images" / name).read_text()
        assert committed == svg, f"docs/images/{name} is out of date: run python scripts/screenshots.py"
