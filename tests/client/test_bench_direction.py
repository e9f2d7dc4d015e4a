"""Which way is better for each bench metric (one table, console/client/bench.py), the B/A verdict and
its marks (▲ better / ▼ worse / ≈ same, readable without colour), as the screen, the printed table,
Markdown, CSV and the JSON document carry them."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.client.bench import DIRECTION, SAME_BAND, SUMMARY_METRICS, BenchConfig, combine, plan_line, verdict
from console.client.loadgen import LevelSpec
from console.client.progress import LevelProgress
from console.client.report import LEGEND, ROWS, ba_cell, comparison_rows, mark, render_text, to_csv, to_markdown

from .simproc import sims


def cell(median: float, lo: float | None = None, hi: float | None = None, n: int = 1) -> dict[str, Any]:
    return {"median": median, "min": median if lo is None else lo, "max": median if hi is None else hi, "n": n}


def test_every_metric_has_a_direction_and_the_table_reads_it() -> None:
    assert {key for key, _, _ in SUMMARY_METRICS} == set(DIRECTION)
    assert {key for key, _, _ in ROWS} <= set(DIRECTION)
    assert set(DIRECTION.values()) == {"lower", "higher", "neutral"}
    for key in ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "itl_p99_ms", "e2e_p50_ms", "failed", "error_rate",
                "preemptions", "joules_per_1k_output"):
        assert DIRECTION[key] == "lower", key
    for key in ("request_tput", "output_tput", "steady_output_tput", "total_tput", "goodput", "slo_attainment",
                "tokens_per_joule", "prefix_hit_rate"):
        assert DIRECTION[key] == "higher", key
    for key in ("prompt_tokens_mean", "output_tokens_mean", "gpu_util_mean", "gpu_power_mean_w", "kv_usage_peak",
                "client_cpu_percent", "client_minus_server_ttft_p50_ms"):
        assert DIRECTION[key] == "neutral", key


@pytest.mark.parametrize(
    ("key", "a", "b", "expected"),
    [
        ("ttft_p50_ms", 100.0, 73.0, "better"),  # lower is better: 0.73x
        ("ttft_p50_ms", 100.0, 130.0, "worse"),
        ("request_tput", 10.0, 8.2, "worse"),  # higher is better: 0.82x
        ("request_tput", 10.0, 12.0, "better"),
        ("ttft_p50_ms", 100.0, 102.9, "same"),  # within the band either way
        ("request_tput", 10.0, 9.71, "same"),
        ("ttft_p50_ms", 100.0, 103.1, "worse"),  # just outside it
        ("request_tput", 10.0, 9.69, "worse"),
        ("failed", 0.0, 3.0, "worse"),  # from 0 there is no ratio, but a direction
        ("goodput", 0.0, 1.5, "better"),
        ("failed", 0.0, 0.0, "same"),
        ("tpot_p50_ms", 20.0, 0.0, "better"),
        ("gpu_util_mean", 50.0, 90.0, None),  # neutral: no verdict
        ("prompt_tokens_mean", 128.0, 140.0, None),
    ],
)
def test_the_verdict_follows_the_metrics_direction(key: str, a: float, b: float, expected: str | None) -> None:
    assert verdict(key, cell(a), cell(b)) == expected


def test_a_missing_value_has_no_verdict() -> None:
    assert verdict("ttft_p50_ms", None, cell(50.0)) is None
    assert verdict("ttft_p50_ms", cell(50.0), None) is None
    assert verdict("not_a_metric", cell(1.0), cell(2.0)) is None


def test_repeats_that_overlap_are_the_same_and_apart_are_not() -> None:
    assert SAME_BAND == 0.03
    a = cell(100.0, 90.0, 110.0, n=3)
    assert verdict("ttft_p50_ms", a, cell(80.0, 75.0, 95.0, n=3)) == "same"  # 20% apart, within the spread
    assert verdict("ttft_p50_ms", a, cell(80.0, 75.0, 85.0, n=3)) == "better"
    assert verdict("ttft_p50_ms", a, cell(80.0, 75.0, 95.0, n=1)) == "better"  # one run: no spread to weigh


def test_the_marks_read_without_colour() -> None:
    assert mark("better") == "▲ better" and mark("worse") == "▼ worse" and mark("same") == "≈ same"
    assert mark("better", words=False) == "▲" and mark(None) == ""
    assert ba_cell(0.73, "better") == "0.73x ▲ better"
    assert ba_cell(0.82, "worse") == "0.82x ▼ worse"
    assert ba_cell(1.01, "same") == "1.01x ≈ same"
    assert ba_cell(1.22, "worse", words=False) == "1.22x ▼"
    assert ba_cell(1.2, None) == "1.20x"  # a neutral metric: the ratio alone
    assert ba_cell(None, None) == "n/a"
    assert ba_cell(None, "worse") == "▼ worse"  # 0 failures against 3


def _summary(a: dict[str, float], b: dict[str, float]) -> dict[str, Any]:
    """A two-engine, one-level result document, through the real ``combine``."""

    def level(m: dict[str, float]) -> dict[str, Any]:
        return {"length_mode": "ignore_eos", "requests": {"completed": m["completed"], "failed": m["failed"]},
                "latency": {"ttft_ms": {"p50": m["ttft"]}}, "throughput": {"request_tput": m["rate"]},
                "tokens": {"prompt_mean": m["prompt"]}}  # fmt: skip

    doc: dict[str, Any] = {
        "engines": [{"name": name, "label": name, "profile": name.split("-")[0], "url": f"http://127.0.0.1:{port}",
                     "model": "Qwen/Qwen3-0.6B"} for name, port in (("vllm-sim", 8000), ("sglang-sim", 30000))],
        "config": {"levels": [{"label": "C=1"}], "workload": {"kind": "random", "input_len": 128, "output_len": 64},
                   "endpoint": "completions", "repeats": 1},
        "runs": [{"engine": "vllm-sim", "levels": [level(a)]}, {"engine": "sglang-sim", "levels": [level(b)]}],
    }  # fmt: skip
    doc["summary"] = combine(doc)
    return doc


A = {"completed": 32, "failed": 0, "ttft": 100.0, "rate": 10.0, "prompt": 128}
B = {"completed": 32, "failed": 2, "ttft": 73.0, "rate": 8.2, "prompt": 128}


def test_the_json_summary_carries_direction_and_verdicts() -> None:
    summary = _summary(A, B)["summary"]
    assert summary["direction"] == DIRECTION and summary["same_band"] == SAME_BAND
    verdicts = summary["levels"][0]["verdict_b_a"]
    assert verdicts["ttft_p50_ms"] == "better" and verdicts["request_tput"] == "worse"
    assert verdicts["failed"] == "worse" and verdicts["completed"] == "same"
    assert verdicts["prompt_tokens_mean"] is None and verdicts["itl_p50_ms"] is None  # neutral; missing


def test_rows_the_printed_table_and_markdown_show_the_marks() -> None:
    doc = _summary(A, B)
    level = doc["summary"]["levels"][0]
    rows = {r.key: r for r in comparison_rows(level, doc["summary"]["engines"])}
    assert rows["ttft_p50_ms"].verdict == "better" and rows["ttft_p50_ms"].direction == "lower"
    text = render_text(doc)
    line = {ln.split("│")[1].strip(): ln for ln in text.splitlines() if ln.count("│") >= 4}
    assert line["TTFT p50 (ms)"].rstrip(" │").endswith("0.73x ▲ better"), text
    assert line["requests/s"].rstrip(" │").endswith("0.82x ▼ worse"), text
    assert line["requests failed"].rstrip(" │").endswith("▼ worse"), text
    assert line["requests ok"].rstrip(" │").endswith("1.00x ≈ same"), text
    assert line["prompt tokens (server, mean)"].rstrip(" │").endswith("1.00x"), text
    assert "sglang-sim/vllm-sim" in text and LEGEND in text
    md = to_markdown(doc)
    assert "| TTFT p50 (ms) | 100.0 | 73.0 | 0.73x ▲ better |" in md and LEGEND in md


def test_the_csv_says_the_direction_and_the_verdict() -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(_summary(A, B)))))
    by = {(r["engine"], r["metric"]): r for r in rows}
    assert by[("vllm-sim", "ttft_p50_ms")]["direction"] == "lower" and by[("vllm-sim", "ttft_p50_ms")]["verdict"] == ""
    assert by[("B/A", "ttft_p50_ms")]["verdict"] == "better" and float(by[("B/A", "ttft_p50_ms")]["median"]) == 0.73
    assert by[("B/A", "failed")]["median"] == "" and by[("B/A", "failed")]["verdict"] == "worse"
    neutral = by[("B/A", "prompt_tokens_mean")]
    assert neutral["direction"] == "neutral" and neutral["verdict"] == ""


@pytest.mark.parametrize(
    ("done", "total", "warm_done", "warm", "shown"),
    [(2, 32, 1, 1, "2/32 (+1 warmup)"), (0, 32, 3, 8, "0/32 (+3/8 warmup)"), (32, 32, 8, 8, "32/32 (+8 warmup)"),
     (5, 32, 0, 0, "5/32")],
)  # fmt: skip
def test_progress_counts_the_warmup_apart(done: int, total: int, warm_done: int, warm: int, shown: str) -> None:
    ev = LevelProgress("vllm-sim", "C=1", completed=done, errors=0, total=total, events=0,
                       warmup_completed=warm_done, warmup_total=warm)  # fmt: skip
    assert ev.counts() == shown


def test_the_cli_prints_the_marks_and_saves_into_the_results_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`enginedeck bench` against two simulators, B eight times faster: its printed table marks lower
    TTFT and higher requests/s both "▲ better"; --save writes into the results folder, not here."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENGINEDECK_BENCH_DIR", str(tmp_path / "results"))
    with sims(("vllm", "--speed", "0.5"), ("vllm", "--speed", "4")) as (a, b):
        code = main(["bench", "--engine", a.ref, "--engine", b.ref, "--concurrency", "2", "--num-prompts", "6",
                     "--input-len", "16", "--output-len", "8", "--no-gpu", "--save"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    line = {ln.split("│")[1].strip(): ln.rstrip(" │") for ln in out.splitlines() if ln.count("│") >= 4}
    assert line["TTFT p50 (ms)"].endswith("▲ better") and line["requests/s"].endswith("▲ better"), out
    assert line["requests ok"].endswith("1.00x ≈ same"), out
    assert LEGEND in out
    (saved,) = (tmp_path / "results").glob("enginedeck-bench-*.json")
    assert f"saved {saved} and {saved.with_suffix('.md').name}" in err
    assert not list(tmp_path.glob("enginedeck-bench-*"))


def test_the_plan_says_the_measured_prompts_and_the_warmup_apart() -> None:
    def cfg(*levels: LevelSpec) -> BenchConfig:
        return BenchConfig(engines=(), levels=levels)

    assert plan_line(cfg(LevelSpec("closed", 1, num_prompts=32), LevelSpec("closed", 8, num_prompts=32))) == (
        "32 prompts/level measured, after C warmup requests (not counted)")
    assert plan_line(cfg(LevelSpec("closed", 8, num_prompts=64, warmup=2))) == (
        "64 prompts/level measured, after 2 warmup requests (not counted)")
    assert plan_line(cfg(LevelSpec("open", 0, rate=4.0, num_prompts=50))) == "50 prompts/level measured, no warmup"
