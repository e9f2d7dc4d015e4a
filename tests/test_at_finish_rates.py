"""Engines that count generated tokens only when a request finishes (llama.cpp, SGLang, trtllm, TGI):
the rate shown as current is over 60 s, flagged in status JSON and marked on screen, instead of a 5 s
rate that reads 0 for a whole decode and then spikes."""

from __future__ import annotations

import json

import pytest

from console.model import EngineSnapshot, FleetSnapshot, GpuFleet, Phase
from console.profiles import get_profile
from console.status_doc import status_doc
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from console.ui import format as fmt
from console.ui.explain import explain
from console.ui.screens.overview import COLUMNS, CellContext

RATE = 10.0  # tokens/s of one request decoding for 30 s, then finishing; one request at a time


def _llama(tokens: float) -> str:
    return f"llamacpp:requests_processing 1\nllamacpp:prompt_tokens_total 0\nllamacpp:tokens_predicted_total {tokens}\n"


def _run(seconds: int) -> EngineSnapshot:
    llama = get_profile("llamacpp")
    st = EngineMetricsState(llama)
    for t in range(seconds + 1):
        finished = (t // 30) * 30  # tokens appear only when a request ends (every 30 s)
        st.ingest(float(t), normalize(llama, _llama(RATE * finished)))
    models, total = st.metrics()
    return EngineSnapshot(name="llama", profile="llamacpp", url="http://127.0.0.1:1", taken_at=1.0,
                          phase=Phase.READY, reachable=True, models=models, total=total)  # fmt: skip


def test_counted_at_finish_rate_is_the_60s_rate_and_flagged() -> None:
    e = _run(125)  # 5 s after the fourth request ended: the 5 s rate still sees the spike...
    assert e.total is not None
    g = e.total.generation_tps
    assert g.at_finish and g.now_window == "60s"
    assert g.now == g.r60s == pytest.approx(RATE)  # two requests (600 tokens) ended in the last 60 s
    e = _run(115)  # ...and in mid-decode it reads 0
    assert e.total is not None and e.total.generation_tps.r5s == 0.0
    assert e.total.generation_tps.now == pytest.approx(RATE)
    doc = json.loads(json.dumps(status_doc(FleetSnapshot(taken_at=1.0, engines=(e,), gpus=GpuFleet(source="none")))))
    gen = doc["engines"][0]["summary"]["generation_tokens_per_s"]
    assert gen["at_finish"] is True and gen["now_window"] == "60s" and gen["now"] == pytest.approx(RATE)
    prompt = doc["engines"][0]["summary"]["prompt_tokens_per_s"]
    assert prompt["at_finish"] is False and prompt["now_window"] == "5s"  # llama.cpp counts prompts at once


def test_overview_cell_and_explain_mark_it() -> None:
    e = _run(115)
    (gen,) = [c for c in COLUMNS if c.key == "gen"]
    cell = gen.render(e, CellContext({"llamacpp": "llama.cpp"})).plain
    assert cell == "10.0 t/s*" and len(cell) <= gen.width  # the 60 s rate, marked, not "0 t/s"
    assert fmt.tps(5.0).plain == "5.0 t/s"  # unmarked elsewhere
    text = explain("generation_tps", get_profile("llamacpp")).plain
    assert "when a request finishes" in text and "60 s" in text and "*" in text
    assert "when a request finishes" not in explain("generation_tps", get_profile("vllm")).plain


def test_status_text_marks_the_60s_rate() -> None:
    from console.commands.status import render_text

    e = _run(115)
    text = render_text(FleetSnapshot(taken_at=1.0, engines=(e,), gpus=GpuFleet(source="none")))
    row = text.splitlines()[1]
    assert "10.0*" in row  # GEN/s: the 60 s rate, not 0.0
    assert any(line.startswith("* over 60 s") for line in text.splitlines())


def test_the_hit_rate_popup_says_which_figure_stands_in_before_the_window() -> None:
    """SGLang and trtllm-serve show their own gauge until a second scrape; vLLM has no gauge."""
    from console.profiles import get_profile
    from console.ui.explain import explain

    for name in ("sglang", "trtllm"):
        assert "until a second scrape gives the counters a window: the engine's own gauge" in \
            explain("prefix_hit_rate", get_profile(name)).plain, name
    assert "own gauge" not in explain("prefix_hit_rate", get_profile("vllm")).plain
