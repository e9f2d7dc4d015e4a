"""Each package imports only what its ``__init__`` docstring says it may, and packages do not import
each other in a cycle. Read from the source (a lazy import inside a function counts; imports under
``if TYPE_CHECKING:`` do not run and are not counted), as tests/test_module_boundaries.py does.

``ALLOWED`` is the docstrings' rules as data: for each package, the packages (all their modules) and
single modules its modules may import besides its own. "The core" is the top-level modules of
console/ (config, profiles, model, ...), which import no package at all. A test checks that every
package or module a rule allows is named in that package's docstring, so the rule and the docstring
cannot drift apart. A package a rule allows brings its subpackages, but a parent does not bring a
subpackage's siblings.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_module_boundaries import MODULES, _cycles, _graph

CONSOLE = Path(__file__).resolve().parents[1] / "console"
CORE = "console"  # the top-level modules' package
ENTRY_POINTS = {"console.cli", "console.__main__"}  # the command line: they import the commands
EVERYTHING = "*"

ALLOWED: dict[str, set[str]] = {
    CORE: set(),
    "console.alerts": set(),
    "console.bundle": {"console.telemetry", "console.lifecycle", "console.recording"},
    "console.client": {"console.telemetry", "console.transport", "console.lifecycle"},
    "console.commands": {EVERYTHING},
    "console.kube": {"console.telemetry", "console.prometheus.federate"},
    "console.lifecycle": {"console.telemetry.gpu.nvml", "console.telemetry.engine.scrape", "console.transport",
                          "console.remote.tunnel"},
    "console.prometheus": {"console.telemetry"},
    "console.recording": {"console.telemetry"},
    "console.remote": {"console.telemetry", "console.prometheus", "console.kube"},
    "console.sim": {"console.ports", "console.sim.engines"},
    "console.sim.engines": {"console.sim"},
    "console.telemetry": {"console.transport", "console.telemetry.engine", "console.telemetry.metrics",
                          "console.telemetry.gpu", "console.telemetry.host"},
    "console.telemetry.engine": {"console.transport", "console.telemetry.metrics"},
    "console.telemetry.gpu": {"console.telemetry.host"},
    "console.telemetry.host": set(),
    "console.telemetry.metrics": set(),
    "console.transport": set(),
    "console.ui": {EVERYTHING},
    "console.ui.screens": {"console.ui", "console.ui.widgets", "console.client", "console.transport",
                           "console.telemetry.metrics.history"},
    "console.ui.widgets": {"console.ui", "console.telemetry.metrics.history"},
}
# (package, package it imports): the only modules that may. The client's A/B swap alone drives engines.
ONLY_IN: dict[tuple[str, str], set[str]] = {("console.client", "console.lifecycle"): {"console.client.swap"}}
# The simulator stands alone: not even the core but what its rule names (free ports).
STANDALONE = {"console.sim", "console.sim.engines"}
# Modules no module of a package may import although the package is allowed: the app is reached
# through the DeckHost protocol (console.ui.host), and only the launcher builds it.
FORBIDDEN_MODULES = {"console.ui.screens": {"console.ui.app"}, "console.ui.widgets": {"console.ui.app"}}


def _package(module: str) -> str:
    """The package a module is in (a package's ``__init__`` is in itself)."""
    if MODULES[module].name == "__init__.py":
        return module
    return module.rpartition(".")[0]


def _allowed(module: str, target: str) -> bool:
    own, theirs = _package(module), _package(target)
    rule = ALLOWED[own]
    if theirs == own or EVERYTHING in rule:
        return True
    if module not in ONLY_IN.get((own, theirs), {module}):
        return False
    if target in FORBIDDEN_MODULES.get(own, set()):
        return False
    if own in STANDALONE:
        return theirs in rule or target in rule
    if theirs == CORE:
        return target not in ENTRY_POINTS or module in ENTRY_POINTS
    return _within(theirs, rule, own) or target in rule


def _within(package: str, rule: set[str], own: str) -> bool:
    """A package a rule allows brings its subpackages (``console.telemetry`` -> ``.metrics``), except
    when it is ``own``'s parent: a subpackage allowed its parent is not thereby allowed its siblings."""
    return any(package == allowed or (package.startswith(allowed + ".") and not own.startswith(allowed + "."))
               for allowed in rule)


def _violations(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} imports {t}" for m, deps in graph.items() for t in deps
                  if m not in ENTRY_POINTS and not _allowed(m, t))


def test_every_package_has_a_rule() -> None:
    packages = {_package(m) for m in MODULES}
    assert packages == set(ALLOWED), f"packages without a rule here: {sorted(packages - set(ALLOWED))}"


