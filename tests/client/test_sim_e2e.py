"""End to end against real simulator processes: usage, cancellation, the bench command, errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import orjson
import pytest

from console.cli import main
from console.client.stream import GenParams, build_body, endpoint_path, stream_request
from console.client.timing import RequestRecord, compute
from console.client.workloads import WorkloadSpec, generate
from console.ports import free_port
from console.profiles import get_profile
from console.transport.http import Cancellable, HTTPClient

from .simproc import sims

SPEED = "4"


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "tgi", "llamacpp"])
@pytest.mark.parametrize("kind", ["chat", "completions"])
async def test_usage_counts_match_and_prompt_len_is_predictable(engine: str, kind: str) -> None:
    prof = get_profile(engine)
    with sims((engine, "--speed", SPEED)) as (sim,):
        client = HTTPClient(sim.url)
        try:
            models = await __import__("console.client.stream", fromlist=["x"]).list_models(client, prof.api, None)
            p = generate(WorkloadSpec(input_len=40, output_len=12), 1, seed=1)[0]
            content = p.chat_messages() if kind == "chat" else p.completion_text()
            body, mode = build_body(prof.api, kind, models[0], content,  # type: ignore[arg-type]
                                    GenParams(max_tokens=12, fixed_length=True))
            rec = await stream_request(client, endpoint_path(prof.api, kind), orjson.dumps(body),  # type: ignore[arg-type]
                                       RequestRecord(0), keep_text=True)
        finally:
            client.close()
        assert rec.ok, rec.error
        m = compute(rec)
        st = sim.state()
        server = st["requests"][-1]  # type: ignore[index]
        assert rec.prompt_tokens == server["prompt_tokens"]
        assert rec.completion_tokens == server["completion_tokens"]
        assert not m.tokens_estimated
        if kind == "completions":
            assert rec.prompt_tokens == 40  # one word = one token: the prompt length is predictable
        if mode != "natural":
            assert rec.completion_tokens == 12
        assert m.output_tokens == rec.completion_tokens
        assert m.continuous_usage == prof.api.supports_continuous_usage or m.bundling == pytest.approx(
            rec.completion_tokens / len(rec.event_t_ns)
        )


async def test_cancel_closes_stream_and_simulator_running_count_drops() -> None:
    prof = get_profile("vllm")
    with sims(("vllm",)) as (sim,):
        client = HTTPClient(sim.url)
        body, _ = build_body(prof.api, "completions", "Qwen/Qwen3-0.6B", "one two three", GenParams(max_tokens=2000))
        cancel = Cancellable()
        rec = RequestRecord(0)
        task = asyncio.create_task(
            stream_request(client, "/v1/completions", orjson.dumps(body), rec, cancel=cancel)
        )
        for _ in range(300):
            await asyncio.sleep(0.02)
            if len(rec.event_t_ns) >= 3:
                break
        assert sim.state()["running"] == 1
        cancel.cancel()
        await asyncio.wait_for(task, 5)
        assert rec.cancelled and not rec.ok
        running = None
        for _ in range(100):
            running = sim.state()["running"]
            if running == 0:
                break
            await asyncio.sleep(0.05)
        assert running == 0
        client.close()


def test_bench_acceptance_two_engines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    md = tmp_path / "out.md"
    with sims(("vllm", "--speed", "8"), ("sglang", "--speed", "8")) as (a, b):
        code = main(["bench", "--engine", a.ref, "--engine", b.ref, "--concurrency", "1,8", "--num-prompts", "64",
                     "--input-len", "128", "--output-len", "64", "--json", str(out), "--markdown", str(md),
                     "--quiet", "--gpus", "simulated"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "TTFT p50 (ms)" in captured.out and "C=1" in captured.out and "C=8" in captured.out
    doc = json.loads(out.read_text())
    assert doc["schema"] == "enginedeck.bench/1"
    assert [e["profile"] for e in doc["engines"]] == ["vllm", "sglang"]
    assert len(doc["runs"]) == 2
    for run in doc["runs"]:
        for level in run["levels"]:
            assert level["requests"]["completed"] == 64 and level["requests"]["failed"] == 0
            assert level["tokens"]["output_mean"] == 64 and level["tokens"]["prompt_mean"] == 128
            assert level["length_mode"] == "ignore_eos"
            assert len([r for r in level["records"] if not r["warmup"]]) == 64
            assert level["server"]["available"]
            gpu = level["gpu"]
            assert gpu["tokens_per_joule"] is not None and gpu["tokens_per_joule"] > 0
            # From the simulated GPU's energy counter over the steady window, not from mean power.
            assert gpu["tokens_per_joule_from"] == "simulated" and gpu["energy_j_steady"] > 0
            assert gpu["joules_per_1k_output"] == pytest.approx(1000 / gpu["tokens_per_joule"])
            assert gpu["joules_per_response"] == pytest.approx(gpu["joules_per_1k_output"] * 64 / 1000)
            assert "energy_series" not in gpu
    assert doc["prompt_token_check"]["ok"] and doc["prompt_token_check"]["compared"] > 0
    lv = doc["summary"]["levels"][1]
    assert lv["ratio_b_a"]["ttft_p50_ms"] is not None
    assert "| TTFT p50 (ms) |" in md.read_text()


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_shared_prefix_beats_random_on_hit_rate_and_ttft(tmp_path: Path, engine: str) -> None:
    """Read from the engine's own metrics: the shared-prefix workload hits the prefix cache."""
    results = {}
    with sims((engine, "--speed", "8")) as (a,):
        for wl in ("random", "shared-prefix"):
            out = tmp_path / f"{wl}.json"
            code = main(["bench", "--engine", a.ref, "--concurrency", "4", "--num-prompts", "48", "--input-len", "512",
                         "--output-len", "8", "--workload", wl, "--json", str(out), "--quiet", "--no-gpu",
                         "--flush-cache"])  # fmt: skip
            assert code == 0
            results[wl] = json.loads(out.read_text())["runs"][0]["levels"][0]
    rnd, shp = results["random"], results["shared-prefix"]
    if engine == "sglang":
        assert rnd["cache_flush"] == shp["cache_flush"] == "flushed"
    assert rnd["server"]["prefix_hit_rate"] is not None and shp["server"]["prefix_hit_rate"] is not None
    assert shp["server"]["prefix_hit_rate"] > rnd["server"]["prefix_hit_rate"] + 0.3
    assert shp["latency"]["ttft_ms"]["p50"] < rnd["latency"]["ttft_ms"]["p50"]
    assert shp["server"]["ttft"]["p50_ms"] <= rnd["server"]["ttft"]["p50_ms"]


