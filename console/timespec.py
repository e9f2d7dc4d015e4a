"""What a user types for times, durations and sizes: ``10m ago``, ``19:05``, ``2026-12-01 19:05:30``,
a unix time; ``48h``, ``90s``, ``7d``; ``1GB``, ``500MiB``. Each parser raises ``ValueError`` with a
one-line message that shows what is accepted.
"""

from __future__ import annotations

import re
import time
from datetime import datetime

_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)?\s*$", re.IGNORECASE)
_SIZES = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
TIME_HELP = "'10m ago', '19:05', '2026-12-01 19:05:30' (local time) or a unix time"


def parse_duration(text: str) -> float:
    """Seconds in ``48h``, ``30m``, ``90`` (seconds), ``7d``."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"not a duration: {text!r} (say e.g. 90s, 30m, 48h, 7d)")
    return float(m.group(1)) * _UNITS[(m.group(2) or "s").lower()]


def parse_size(text: str) -> int:
    """Bytes in ``1GB``, ``500MB``, ``2GiB``, ``1000000``."""
    m = _SIZE.match(text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _SIZES:
        raise ValueError(f"not a size: {text!r} (say e.g. 500MB, 1GB, 2GiB)")
    return int(float(m.group(1)) * _SIZES[unit])


def parse_time(text: str, *, now: float | None = None) -> float:
    """A unix time from ``10m ago``, ``now``, a clock time today (``19:05``), a date and time, or a
    unix time."""
    now = time.time() if now is None else now
    s = text.strip().lower()
    if s == "now":
        return now
    if s.endswith("ago"):
        return now - parse_duration(s[:-3])
    if re.fullmatch(r"\d{9,}(\.\d+)?", s):
        return float(s)
    if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", s):
        day = datetime.fromtimestamp(now).strftime("%Y-%m-%d")
        s = f"{day} {s}"
    try:
        return datetime.fromisoformat(s.upper().replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ValueError(f"not a time: {text!r} (say {TIME_HELP})") from None
