"""Playground and Bench screens, driven with Textual's pilot against real simulator processes."""

from __future__ import annotations

import asyncio
import json

import pytest

from console.client.playground import Conversation, Turn, as_curl, parse_params
from console.client.timing import RequestRecord
from console.config import parse_engine_ref
from console.profiles import load_profiles

from .simproc import sims


def test_curl_shows_the_key_variable_never_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-secret-value")
    t = Turn("e", "m", [], {"model": "m", "messages": []}, "http://h:1", "MY_KEY", RequestRecord(0))
    curl = as_curl(t)
    assert "$MY_KEY" in curl and "sk-secret-value" not in curl
    assert curl.startswith("curl -N http://h:1/v1/chat/completions")


def test_params_and_conversation() -> None:
    p = parse_params("max_tokens=12 temperature=0 top_k=5")
    assert p.max_tokens == 12 and p.temperature == 0.0 and p.extra == {"top_k": 5}
    with pytest.raises(ValueError):
        parse_params("max_tokens=many")
    c = Conversation(system="be brief")
    c.add_exchange("hi", "hello")
    assert [m["role"] for m in c.request_messages("again")] == ["system", "user", "assistant", "user"]


def _app(refs: list[str]) -> object:
    from console.ui.app import DeckApp, UiOptions
    from tests.ui.frozen import FrozenSource

    instances = {r: parse_engine_ref(r) for r in refs}
    return DeckApp(FrozenSource(), options=UiOptions(simulated=True), profiles=load_profiles(), instances=instances)


async def _wait(cond: object, timeout: float = 20.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if cond():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_playground_streams_splits_cycles_and_copies() -> None:
    from textual.widgets import DataTable, Input, Markdown

    from console.ui.screens.playground import PlaygroundScreen, _Pane

    with sims(("vllm", "--speed", "4"), ("sglang", "--speed", "4")) as (a, b):
        app = _app([a.ref, b.ref])
        async with app.run_test(size=(140, 45)) as pilot:  # type: ignore[attr-defined]
            await app.show_screen("playground")  # type: ignore[attr-defined]
            await pilot.pause()
            screen = app.screen  # type: ignore[attr-defined]
            assert isinstance(screen, PlaygroundScreen)
            screen.query_one("#pg-params", Input).value = "max_tokens=16 temperature=0"
            prompt = screen.query_one("#pg-prompt", Input)
            prompt.value = "tell me about the prefix cache"
            await prompt.action_submit()
            await _wait(lambda: len(screen.history) == 1)
            turn = screen.history[0]
            assert turn.record.ok and turn.metrics is not None and turn.metrics.ttft_ms is not None
            assert turn.record.completion_tokens == 16
            assert screen.query_one("#pg-history", DataTable).row_count == 1
            # cycle engine: conversation kept
            await pilot.press("f2")
            assert screen.current.name == b.ref and len(screen.conversation.messages) == 2
            # split view: same prompt to both engines at once
            await pilot.press("f3")
            assert screen.split
            prompt.value = "and the KV cache?"
            await prompt.action_submit()
            await _wait(lambda: len(screen.history) == 3)
            assert {t.engine for t in screen.history[1:]} == {a.ref, b.ref}
            assert "TTFT" in str(screen.query_one("#pg-summary").render())
            # copy as curl through OSC 52
            await pilot.press("f4")
            assert app.clipboard.startswith("curl -N ")  # type: ignore[attr-defined]
            body = json.loads(app.clipboard.split(" -d ", 1)[1].strip("'"))  # type: ignore[attr-defined]
            assert body["messages"][-1]["content"] == "and the KV cache?"
            # Each pane labels a reply another engine wrote (sent to it as context) with its author,
            # and shows its own reply unlabelled.
            first = screen.history[0].reply
            for pane_id, engine in (("#pane-a", b.ref), ("#pane-b", a.ref)):
                shown = screen.query_one(f"{pane_id} .reply", Markdown).source
                assert screen.query_one(pane_id, _Pane).engine == engine
                assert f"**assistant · {a.ref}, sent as context**: {first}" in shown or engine == a.ref, shown
                assert f"**assistant**: {first}" in shown or engine != a.ref, shown


async def test_bench_screen_runs_in_a_child_process() -> None:
    from textual.widgets import DataTable, Input

    from console.ui.screens.bench import BenchScreen

    with sims(("vllm", "--speed", "8"), ("sglang", "--speed", "8")) as (a, b):
        app = _app([a.ref, b.ref])
        async with app.run_test(size=(160, 45)) as pilot:  # type: ignore[attr-defined]
            await app.show_screen("bench")  # type: ignore[attr-defined]
            await pilot.pause()
            screen = app.screen  # type: ignore[attr-defined]
            assert isinstance(screen, BenchScreen)
            screen.query_one("#bench-conc", Input).value = "2"
            screen.query_one("#bench-n", Input).value = "8"
            screen.query_one("#bench-out", Input).value = "8"
            await pilot.press("f9")
            try:
                await _wait(lambda: screen.doc is not None, timeout=120)
            except AssertionError:
                raise AssertionError(str(screen.query_one("#bench-progress").render())) from None
            table = screen.query_one("#bench-table", DataTable)
            assert table.row_count > 10
            # The run's progress reached the screen (typed messages from its worker thread).
            shown = str(screen.query_one("#bench-progress").render())
            assert f"[1/2] {a.ref} (repeat 1)" in shown and f"[2/2] {b.ref} (repeat 1)" in shown, shown
            assert shown.count("C=2: 8 ok, 0 failed") == 2, shown
            assert screen.doc is not None and len(screen.doc["runs"]) == 2
