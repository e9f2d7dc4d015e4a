"""The lifecycle stays split by job: the manager decides nothing by backend kind (that is the
``EngineBackend`` protocol's job) nor by an error's wording (exception types). Where code may go is
the packages' import rules (tests/test_package_boundaries.py), not a line count."""

from __future__ import annotations

import ast
from pathlib import Path

import console.lifecycle

PACKAGE = Path(console.lifecycle.__file__).parent
KIND_WORDS = {"docker", "process"}


def _source(name: str) -> ast.Module:
    return ast.parse((PACKAGE / name).read_text())


def test_the_manager_and_its_helpers_never_branch_on_the_backend_kind() -> None:
    for name in ("manager.py", "watch.py", "inventory.py", "stopping.py", "slot.py"):
        tree = _source(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                words = {c.value for c in (node.left, *node.comparators) if isinstance(c, ast.Constant)}
                assert not words & KIND_WORDS, f"{name}:{node.lineno}: compares with {words & KIND_WORDS}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
                kinds = ast.unparse(node.args[1])
                assert "Handle" not in kinds, f"{name}:{node.lineno}: isinstance(..., {kinds})"


def test_no_decision_by_an_errors_text() -> None:
    """`"..." in exc.message` (or str(exc)) is how refusals and a lost daemon were told apart."""
    for path in PACKAGE.glob("*.py"):
        if path.name == "errors.py":  # translating the docker SDK's errors is its job
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
                right = ast.unparse(node.comparators[0])
                assert not right.endswith((".message", "str(exc)")), f"{path.name}:{node.lineno}: {ast.unparse(node)}"
