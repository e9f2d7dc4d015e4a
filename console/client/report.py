"""Comparison tables (rows = metrics, columns = engines, then B/A) and JSON/CSV/Markdown export.

With repeats a cell shows the median and, when the repeats disagree, the min-max range.
"""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from console.client.bench import DIRECTION, SAME_BAND, Direction, Verdict, verdict
from console.target import api_key_from_env

# (key in summary, row label, format): which way is better is the summary's own (bench.DIRECTION).
ROWS: tuple[tuple[str, str, str], ...] = (
    ("completed", "requests ok", "{:.0f}"),
    ("failed", "requests failed", "{:.0f}"),
    ("cut", "requests cut at max duration", "{:.0f}"),
    ("ttft_p50_ms", "TTFT p50 (ms)", "{:.1f}"),
    ("ttft_p90_ms", "TTFT p90 (ms)", "{:.1f}"),
    ("ttft_p99_ms", "TTFT p99 (ms)", "{:.1f}"),
    ("tpot_p50_ms", "TPOT p50 (ms)", "{:.2f}"),
    ("tpot_p90_ms", "TPOT p90 (ms)", "{:.2f}"),
    ("tpot_p99_ms", "TPOT p99 (ms)", "{:.2f}"),
    ("itl_p50_ms", "ITL/token p50 (ms)", "{:.2f}"),
    ("itl_p90_ms", "ITL/token p90 (ms)", "{:.2f}"),
    ("itl_p99_ms", "ITL/token p99 (ms)", "{:.2f}"),
    ("e2e_p50_ms", "E2E p50 (ms)", "{:.0f}"),
    ("e2e_p90_ms", "E2E p90 (ms)", "{:.0f}"),
    ("e2e_p99_ms", "E2E p99 (ms)", "{:.0f}"),
    ("request_tput", "requests/s", "{:.2f}"),
    ("steady_output_tput", "output tok/s (steady)", "{:.1f}"),
    ("output_tput", "output tok/s (whole run)", "{:.1f}"),
    ("goodput", "goodput (req/s)", "{:.2f}"),
    ("slo_attainment", "SLO attainment", "{:.1%}"),
    ("error_rate", "error rate", "{:.1%}"),
    ("prompt_tokens_mean", "prompt tokens (server, mean)", "{:.1f}"),
    ("output_tokens_mean", "output tokens (mean)", "{:.1f}"),
    ("prefix_hit_rate", "prefix hit rate (engine)", "{:.1%}"),
    ("kv_usage_peak", "KV usage peak (engine)", "{:.1%}"),
    ("preemptions", "preemptions (engine)", "{:.0f}"),
    ("server_ttft_p50_ms", "server TTFT p50 (ms)", "{:.1f}"),
    # The engine's p50 is interpolated in a histogram bucket, the client's is exact: the difference
    # is the overhead ± that bucket's width, so it can read negative (the name says so).
    ("client_minus_server_ttft_p50_ms", "client-server TTFT p50 (ms, ±bucket)", "{:.2f}"),
    ("gpu_util_mean", "GPU util mean (%)", "{:.0f}"),
    ("gpu_power_mean_w", "GPU power mean (W)", "{:.0f}"),
    ("tokens_per_joule", "tokens per joule", "{:.2f}"),
    ("joules_per_1k_output", "J per 1k output tokens", "{:.0f}"),
    ("joules_per_response", "J per response", "{:.1f}"),
    ("client_cpu_percent", "client CPU (%)", "{:.0f}"),
    ("loop_lag_p99_ms", "client loop lag p99 (ms)", "{:.2f}"),
    ("schedule_lag_p99_ms", "schedule lag p99 (ms)", "{:.2f}"),
)
NA = "n/a"
# B/A marks: the glyph and the word say it without colour ("better" by the metric's own direction,
# so a lower TTFT and a higher throughput both read ▲).
MARKS: dict[Verdict, tuple[str, str]] = {"better": ("▲", "better"), "worse": ("▼", "worse"), "same": ("≈", "same")}
LEGEND = (f"B/A: ▲ better, ▼ worse by each metric's direction (lower times, higher rates), ≈ same within "
          f"{SAME_BAND:.0%}; no mark: neither (token counts, GPU load)")


