"""Export a recording: OpenMetrics text (``promtool tsdb create-blocks-from openmetrics`` loads it into
Prometheus blocks, so an incident opens in your own Grafana) and CSV (one row a sample).

OpenMetrics wants each family's samples together and each series' timestamps increasing, while a
recording is in time order: one pass over the documents writes each family to its own temporary
file, which are then joined, so a day of recording never has to fit in memory. Documents whose
time is not after the previous one's (a clock set back) are left out of both exports.
"""

from __future__ import annotations

import csv
import math
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from console.recording.series import HELP, Labels, doc_series

Docs = Iterable[tuple[float, dict[str, Any]]]


def _increasing(docs: Docs) -> Iterable[tuple[float, dict[str, Any]]]:
    last = -math.inf
    for t, doc in docs:
        if t > last:
            last = t
            yield t, doc


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}" if labels else ""


def _value(v: float) -> str:
    return repr(float(v)) if not v.is_integer() else str(int(v)) if abs(v) < 2**53 else repr(v)


def write_openmetrics(docs: Docs, out: IO[str]) -> int:
    """Every sample of ``docs`` as OpenMetrics text (``# EOF`` at the end); returns the sample count."""
    count = 0
    with tempfile.TemporaryDirectory(prefix="enginedeck-export-") as tmp:
        parts: dict[str, IO[str]] = {}
        try:
            for t, doc in _increasing(docs):
                ts = f"{t:.3f}"
                for family, labels, value in doc_series(doc):
                    f = parts.get(family)
                    if f is None:
                        f = parts[family] = open(Path(tmp) / f"{len(parts)}.txt", "w+", encoding="utf-8")  # noqa: SIM115
                    f.write(f"{family}{_labels(labels)} {_value(value)} {ts}\n")
                    count += 1
            for family, f in parts.items():
                out.write(f"# HELP {family} {HELP.get(family, family)}\n# TYPE {family} gauge\n")
                f.seek(0)
                while chunk := f.read(1 << 20):
                    out.write(chunk)
        finally:
            for f in parts.values():
                f.close()
    out.write("# EOF\n")
    return count


CSV_COLUMNS = ("time", "time_utc", "metric", "engine", "profile", "model", "gpu", "value")


def write_csv(docs: Docs, out: IO[str]) -> int:
    """One row per sample: time (unix), time (UTC, ISO 8601), metric, its labels, value."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    count = 0
    for t, doc in _increasing(docs):
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"
        for family, labels, value in doc_series(doc):
            d = dict(labels)
            w.writerow((f"{t:.3f}", iso, family, d.get("engine", ""), d.get("profile", ""), d.get("model", ""),
                        d.get("gpu", ""), _value(value)))
            count += 1
    return count
