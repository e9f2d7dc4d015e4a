"""Prometheus text exposition the way each real engine's library writes it.

- ``render_client``: Python ``prometheus_client`` (vLLM, SGLang, trtllm): counters get ``_total``,
  ``_created`` samples go in a separate gauge family after each family (single-process registry
  only), labels sorted, floats written by ``floatToGoString``. The multiprocess registry (SGLang,
  trtllm) has no ``_created`` and writes a histogram's ``_sum`` first.
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


def go_float(d: float) -> str:
    """prometheus_client.utils.floatToGoString."""
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(float(d))
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


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


def render_client(families: Iterable[Family], *, created: bool, multiprocess: bool) -> str:
    out: list[str] = []
    for f in families:
        mname = f.name + "_total" if f.kind == "counter" else f.name
        out.append(f"# HELP {mname} {f.help}\n# TYPE {mname} {f.kind}\n")
        created_lines: list[str] = []
        if f.kind == "histogram":
            for labels, h in f.hists:
                cum = h.cumulative()
                bucket_lines = [
                    f"{f.name}_bucket{_labelstr((*labels, ('le', go_float(b))))} {go_float(float(c))}\n"
                    for b, c in zip((*h.bounds, math.inf), cum, strict=True)
                ]
                ls = _labelstr(labels)
                sum_line = f"{f.name}_sum{ls} {go_float(h.sum)}\n"
                count_line = f"{f.name}_count{ls} {go_float(float(h.count))}\n"
                if multiprocess:
                    out.append(sum_line)
                    out.extend(bucket_lines)
                    out.append(count_line)
                else:
                    out.extend(bucket_lines)
                    out.append(count_line)
                    out.append(sum_line)
                if created:
                    created_lines.append(f"{f.name}_created{ls} {go_float(f.created)}\n")
        else:
            for labels, v in f.values:
                ls = _labelstr(labels)
                out.append(f"{mname}{ls} {go_float(v)}\n")
                if created and f.kind == "counter":
                    created_lines.append(f"{f.name}_created{ls} {go_float(f.created)}\n")
        if created_lines:
            out.append(f"# HELP {f.name}_created {f.help}\n# TYPE {f.name}_created gauge\n")
            out.extend(created_lines)
    return "".join(out)


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


def render_openmetrics(families: Iterable[Family], *, created: bool, multiprocess: bool, eof: bool = True,
                       escaping: str = "underscores") -> str:
    """prometheus_client's OpenMetrics 1.0 writer: ``_created`` inline per series, ``# EOF`` at the end.

    Like prometheus_client 0.26, sample names (not HELP/TYPE names) are escaped with the label-name
    rules unless the scraper asked for ``escaping=allow-utf-8``: ``vllm:x_total`` is written
    ``vllm_x_total``.
    """
    out: list[str] = []
    for fam in families:
        f = fam
        if escaping != "allow-utf-8" and ":" in fam.name:
            out.append(f"# HELP {fam.name} {fam.help}\n# TYPE {fam.name} {fam.kind}\n")
            f = Family(fam.name.replace(":", "_"), fam.kind, fam.help, fam.values, fam.hists, fam.created)
        else:
            out.append(f"# HELP {f.name} {f.help}\n# TYPE {f.name} {f.kind}\n")
        if f.kind == "histogram":
            for labels, h in f.hists:
                ls = _labelstr(labels)
                buckets = [f"{f.name}_bucket{_labelstr((*labels, ('le', go_float(b))))} {go_float(float(c))}\n"
                           for b, c in zip((*h.bounds, math.inf), h.cumulative(), strict=True)]
                count = f"{f.name}_count{ls} {go_float(float(h.count))}\n"
                total = f"{f.name}_sum{ls} {go_float(h.sum)}\n"
                out.extend([total, *buckets, count] if multiprocess else [*buckets, count, total])
                if created:
                    out.append(f"{f.name}_created{ls} {go_float(f.created)}\n")
        else:
            suffix = "_total" if f.kind == "counter" else ""
            for labels, v in f.values:
                ls = _labelstr(labels)
                out.append(f"{f.name}{suffix}{ls} {go_float(v)}\n")
                if created and f.kind == "counter":
                    out.append(f"{f.name}_created{ls} {go_float(f.created)}\n")
    if eof:
        out.append("# EOF\n")
    return "".join(out)


PLAIN_0_0_4 = "text/plain; version=0.0.4; charset=utf-8"


def negotiate(accept: str) -> tuple[bool, str, str]:
    """prometheus_client's choose_encoder: (OpenMetrics?, Content-Type, escaping) for an Accept header."""
    for accepted in accept.split(","):
        toks = accepted.split(";")
        media = toks[0].strip()
        params = dict(t.strip().split("=", 1) for t in toks[1:] if "=" in t)
        version = params.get("version", "")
        escaping = params.get("escaping", "underscores")
        if escaping not in ("allow-utf-8", "underscores", "dots", "values"):
            escaping = "underscores"
        if media == "application/openmetrics-text":
            if not version:
                return True, "application/openmetrics-text; version=1.0.0; charset=utf-8", "underscores"
            if _version(version) >= (1, 0, 0):
                ctype = f"application/openmetrics-text; version={version}; charset=utf-8; escaping={escaping}"
                return True, ctype, escaping
        elif media == "text/plain" and version and _version(version) >= (1, 0, 0):
            return False, f"text/plain; version=1.0.0; charset=utf-8; escaping={escaping}", escaping
    return False, PLAIN_0_0_4, "underscores"


def _version(v: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in v.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)
