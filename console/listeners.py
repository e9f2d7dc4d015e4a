"""Subscribing a callback to an object that notifies from its own threads (hub, lifecycle, log buffer)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

L = TypeVar("L")


def add_listener(listeners: list[L], lock: AbstractContextManager[Any], listener: L) -> Callable[[], None]:
    """Append ``listener`` under ``lock`` (the owner's: it also guards the list while notifying) and
    return the function that removes it again; calling that twice is harmless."""
    with lock:
        listeners.append(listener)

    def unsubscribe() -> None:
        with lock:
            if listener in listeners:
                listeners.remove(listener)

    return unsubscribe
