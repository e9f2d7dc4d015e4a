"""Module boundaries in console/, read from the source (so a lazy import inside a function counts):

- no import cycle: modules import each other one way (the UI's parts see the app through the
  ``DeckHost`` protocol, never by importing console/ui/app.py back). Imports under
  ``if TYPE_CHECKING:`` do not run and are not counted;
- no module uses another module's private names (``from x import _name``, ``x._name``), and a
  private module (``commands/_args.py``) is imported only from inside its own package.
"""

from __future__ import annotations

import ast
import gc
from functools import cache
from pathlib import Path

CONSOLE = Path(__file__).resolve().parents[1] / "console"


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in CONSOLE.rglob("*.py"):
        parts = list(path.relative_to(CONSOLE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    assert len(out) > 100, sorted(out)  # the walk found the package
    return out


MODULES = _modules()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


@cache
def _tree(module: str) -> ast.Module:
    # CPython 3.11 (gh-106905) can raise "SystemError: AST constructor recursion depth mismatch" when a
    # finalizer (an earlier test's garbage, collected mid-parse) runs Python code inside ast.parse.
    text = MODULES[module].read_text(encoding="utf-8")
    collecting = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(text)
    finally:
        if collecting:
            gc.enable()


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt))
    return out


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> list[tuple[str, str | None, str]]:
    """(imported module, imported name or None, local name) for each alias of an import statement."""
    if isinstance(node, ast.Import):
        return [(a.name, None, (a.asname or a.name).split(".")[0]) for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = _package_of(module).split(".")
        base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else []))
    return [(base, a.name, a.asname or a.name) for a in node.names]


def _console_module(name: str) -> str | None:
    """The console module ``name`` is, or lies in (an attribute of it); None outside console/."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@cache
def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        tree = _tree(module)
        skip = _type_checking_nodes(tree)
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skip:
                for base, name, _ in _imported(module, node):
                    target = _console_module(f"{base}.{name}" if name else base)
                    if target is not None and target != module:
                        deps.add(target)
        graph[module] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_console_has_no_import_cycle() -> None:
    graph = _graph()
    assert "console.ui.screens.base" in graph["console.ui.app"]  # the graph sees the imports
    assert _cycles(graph) == []


def test_the_ui_parts_do_not_import_the_app() -> None:
    graph = _graph()
    importers = sorted(m for m, deps in graph.items() if "console.ui.app" in deps)
    # Only the launcher (it builds and runs the app) imports it.
    assert importers == ["console.ui.launch"]


def test_no_module_uses_another_modules_private_names() -> None:
    problems: list[str] = []
    for module in MODULES:
        tree = _tree(module)
        local_modules: dict[str, str] = {}  # local name -> console module it is bound to
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for base, name, local in _imported(module, node):
                full = f"{base}.{name}" if name else base
                if not full.startswith("console"):
                    continue
                if name is not None and _private(name) and full not in MODULES:
                    problems.append(f"{module}: from {base} import {name}")
                parts = (full if full in MODULES else base).split(".")  # the module imported, or imported from
                for i, part in enumerate(parts):
                    owner = ".".join(parts[:i])
                    if _private(part) and not (module + ".").startswith(owner + "."):
                        problems.append(f"{module}: imports the private module {'.'.join(parts)}")
                # `import console.a.b` binds `console`; `import console.a.b as m` and `from console.a import b` bind b.
                bound = full if isinstance(node, ast.ImportFrom) or local != full.split(".")[0] else local
                if bound in MODULES:
                    local_modules[local] = bound
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                    and node.value.id in local_modules):
                problems.append(f"{module}: {local_modules[node.value.id]}.{node.attr}")
    assert problems == []
