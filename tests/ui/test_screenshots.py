"""The README's pictures (docs/images/*.svg) are no older than the code that draws them.

scripts/screenshots.py takes them from a live demo, so a fresh run never equals the committed bytes;
it records in docs/images/screenshots.json a digest of the files that draw them and of each picture.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "images"
RUN = "python scripts/screenshots.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts" / "screenshots.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _manifest(mod: ModuleType) -> dict[str, object]:
    doc = json.loads((IMAGES / mod.MANIFEST).read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def test_the_pictures_are_newer_than_the_code_that_draws_them() -> None:
    mod = _script()
    made_with = _manifest(mod)["code_digest"]
    assert made_with == mod.code_digest(), (
        f"docs/images/*.svg are older than the code that draws them (DRAWN_BY in the script): run {RUN}")


def test_the_pictures_are_the_ones_the_script_made_and_the_readme_shows() -> None:
    mod = _script()
    pictures = _manifest(mod)["pictures"]
    assert isinstance(pictures, dict) and sorted(pictures) == sorted(mod.PICTURES), f"run {RUN}"
    for name, digest in pictures.items():
        svg = (IMAGES / name).read_text(encoding="utf-8")
        assert mod.picture_digest(svg) == digest, f"docs/images/{name} is not the one {RUN} made: run it again"
    shown = re.findall(r"!\[[^\]]*\]\(docs/images/([\w-]+\.svg)\)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert sorted(shown) == sorted(mod.PICTURES)


def test_the_digest_covers_the_drawing_code_and_only_it(tmp_path: Path) -> None:
    mod = _script()
    drawn = mod.drawn_files(ROOT)
    rel = {p.relative_to(ROOT).as_posix() for p in drawn}
    # The set is what the docstring says: the UI, the layouts, the demo engines' profiles, the script.
    assert {"console/ui/app.py", "console/ui/screens/overview.py", "layouts/base.tcss", "engines/vllm.toml",
            "scripts/screenshots.py"} <= rel
    assert not any(r.startswith(("console/sim/", "console/telemetry/")) or "__pycache__" in r for r in rel)
    for p in drawn:  # a copy of the tree that matters, with one file outside the set beside it
        dst = tmp_path / p.relative_to(ROOT)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dst)
    (tmp_path / "console" / "sim").mkdir(parents=True)
    (tmp_path / "console" / "sim" / "load.py").write_text("x = 1\n")
    before = mod.code_digest(tmp_path)
    assert before == mod.code_digest(ROOT)
    (tmp_path / "console" / "sim" / "load.py").write_text("x = 2\n")
    assert mod.code_digest(tmp_path) == before
    widget = tmp_path / "console" / "ui" / "format.py"
    widget.write_text(widget.read_text() + "\n")
    assert mod.code_digest(tmp_path) != before
