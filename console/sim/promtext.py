"""The simulator's metric families, and the exposition of the engine that does not use prometheus_client.

vLLM, SGLang and trtllm are rendered and served by prometheus_client itself (``exposition.py``).
- ``render_rust``: ``metrics-exporter-prometheus`` (TGI): literal counter names, no HELP, no
  ``_created``, a blank line after each family, numbers like Rust's ``f64`` Display.
llama.cpp hand-writes its own text; see ``console/sim/engines/llamacpp.py``.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]


class Histogram:
    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # last slot: above every bound (+Inf only)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.counts[bisect_left(self.bounds, v)] += 1
        self.sum += v
        self.count += 1

    def cumulative(self) -> list[int]:
        out: list[int] = []
        acc = 0
        for c in self.counts:
            acc += c
            out.append(acc)
        return out


@dataclass
class Family:
    """One metric family. ``name`` is the declared name (a counter without ``_total``)."""

    name: str
    kind: str  # counter | gauge | histogram
    help: str
    values: list[tuple[Labels, float]] = field(default_factory=list)
    hists: list[tuple[Labels, Histogram]] = field(default_factory=list)
    created: float = 0.0


def rust_float(d: float) -> str:
    """Rust ``f64`` Display: integral values without a fraction, never exponent notation."""
    if math.isinf(d):
        return "+Inf" if d > 0 else "-Inf"
    if d == int(d) and abs(d) < 1e16:
        return str(int(d))
    s = repr(float(d))
    if "e" in s:
        s = f"{d:.20f}".rstrip("0")
    return s


def _esc(v: str) -> str:
    return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _labelstr(labels: Iterable[tuple[str, str]]) -> str:
    items = sorted(labels)
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in items) + "}"


def render_rust(families: Iterable[Family]) -> str:
    """metrics-exporter-prometheus: counters, then gauges, then histograms, each sorted by name."""
    order = {"counter": 0, "gauge": 1, "histogram": 2}
    out: list[str] = []
    for f in sorted(families, key=lambda f: (order[f.kind], f.name)):
        out.append(f"# TYPE {f.name} {f.kind}\n")
        if f.kind == "histogram":
            for labels, h in f.hists:
                cum = h.cumulative()
                for b, c in zip((*h.bounds, math.inf), cum, strict=True):
                    le = "+Inf" if b == math.inf else rust_float(b)
                    out.append(f"{f.name}_bucket{_labelstr((*labels, ('le', le)))} {c}\n")
                ls = _labelstr(labels)
                out.append(f"{f.name}_sum{ls} {rust_float(h.sum)}\n")
                out.append(f"{f.name}_count{ls} {h.count}\n")
        else:
            for labels, v in f.values:
                out.append(f"{f.name}{_labelstr(labels)} {rust_float(v)}\n")
        out.append("\n")
    return "".join(out)
