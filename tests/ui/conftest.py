"""Fixtures for console UI tests: a DeckApp over a FrozenSource with a fixed clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from console.profiles import load_profiles
from console.ui.app import DeckApp, UiOptions
from console.ui.input_gate import GATE
from tests.ui.frozen import FrozenSource, clock

AppFactory = Callable[..., DeckApp]


@pytest.fixture(autouse=True)
def _collection_resumed() -> Any:
    # A console that paused garbage collection for a key (input_gate) resumes it when it ends.
    yield
    held = GATE.gc_held
    GATE.release()
    assert not held, "the app ended with garbage collection still paused by a key"


@pytest.fixture
def make_app() -> AppFactory:
    def make(source: FrozenSource | None = None, **options: Any) -> DeckApp:
        src = source if source is not None else FrozenSource()
        return DeckApp(src, options=UiOptions(simulated=True, **options), profiles=load_profiles(), clock=clock)

    return make