def test_each_package_imports_only_what_its_docstring_allows() -> None:
    graph = _graph()
    assert "console.telemetry.gpu.nvml" in graph["console.lifecycle.gpu_release"]  # the graph sees imports
    violations = _violations(graph)
    assert violations == [], "imports the package docstrings forbid:\n" + "\n".join(violations)


def test_a_forbidden_import_is_caught() -> None:
    """The check itself: the imports the docstrings name as forbidden are reported."""
    graph = {m: set(deps) for m, deps in _graph().items()}
    graph["console.telemetry.engine.scrape"].add("console.client.bench")  # telemetry: never console.client
    graph["console.sim.server"].add("console.telemetry.metrics.promtext")  # the simulator stands alone
    graph["console.ui.widgets.chart"].add("console.ui.screens.base")  # widgets: no screen
    graph["console.client.bench"].add("console.lifecycle.manager")  # the lifecycle: swap only
    graph["console.model"].add("console.telemetry.hub")  # the core imports no package
    assert _violations(graph) == sorted([
        "console.telemetry.engine.scrape imports console.client.bench",
        "console.sim.server imports console.telemetry.metrics.promtext",
        "console.ui.widgets.chart imports console.ui.screens.base",
        "console.client.bench imports console.lifecycle.manager",
        "console.model imports console.telemetry.hub",
    ])


def _docstring(package: str) -> str:
    init = CONSOLE.parent.joinpath(*package.split("."), "__init__.py")
    return ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""


@pytest.mark.parametrize("package", sorted(p for p in ALLOWED if EVERYTHING not in ALLOWED[p]))
def test_the_rule_is_the_one_the_docstring_states(package: str) -> None:
    doc = _docstring(package)
    named = (a for a in ALLOWED[package] if not a.startswith(package + "."))  # its own subpackages go without saying
    unnamed = sorted(a for a in named if a not in doc and a.removeprefix("console.") not in doc)
    assert unnamed == [], f"{package}'s docstring does not say it may import {unnamed}"


def _top_level(module: str) -> str:
    """console.ui.screens.base -> console.ui; the core's modules -> console; the entry points apart."""
    if module in ENTRY_POINTS:
        return module
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or _package(module) != CORE else CORE


def test_no_import_cycle_between_packages() -> None:
    packages: dict[str, set[str]] = {}
    for module, deps in _graph().items():
        own = _top_level(module)
        packages.setdefault(own, set()).update(_top_level(d) for d in deps if _top_level(d) != own)
    assert "console.telemetry" in packages["console.ui"]  # the package graph was built
    assert _cycles(packages) == []


GC_MODULE = "console.gc_control"  # the garbage collector's one switchboard


def _gc_uses(module: str) -> list[str]:
    """Where ``module`` reaches the ``gc`` module: imports of it and calls through it."""
    out: list[str] = []
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name == "gc" for a in node.names):
            out.append(f"{module}:{node.lineno} import gc")
        elif isinstance(node, ast.ImportFrom) and node.module == "gc":
            out.append(f"{module}:{node.lineno} from gc import")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "gc":
            out.append(f"{module}:{node.lineno} gc.{node.attr}")
    return out


def test_no_gc_call_outside_the_one_module() -> None:
    assert _gc_uses(GC_MODULE)  # the scan sees the calls where they are
    uses = [u for m in sorted(MODULES) if m != GC_MODULE for u in _gc_uses(m)]
    assert uses == [], "garbage-collector calls outside console/gc_control.py:\n" + "\n".join(uses)


def test_telemetry_imports_nothing_of_the_client_the_lifecycle_or_the_ui() -> None:
    banned = ("console.client", "console.lifecycle", "console.ui")
    found = sorted(f"{m} imports {t}" for m, deps in _graph().items() if m.startswith("console.telemetry")
                   for t in deps if t.startswith(banned))
    assert found == []


def _id_calls(module: str) -> list[str]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    return [f"{module}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id"]


def test_no_cache_is_keyed_by_id() -> None:
    """An ``id()`` can be reused once its object is freed, so a cache keyed by one can hand a new object
    another's entry. The console keeps no ``id()`` at all; the simulator's one use is a set local to
    one call (console/sim/scheduler.py), not a cache."""
    assert _id_calls("console.sim.scheduler")  # the scan finds a call where there is one
    found = [c for m in sorted(MODULES) if not m.startswith("console.sim") for c in _id_calls(m)]
    assert found == [], "id() in console/ (a cache keyed by it?):\n" + "\n".join(found)
