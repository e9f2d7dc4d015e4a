"""The bundle's window: ``--last 15m`` read as seconds, and the span it covers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.errors import UserError

DEFAULT_LAST_S = 15 * 60
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``2h``, ``1d`` in seconds; a one-line ``UserError`` otherwise."""
    m = _DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        raise UserError(f"--last {text!r}: give a positive duration such as 90s, 15m or 2h")
    return float(m.group(1)) * _UNITS[(m.group(2) or "s").lower()]


@dataclass(frozen=True, slots=True)
class Window:
    start: float  # wall-clock seconds
    end: float

    @classmethod
    def last(cls, seconds: float, now: float) -> Window:
        return cls(now - seconds, now)

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def doc(self) -> dict[str, float]:
        return {"start": round(self.start, 3), "end": round(self.end, 3), "seconds": round(self.seconds, 3)}


def duration_text(seconds: float) -> str:
    """``900`` -> ``15m``; ``5400`` -> ``1h30m``; ``42`` -> ``42s``."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{sec}s" if sec or not (h or m) else ""]
    return "".join(parts)