def _fmt(cell: dict[str, Any] | None, fmt: str) -> str:
    if not cell:
        return NA
    med = fmt.format(cell["median"])
    if cell.get("n", 1) > 1 and cell["min"] != cell["max"]:
        return f"{med} ({fmt.format(cell['min'])}-{fmt.format(cell['max'])})"
    return med


def mark(v: Verdict | None, *, words: bool = True) -> str:
    """``▲ better``, ``▼ worse``, ``≈ same`` (just the glyph without ``words``); "" for no verdict."""
    if v is None:
        return ""
    glyph, word = MARKS[v]
    return f"{glyph} {word}" if words else glyph


def ba_cell(ratio: float | None, v: Verdict | None, *, words: bool = True) -> str:
    """The B/A cell: the ratio of the medians and the mark, e.g. ``0.73x ▲ better``; only the mark
    where there is no ratio (A was 0: ``▼ worse`` for 0 failures against 3), ``n/a`` without either."""
    m = mark(v, words=words)
    if ratio is None:
        return m or NA
    return f"{ratio:.2f}x {m}" if m else f"{ratio:.2f}x"


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """One metric of one level: its cells per engine and, with two engines or more, B/A and the verdict."""

    key: str
    label: str
    cells: tuple[str, ...]
    ratio: float | None
    verdict: Verdict | None
    direction: Direction


def comparison_rows(level: dict[str, Any], names: Sequence[str]) -> list[ComparisonRow]:
    """The rows of one level's table (a row no engine has is left out, but for the few that say
    why they are n/a). The verdict comes from the direction table, so a document saved before it
    was written into the JSON reads the same."""
    rows = []
    for key, label, fmt in ROWS:
        cells = tuple(_fmt(level["engines"][n].get(key), fmt) for n in names)
        if all(c == NA for c in cells) and key not in ("prefix_hit_rate", "tokens_per_joule", "kv_usage_peak"):
            continue  # a row nobody has (e.g. goodput without SLOs) is left out
        if key == "cut" and all(c in ("0", NA) for c in cells):
            continue  # only a run --max-duration cut short has any
        two = len(names) >= 2
        a, b = (level["engines"][names[0]].get(key), level["engines"][names[1]].get(key)) if two else (None, None)
        rows.append(ComparisonRow(
            key, label, cells, level.get("ratio_b_a", {}).get(key) if two else None,
            verdict(key, a, b) if two else None, DIRECTION.get(key, "neutral"),
        ))  # fmt: skip
    return rows


def table_rows(level: dict[str, Any], names: Sequence[str], *, words: bool = True) -> list[list[str]]:
    """Rows of one level's table as text: label, one cell per engine, B/A with its mark (two or more engines)."""
    out = []
    for row in comparison_rows(level, names):
        line = [row.label, *row.cells]
        if len(names) >= 2:
            line.append(ba_cell(row.ratio, row.verdict, words=words))
        out.append(line)
    return out


def _label(doc: dict[str, Any], name: str) -> str:
    for e in doc.get("engines", []):
        if e["name"] == name:
            return str(e.get("label") or name)
    return name


def column_labels(doc: dict[str, Any]) -> list[str]:
    """The engines' column titles, in the summary's order."""
    return [_label(doc, n) for n in doc["summary"]["engines"]]


