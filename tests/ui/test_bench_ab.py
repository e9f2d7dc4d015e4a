"""A real small A/B bench on the bench screen, against two simulator processes, at 80x24 and 200x50:
B/A says which way is better (▲ better / ▼ worse, readable without colour), the progress counts the
measured requests against prompts/level with the warmup apart, every row of every level can be
reached, and `s` saves into the results folder (never the current one) and says the full path."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from console.config import parse_engine_ref
from console.paths import state_dir
from console.profiles import load_profiles
from console.ui.app import DeckApp, UiOptions
from console.ui.screens.bench import BenchScreen
from tests.client.simproc import sims
from tests.ui.frozen import FrozenSource

SLOW, FAST = "0.5", "4"  # the simulators' speed-up: B 8x faster or slower than A, far outside 3%


def _app(engines: dict[str, str], **options: Any) -> DeckApp:
    instances = {name: dataclasses.replace(parse_engine_ref(ref), name=name) for name, ref in engines.items()}
    return DeckApp(FrozenSource(), options=UiOptions(simulated=True, **options), profiles=load_profiles(),
                   instances=instances)  # fmt: skip


def _screen_lines(app: DeckApp) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def _until(cond: Callable[[], bool], said: Callable[[], str], timeout: float = 120.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not in {timeout:g} s: {said()}")


async def _row_line(app: DeckApp, pilot: Pilot[Any], key: str, label: str) -> str:
    """The screen line of the table row ``key`` (the cursor moved onto it, so it shows)."""
    table = app.screen.query_one("#bench-table", DataTable)
    table.move_cursor(row=[str(k.value) for k in table.rows].index(key))
    await pilot.pause()
    lines = [line for line in _screen_lines(app) if f" {label} " in line and "server TTFT" not in line]
    assert len(lines) == 1, (key, lines)
    return lines[0]


def _visible_rows(table: DataTable[Any]) -> range:
    """The rows on screen: the header stays, the rows below it scroll."""
    first = round(table.scroll_y)
    return range(first, first + table.scrollable_content_region.height - table.header_height)


async def _run_bench(app: DeckApp, pilot: Pilot[Any]) -> BenchScreen:
    await pilot.pause()
    await app.show_screen("bench")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, BenchScreen)
    for wid, value in (("bench-engines", "vllm-a,vllm-b"), ("bench-conc", "1,2"), ("bench-n", "6"),
                       ("bench-in", "16"), ("bench-out", "8")):  # fmt: skip
        screen.query_one(f"#{wid}", Input).value = value
    await pilot.press("r")
    await _until(lambda: screen.doc is not None, lambda: "\n".join(
        [*screen._progress, str(screen.query_one("#bench-progress", Static).render())]))
    await pilot.pause()
    await pilot.pause()
    return screen


@pytest.mark.parametrize(("size", "b_speed"), [((80, 24), FAST), ((200, 50), SLOW)], ids=["80x24", "200x50"])
async def test_a_real_ab_bench_reads_with_direction_and_saves_to_the_results_folder(
    size: tuple[int, int], b_speed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the current folder: nothing may be saved here
    b_faster = b_speed == FAST
    configured = tmp_path / "results" if b_faster else None  # [console] bench_dir, else the default
    options = {"bench_dir": str(configured)} if configured else {}
    a_speed = SLOW if b_faster else FAST
    with sims(("vllm", "--speed", a_speed), ("vllm", "--speed", b_speed)) as (a, b):
        app = _app({"vllm-a": a.ref, "vllm-b": b.ref}, **options)
        async with app.run_test(size=size, notifications=True) as pilot:
            screen = await _run_bench(app, pilot)
            doc = screen.doc
            assert doc is not None and [lv["label"] for lv in doc["summary"]["levels"]] == ["C=1", "C=2"]

            # Progress: the measured requests against the form's 6 prompts/level, the warmup (C) apart.
            log = screen._progress
            assert log[0].endswith("· 6 prompts/level measured, after C warmup requests (not counted)"), log
            for engine in ("vllm-a", "vllm-b"):
                assert f"   {engine} C=1: 6/6 (+1 warmup), 0 errors" in log, log
                assert f"   {engine} C=2: 6/6 (+2 warmup), 0 errors" in log, log
            assert not any("/8" in line for line in log), log  # never 6 + 2 counted as one

            table = screen.query_one("#bench-table", DataTable)
            wide = size[0] >= 200
            # The table uses the width: both levels side by side at 200 columns (one row per metric),
            # one block per level at 80, every column whole.
            assert table.virtual_size.width <= table.scrollable_content_region.width, table.virtual_size
            keys = [str(k.value) for k in table.rows]
            if wide:
                assert table.virtual_size.width > 100 and "|ttft_p50_ms" in keys
                assert not any(k.startswith("C=") for k in keys)
            else:
                assert {"C=1|ttft_p50_ms", "C=2|ttft_p50_ms", "C=1|", "C=2|"} <= set(keys)

            # B/A marked by each metric's direction: an 8x faster B has lower TTFT and higher requests/s,
            # and both read "▲ better"; a slower one "▼ worse" on both. Equal counts read "≈ same", a
            # neutral metric no mark. Side by side each line holds both levels; in blocks, one each.
            want = "▲ better" if b_faster else "▼ worse"
            for level in ("",) if wide else ("C=1", "C=2"):
                ttft = await _row_line(app, pilot, f"{level}|ttft_p50_ms", "TTFT p50 (ms)")
                rate = await _row_line(app, pilot, f"{level}|request_tput", "requests/s")
                for line in (ttft, rate):
                    assert line.rstrip().endswith(want) and line.count(want) == (2 if wide else 1), line
                same = await _row_line(app, pilot, f"{level}|completed", "requests ok")
                assert same.rstrip().endswith("1.00x ≈ same") and same.count("≈ same") == (2 if wide else 1), same
                neutral = await _row_line(app, pilot, f"{level}|prompt_tokens_mean", "prompt tokens (server, mean)")
                assert neutral.rstrip().endswith("1.00x") and "▲" not in neutral and "▼" not in neutral, neutral

            # Every row of every level can be reached: the cursor walks to the last row and it shows.
            table.focus()
            await pilot.press(*["down"] * table.row_count)
            await pilot.pause()
            assert table.cursor_row == table.row_count - 1
            assert table.row_count - 1 in _visible_rows(table), (table.scroll_y, table.row_count)
            tail = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
            assert tail == ("|" if wide else "C=2|") + "loop_lag_p99_ms", tail
            assert any(" client loop lag p99 (ms) " in line for line in _screen_lines(app))

            # s saves into the results folder, never the current one, and the toast names the full path.
            await pilot.press("s")
            await pilot.pause()
            folder = configured if configured else state_dir() / "bench"
            saved = sorted(folder.glob("enginedeck-bench-*-vllm-a-vs-vllm-b.json"))
            assert len(saved) == 1, list(folder.iterdir()) if folder.exists() else folder
            assert saved[0].with_suffix(".md").exists()
            assert not list(tmp_path.glob("enginedeck-bench-*"))
            said = [str(n.message) for n in app._notifications]
            assert any(f"saved {saved[0]} and {saved[0].with_suffix('.md').name}" == m for m in said), said
            assert saved[0].is_absolute()
            written = json.loads(saved[0].read_text())
            assert written["summary"]["direction"]["ttft_p50_ms"] == "lower"
            assert written["summary"]["direction"]["request_tput"] == "higher"
            verdicts = written["summary"]["levels"][0]["verdict_b_a"]
            assert verdicts["ttft_p50_ms"] == verdicts["request_tput"] == ("better" if b_faster else "worse")
