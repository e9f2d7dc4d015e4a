"""Every function tests/slow_tests.txt marks `slow` exists: a renamed or removed test must leave the
list, or the list would silently stop saying what `make check` leaves out."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import slow_functions

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_slow_test_exists() -> None:
    listed = slow_functions()
    assert len(listed) > 20  # the list was read
    missing = []
    for entry in sorted(listed):
        path, _, name = entry.partition("::")
        file = ROOT / path
        tree = ast.parse(file.read_text()) if file.exists() else ast.Module(body=[], type_ignores=[])
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        if name not in names:
            missing.append(entry)
    assert missing == [], f"tests/slow_tests.txt lists tests that do not exist: {missing}"
