"""Screenshots of the console for the docs, exported by Textual's own screenshot as SVG.

    python scripts/screenshots.py [--out docs/images]

Writes overview.svg, detail.svg and compare.svg: the demo's four engines and eight GPUs frozen to
deterministic values with a fixed clock and history (tests/ui/frozen.py), so the files change only
when the screens do (tests/ui/test_screenshots.py checks the committed ones are current).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZE = (160, 48)
# (file, keys pressed from the overview)
SHOTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("overview.svg", ()),
    ("detail.svg", ("enter",)),
    ("compare.svg", ("c",)),
)


async def _shoot(keys: tuple[str, ...]) -> str:
    from console.profiles import load_profiles
    from console.ui.app import DeckApp, UiOptions
    from tests.ui.frozen import FrozenSource, clock

    app = DeckApp(FrozenSource(), options=UiOptions(simulated=True), profiles=load_profiles(), clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
            await pilot.pause()
            await pilot.pause()
        return app.export_screenshot(title="enginedeck")


def shoot_all() -> dict[str, str]:
    """File name -> SVG text of every screenshot."""
    with tempfile.TemporaryDirectory() as tmp:  # no one's own config or state in the pictures
        os.environ["ENGINEDECK_CONFIG_DIR"] = str(Path(tmp) / "config")
        os.environ["ENGINEDECK_STATE_DIR"] = str(Path(tmp) / "state")
        return {name: asyncio.run(_shoot(keys)) for name, keys in SHOTS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "images"))
    out = Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    for name, svg in shoot_all().items():
        (out / name).write_text(svg)
        print(out / name)


if __name__ == "__main__":
    main()