def level_notes(doc: dict[str, Any], level: dict[str, Any]) -> list[str]:
    """What to know before reading a level's figures: length mode, client-bound, bundling, n/a..."""
    notes = []
    for name, f in level["flags"].items():
        bits = [f"length: {f['length_mode']}"]
        if f["client_bound"]:
            why = ", ".join(f.get("client_bound_reasons") or [])
            bits.append(f"CLIENT-BOUND ({why}): latencies include client/host delay")
        if f["bundled"]:
            bits.append("chunk bundling (per-token ITL corrected)")
        if f["tokens_estimated"]:
            bits.append("token counts estimated (no usage)")
        if not f["server_metrics"]:
            bits.append(f"engine metrics n/a{': ' + f['server_metrics_error'] if f['server_metrics_error'] else ''}")
        if f.get("stopped_early"):
            bits.append(f"STOPPED EARLY: {f['stopped_early']}")
        if f.get("gpu_reason"):
            bits.append(f"GPU n/a: {f['gpu_reason']}")
        notes.append(f"{_label(doc, name)}: " + "; ".join(bits))
    modes = {f["length_mode"] for f in level["flags"].values()}
    if len(modes) > 1:
        notes.append("output length forced differently on the engines (" + ", ".join(sorted(m or "?" for m in modes))
                     + "): they did different work; compare per-token metrics (TTFT, TPOT, ITL) only")
    return notes


def render_text(doc: dict[str, Any], width: int = 160) -> str:
    """The comparison as rich tables rendered to plain text (for the CLI), at most ``width`` wide."""
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)
    names = doc["summary"]["engines"]
    if doc.get("interrupted"):
        console.print(f"INTERRUPTED: {_interrupted_note(doc)}\n")
    for level in doc["summary"]["levels"]:
        title = f"{level['label']}  ·  {_workload_line(doc)}"
        t = Table(title=title, title_justify="left", show_lines=False)
        t.add_column("metric")
        labels = column_labels(doc)
        for lab in labels:
            t.add_column(lab, justify="right")
        if len(names) >= 2:
            t.add_column(f"{labels[1]}/{labels[0]}", justify="right")
        for row in table_rows(level, names):
            t.add_row(*row)
        console.print(t)
        for note in level_notes(doc, level):
            console.print(f"  {note}")
        console.print()
    if len(names) >= 2:
        console.print(LEGEND, soft_wrap=True)
    check = doc.get("prompt_token_check", {})
    if check.get("compared"):
        if check.get("ok"):
            console.print(f"prompt tokens: identical on every engine ({check['compared']} requests compared)")
        else:
            console.print(
                f"WARNING prompt tokens differ for {check['mismatches']} of {check['compared']} requests "
                "(different tokenizer or chat template: not the same work)"
            )
    return buf.getvalue()


def _interrupted_note(doc: dict[str, Any]) -> str:
    done = len(doc["summary"]["levels"])
    return f"stopped by Ctrl-C; {done} of {len(doc['config']['levels'])} level(s) finished and are shown"


def _workload_line(doc: dict[str, Any]) -> str:
    cfg = doc["config"]
    w = cfg["workload"]
    rep = f", {cfg['repeats']} repeats ABBA" if cfg["repeats"] > 1 else ""
    if w["kind"] == "file":
        return f"file {w.get('path')} out<={w['output_len']}, {cfg['endpoint']}{rep}"
    return f"{w['kind']} in={w['input_len']} out={w['output_len']}, {cfg['endpoint']}{rep}"


