"""The console's CPU floor: a minimal Textual dashboard of one engine, as anyone would write it.

    .venv/bin/python benchmarks/floor_dashboard.py URL [--spark-rows N]

One header, one footer, four labels (requests running and waiting, KV cache usage, generated
tokens/s) and three of Textual's own Sparkline widgets (tokens/s, KV usage, waiting), fed by
polling one engine's /metrics (URL) once a second and parsing it with prometheus_client's parser.
The sparklines are one row each, Textual's default (``--spark-rows N``: N rows each, 0: they share
the rows the labels leave: at 200x50, 14 rows each, that made this app cost 3x as much, 17.2 %
of a core against 5.8 % side by side at load average 10-12, most of it Textual drawing the bars).

``console_figures.py`` runs it in its own tmux pane beside the console and divides the console's
CPU by this one's: the console should cost no more than this (issue 38).
"""

from __future__ import annotations

import argparse
import time
from collections import deque

import httpx
from prometheus_client.parser import text_string_to_metric_families
from textual.app import App, ComposeResult
from textual.widgets import Footer, Header, Label, Sparkline

POINTS = 300  # five minutes at 1 s: the sparklines summarise them into their width
# vLLM's names (the fleet's first engine); the KV gauge has had two names.
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
GENERATED = "vllm:generation_tokens_total"


class FloorDashboard(App[None]):
    TITLE = "floor dashboard"
    BINDINGS = [("q", "quit", "Quit")]

    def __init__(self, url: str, spark_rows: int) -> None:
        super().__init__()
        self.url = url
        self.spark_rows = spark_rows
        self.trends: dict[str, deque[float]] = {k: deque(maxlen=POINTS) for k in ("gen", "kv", "wait")}
        self.last_generated: tuple[float, float] | None = None  # (monotonic time, counter)

    def compose(self) -> ComposeResult:
        yield Header()
        for wid in ("running", "waiting", "kv", "gen"):
            yield Label("-", id=wid)
        for wid in ("gen", "kv", "wait"):
            yield Sparkline([], id=f"{wid}-trend")
        yield Footer()

    def on_mount(self) -> None:
        if self.spark_rows != 1:
            for spark in self.query(Sparkline):
                spark.styles.height = f"{self.spark_rows}" if self.spark_rows > 0 else "1fr"
        self.client = httpx.AsyncClient(timeout=2.0)
        self.set_interval(1.0, self.poll)

    async def poll(self) -> None:
        try:
            body = (await self.client.get(self.url)).text
        except httpx.HTTPError:
            return
        sums: dict[str, float] = {}
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
        now = time.monotonic()
        generated = sums.get(GENERATED)
        rate = 0.0
        if generated is not None:
            if self.last_generated is not None and now > self.last_generated[0]:
                rate = max(0.0, generated - self.last_generated[1]) / (now - self.last_generated[0])
            self.last_generated = (now, generated)
        kv = next((sums[k] for k in KV if k in sums), 0.0)
        waiting = sums.get(WAITING, 0.0)
        self.query_one("#running", Label).update(f"running  {sums.get(RUNNING, 0.0):.0f}")
        self.query_one("#waiting", Label).update(f"waiting  {waiting:.0f}")
        self.query_one("#kv", Label).update(f"KV cache {100 * kv:.0f}%")
        self.query_one("#gen", Label).update(f"gen      {rate:.0f} tok/s")
        for key, value in (("gen", rate), ("kv", kv), ("wait", waiting)):
            self.trends[key].append(value)
            self.query_one(f"#{key}-trend", Sparkline).data = list(self.trends[key])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url", help="an engine's /metrics URL")
    ap.add_argument("--spark-rows", type=int, default=1, help="rows of each sparkline (0: share the free rows)")
    args = ap.parse_args()
    FloorDashboard(args.url, args.spark_rows).run()


if __name__ == "__main__":
    main()
