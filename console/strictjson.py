"""Strict JSON for documents the console prints: never ``NaN`` or ``Infinity`` (not JSON).

A non-finite float becomes ``null``, which every document here already defines as n/a.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["dumps", "finite"]


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (at any depth) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(doc: Any, *, indent: int | None = None) -> str:
    """``json.dumps`` that cannot emit NaN/Infinity (they are null)."""
    return json.dumps(finite(doc), indent=indent, allow_nan=False)
