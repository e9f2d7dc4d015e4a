"""Every package of the console says what it holds and what it may import (issue 11: the next
engineer reads the layering in the package, not in a separate document)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

CONSOLE = Path(__file__).resolve().parents[1] / "console"


def _packages() -> list[Path]:
    return sorted({p.parent for p in CONSOLE.rglob("*.py") if "__pycache__" not in p.parts})


def test_every_package_has_an_init_with_a_docstring_that_states_its_imports() -> None:
    problems = []
    for pkg in _packages():
        init = pkg / "__init__.py"
        where = init.relative_to(CONSOLE.parent)
        if not init.exists():
            problems.append(f"{where}: missing (a package without a docstring)")
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if len(doc.split()) < 12:
            problems.append(f"{where}: no paragraph saying what the package holds")
        if not re.search(r"\bmay\s+import\b", doc, re.IGNORECASE):
            problems.append(f"{where}: does not say what the package may import")
    assert not problems, "\n".join(problems)


def test_the_packages_found_include_the_known_layers() -> None:
    names = {p.relative_to(CONSOLE.parent).as_posix() for p in _packages()}
    assert {"console", "console/client", "console/lifecycle", "console/telemetry", "console/sim",
            "console/ui", "console/ui/screens", "console/ui/widgets", "console/commands"} <= names
