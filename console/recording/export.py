"""Export a recording: OpenMetrics text (``promtool tsdb create-blocks-from openmetrics`` loads it into
Prometheus blocks, so an incident opens in your own Grafana) and CSV (one row a sample).

OpenMetrics wants each family's samples together and each series' timestamps increasing, while a
recording is in time order: one pass over the documents writes each family to its own temporary
file, which are then joined, so a day of recording never has to fit in memory. Documents whose
time is not after the previous one's (a clock set back) are left out of both exports, and so is a
document that is not the status document it claims to be (``"engines": "x"``, a number where a
list belongs): it is counted in ``Skipped``, never half written.

Label values are what engines said (model ids, engine names): both exports make them inert
(``console.textsafe``: an escape sequence shows as ``␛[2J``, it cannot act on a terminal the file
is printed to). CSV cells that would start with ``=``, ``+``, ``-`` or ``@`` get a leading ``'``,
so a spreadsheet shows them as text instead of running them as a formula.
"""

from __future__ import annotations

import csv
import functools
import math
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from console.recording.series import HELP, Labels, Sample, doc_series
from console.textsafe import inert

Docs = Iterable[tuple[float, dict[str, Any]]]
_FORMULA_START = ("=", "+", "-", "@")


@dataclass(slots=True)
class Skipped:
    """Documents left out of an export because they are not status documents."""

    count: int = 0
    reason: str = ""


def _samples(docs: Docs, skipped: Skipped | None) -> Iterator[tuple[float, list[Sample]]]:
    """Each document's samples, documents in increasing time; a document whose parts are of the
    wrong types is left out whole (and counted) rather than ending the export."""
    last = -math.inf
    for t, doc in docs:
        if t <= last:
            continue
        try:
            samples = list(doc_series(doc))
        except (TypeError, KeyError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
            if skipped is not None:
                skipped.count += 1
                skipped.reason = skipped.reason or f"{type(exc).__name__}: {exc}"
            continue
        last = t
        yield t, samples


def _escape(v: str) -> str:
    return inert(v).replace("\\", "\\\\").replace('"', '\\"')


@functools.lru_cache(maxsize=4096)
def _labels(labels: Labels) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}" if labels else ""


def _value(v: float) -> str:
    return repr(float(v)) if not v.is_integer() else str(int(v)) if abs(v) < 2**53 else repr(v)


def write_openmetrics(docs: Docs, out: IO[str], skipped: Skipped | None = None) -> int:
    """Every sample of ``docs`` as OpenMetrics text (``# EOF`` at the end); returns the sample count."""
    count = 0
    with tempfile.TemporaryDirectory(prefix="enginedeck-export-") as tmp:
        parts: dict[str, IO[str]] = {}
        try:
            for t, samples in _samples(docs, skipped):
                ts = f"{t:.3f}"
                for family, labels, value in samples:
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


def _cell(text: str) -> str:
    """A label value as a CSV cell: inert, and never read as a formula."""
    text = inert(text)
    return "'" + text if text.startswith(_FORMULA_START) else text


@functools.lru_cache(maxsize=4096)
def _label_cells(labels: Labels) -> tuple[str, str, str, str]:
    d = dict(labels)
    return _cell(d.get("engine", "")), _cell(d.get("profile", "")), _cell(d.get("model", "")), _cell(d.get("gpu", ""))


def write_csv(docs: Docs, out: IO[str], skipped: Skipped | None = None) -> int:
    """One row per sample: time (unix), time (UTC, ISO 8601), metric, its labels, value."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    count = 0
    for t, samples in _samples(docs, skipped):
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"
        for family, labels, value in samples:
            w.writerow((f"{t:.3f}", iso, family, *_label_cells(labels), _value(value)))
            count += 1
    return count
