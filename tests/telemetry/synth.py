"""Synthetic payloads written the way the engines write them.

prometheus_client style (vLLM, SGLang, trtllm-serve): ``# HELP``/``# TYPE`` pairs, counters named
``*_total``, values as Python float reprs (``1.0``, ``+Inf``), histogram lines in the order
``_bucket`` ... ``_count``, ``_sum``, then a ``*_created`` gauge family. TGI
(metrics-exporter-prometheus): counters without ``_total``, ``_sum``/``_count`` after the buckets,
no ``_created``. llama.cpp: no labels at all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

LabelDict = Mapping[str, str]

VLLM_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                     20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip


def fmt(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def labels(d: LabelDict) -> str:
    if not d:
        return ""
    inner = ",".join(f'{k}="{_esc(v)}"' for k, v in d.items())
    return "{" + inner + "}"


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def simple(name: str, kind: str, series: Sequence[tuple[LabelDict, float]], help_text: str = "", *,
           created: bool = False) -> str:  # fmt: skip
    """A gauge or counter family (prometheus_client layout, optional ``_created`` family)."""
    out = [f"# HELP {name} {help_text or name}", f"# TYPE {name} {kind}"]
    out += [f"{name}{labels(lab)} {fmt(v)}" for lab, v in series]
    if created and kind == "counter":
        base = name.removesuffix("_total")
        out += [f"# HELP {base}_created {help_text or name}", f"# TYPE {base}_created gauge"]
        out += [f"{base}_created{labels(lab)} 1.7958e+09" for lab, _ in series]
    return "\n".join(out) + "\n"


def histogram(
    name: str,
    series: Sequence[tuple[LabelDict, Sequence[tuple[float, float]], float]],
    help_text: str = "",
    *,
    created: bool = True,
    le_first: bool = False,
) -> str:
    """A histogram family. Each series: (labels, [(upper bound, cumulative count)...] with +Inf, sum)."""
    out = [f"# HELP {name} {help_text or name}", f"# TYPE {name} histogram"]
    for lab, buckets, total in series:
        for le, cum in buckets:
            le_s = "+Inf" if math.isinf(le) else repr(float(le))
            merged = {"le": le_s, **lab} if le_first else {**lab, "le": le_s}
            out.append(f"{name}_bucket{labels(merged)} {fmt(cum)}")
        count = buckets[-1][1] if buckets else 0.0
        out.append(f"{name}_count{labels(lab)} {fmt(count)}")
        out.append(f"{name}_sum{labels(lab)} {fmt(total)}")
    if created:
        out += [f"# HELP {name}_created {help_text or name}", f"# TYPE {name}_created gauge"]
        out += [f"{name}_created{labels(lab)} 1.7958e+09" for lab, _, _ in series]
    return "\n".join(out) + "\n"


def cumulative(bounds: Sequence[float], per_bucket: Sequence[float]) -> list[tuple[float, float]]:
    """Per-bucket counts (len(bounds) + 1, the last for +Inf) -> cumulative (le, count) pairs."""
    assert len(per_bucket) == len(bounds) + 1
    out: list[tuple[float, float]] = []
    running = 0.0
    for le, n in zip([*bounds, math.inf], per_bucket, strict=True):
        running += n
        out.append((le, running))
    return out
