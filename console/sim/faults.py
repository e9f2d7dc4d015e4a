"""``--fault`` option parsing. Each fault is ``name`` or ``name=value``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Faults:
    slow_metrics: float = 0.0  # seconds added before every metrics answer
    hang_metrics: bool = False  # metrics never answer
    garbage_metrics: bool = False  # metrics answer 200 with junk bytes
    error_rate: float = 0.0  # fraction of completions answered with HTTP 500
    stall_start: float | None = None  # seconds after ready when decoding stops
    stall_seconds: float = 0.0
    crash_after: float | None = None  # process exits with code 1 this long after start


def parse_faults(items: list[str]) -> Faults:
    """Parse ``--fault`` values; raises ValueError with a one-line message."""
    f = Faults()
    for item in items:
        name, _, value = item.partition("=")
        name = name.strip()
        try:
            if name == "slow-metrics":
                f.slow_metrics = _positive(value)
            elif name == "hang-metrics":
                f.hang_metrics = True
            elif name == "garbage-metrics":
                f.garbage_metrics = True
            elif name == "error-rate":
                f.error_rate = float(value)
                if not 0.0 <= f.error_rate <= 1.0:
                    raise ValueError
            elif name == "stall":
                start, _, secs = value.partition(":")
                f.stall_start = float(start)
                f.stall_seconds = _positive(secs)
            elif name == "crash-after":
                f.crash_after = _positive(value)
            else:
                raise KeyError(name)
        except KeyError:
            raise ValueError(
                f"unknown fault {name!r} (known: slow-metrics=S, hang-metrics, garbage-metrics, error-rate=F, "
                "stall=START:S, crash-after=S)"
            ) from None
        except ValueError:
            raise ValueError(f"bad value in --fault {item!r}") from None
    return f


def _positive(value: str) -> float:
    v = float(value)
    if v < 0:
        raise ValueError
    return v