def test_unreachable_engine_is_one_line_and_nonzero(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    code = main(["bench", "--engine", f"vllm@http://127.0.0.1:{port}", "--concurrency", "1", "--num-prompts", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "not ready" in err and "Traceback" not in err


def test_open_loop_rate_is_kept_on_an_absolute_schedule(tmp_path: Path) -> None:
    out = tmp_path / "rate.json"
    with sims(("sglang", "--speed", "8")) as (a,):
        code = main(["bench", "--engine", a.ref, "--rate", "20", "--arrival", "gamma", "--burstiness", "2",
                     "--num-prompts", "60", "--input-len", "32", "--output-len", "8", "--json", str(out), "--quiet",
                     "--no-gpu"])  # fmt: skip
    assert code == 0
    level = json.loads(out.read_text())["runs"][0]["levels"][0]
    assert level["level"]["mode"] == "open" and level["requests"]["completed"] == 60
    client = level["client"]
    # 60 arrivals rescaled to end at exactly 60/20 = 3 s: achieved rate close to the target
    assert client["achieved_rate"] == pytest.approx(20 * 59 / 60, rel=0.25)
    assert client["schedule_lag_ms"]["p50"] < 20
    assert level["latency"]["e2e_from_sched_ms"]["n"] == 60


def test_engine_failing_every_request_exits_nonzero(capsys: pytest.CaptureFixture[str]) -> None:
    with sims(("vllm", "--fault", "error-rate=1.0")) as (a,):
        code = main(["bench", "--engine", a.ref, "--concurrency", "2", "--num-prompts", "4", "--quiet", "--no-gpu"])
    cap = capsys.readouterr()
    assert code == 1
    assert "no request succeeded" in cap.err and "Traceback" not in cap.err
    assert "requests failed" in cap.out


def test_level_stops_early_when_errors_exceed_five_percent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "err.json"
    with sims(("vllm", "--speed", "8", "--fault", "error-rate=0.5")) as (a,):
        code = main(["bench", "--engine", a.ref, "--concurrency", "2", "--num-prompts", "200", "--input-len", "16",
                     "--output-len", "4", "--json", str(out), "--quiet", "--no-gpu"])  # fmt: skip
    assert code == 3  # the results are written, but a level stopped on errors is not a clean run
    level = json.loads(out.read_text())["runs"][0]["levels"][0]
    assert "error rate" in level["requests"]["stopped_early"]
    assert level["requests"]["sent"] < 100
    cap = capsys.readouterr()
    assert "STOPPED EARLY" in cap.out
    assert cap.err.count("stopped early") == 1 and "error rate" in cap.err