def to_markdown(doc: dict[str, Any]) -> str:
    names = doc["summary"]["engines"]
    labels = column_labels(doc)
    out = [f"# Benchmark: {' vs '.join(labels)}", ""]
    if doc.get("interrupted"):
        out += [f"**Interrupted**: {_interrupted_note(doc)}", ""]
    out += [f"Workload: {_workload_line(doc)}", ""]
    out.extend(f"- {lab}: {e['profile']} at {e['url']}, model {e['model']}" for lab, e in zip(labels, doc["engines"],
                                                                                          strict=False))
    out.append("")
    for level in doc["summary"]["levels"]:
        out.append(f"## {level['label']}")
        out.append("")
        header = ["metric", *labels] + ([f"{labels[1]}/{labels[0]}"] if len(names) >= 2 else [])
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for row in table_rows(level, names):
            out.append("| " + " | ".join(row) + " |")
        out.append("")
        out.extend(f"- {n}" for n in level_notes(doc, level))
        out.append("")
    if len(names) >= 2:
        out += [LEGEND, ""]
    out.append("Definitions: TTFT = first token-bearing event - send; TPOT = (t_last - t_first)/(N-1); "
               "ITL/token = each chunk gap split over the tokens it carried; throughput (steady) counts tokens "
               "arriving between the end of warmup and the last send. See docs/bench-json-schema.md.")  # fmt: skip
    return "\n".join(out) + "\n"


def to_csv(doc: dict[str, Any]) -> str:
    """Long format: level, engine, metric, median, min, max, n, direction (which way is better), plus
    B/A rows with their verdict; an interrupted run starts with a ``# interrupted: ...`` comment line."""
    buf = io.StringIO()
    if doc.get("interrupted"):
        buf.write(f"# interrupted: {_interrupted_note(doc)}\n")
    w = csv.writer(buf)
    w.writerow(["level", "engine", "metric", "median", "min", "max", "n", "direction", "verdict"])
    names = doc["summary"]["engines"]
    for level in doc["summary"]["levels"]:
        for name, metrics in level["engines"].items():
            for key, cell in metrics.items():
                if cell:
                    w.writerow([level["label"], name, key, cell["median"], cell["min"], cell["max"], cell["n"],
                                DIRECTION.get(key, "neutral"), ""])  # fmt: skip
        if len(names) < 2:
            continue
        a, b = level["engines"][names[0]], level["engines"][names[1]]
        for key, r in level["ratio_b_a"].items():
            v = verdict(key, a.get(key), b.get(key))
            if r is not None or v is not None:
                w.writerow([level["label"], "B/A", key, "" if r is None else r, "", "", "",
                            DIRECTION.get(key, "neutral"), v or ""])  # fmt: skip
    return buf.getvalue()


def scrubbed(doc: dict[str, Any]) -> dict[str, Any]:
    """The document as it may leave the process: the engines' API keys (and anything else the one
    secret rule recognises, e.g. in an engine's error message) replaced by ``****``."""
    from console.secrets import Scrubber

    keys = (api_key_from_env(e.get("api_key_env")) for e in doc.get("engines", []))
    out: dict[str, Any] = Scrubber(k for k in keys if k).data(doc)
    return out


def write_outputs(doc: dict[str, Any], *, json_path: str | None, csv_path: str | None, md_path: str | None) -> None:
    doc = scrubbed(doc)
    if json_path:
        Path(json_path).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    if csv_path:
        Path(csv_path).write_text(to_csv(doc), encoding="utf-8")
    if md_path:
        Path(md_path).write_text(to_markdown(doc), encoding="utf-8")


_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def save_results(doc: dict[str, Any], folder: Path, *, stamp: str | None = None) -> tuple[Path, Path]:
    """Write the results as JSON and Markdown into ``folder`` (made if missing), named
    ``enginedeck-bench-STAMP-A-vs-B``; a name already taken gets ``-2``, ``-3``... Returns both paths."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    engines = "-vs-".join(_UNSAFE_IN_NAME.sub("_", lab).strip("._-")[:40] or "engine" for lab in column_labels(doc))
    base = f"enginedeck-bench-{stamp}" + (f"-{engines}" if engines else "")
    n = 1
    while True:
        name = base if n == 1 else f"{base}-{n}"
        json_path, md_path = folder / f"{name}.json", folder / f"{name}.md"
        if not json_path.exists() and not md_path.exists():
            break
        n += 1
    write_outputs(doc, json_path=str(json_path), csv_path=None, md_path=str(md_path))
    return json_path, md_path
