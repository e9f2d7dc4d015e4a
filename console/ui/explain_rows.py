"""Explanations for rows that are not one of the console's canonical metrics: a raw series (engine
detail, Raw metrics tab), a benchmark result row, the playground's timing columns.

``explain_key`` builds the popup text for any key a screen's ``explain_target`` returns: a metric
key (``console.ui.explain``), ``raw:<series name>``, ``bench:<result key>`` or ``playground``.
"""

from __future__ import annotations

from rich.text import Text

from console.model import EnergyView
from console.profiles import EngineProfile
from console.ui import format as fmt
from console.ui.explain import METRICS, explain

# Suffixes a Prometheus family's series carry (histogram/summary parts, counter totals).
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_gcount", "_gsum")


def _family(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def canonical_of(series: str, profile: EngineProfile) -> list[str]:
    """The canonical metrics of ``profile`` read from this raw series (by family name)."""
    fam = _family(series)
    return [canon for canon, m in profile.metrics.map.items() if any(series == n or fam == _family(n) for n in m.names)]


def explain_raw(series: str, profile: EngineProfile | None, *, engine_name: str = "",
                simulated: bool = False) -> Text:  # fmt: skip
    """What a raw series is: which shown metric the profile computes from it, or that none does."""
    out = Text()
    out.append("Raw series ", style="bold")
    out.append(series + "\n", style="bold")
    if profile is None:
        out.append("This engine's profile is unknown: no mapping to show.\n", style="dim")
        return out
    canon = canonical_of(series, profile)
    if not canon:
        out.append(
            f"Not used by the {profile.display_name} profile ({profile.name}): enginedeck shows it only here, "
            "as the engine exported it. A profile override in ~/.config/enginedeck/engines/ can map it.\n"
        )
        return out
    shown = [key for key, info in METRICS.items() if set(info.canonical) & set(canon)]
    out.append(f"The {profile.display_name} profile reads it as:\n")
    for c in canon:
        m = profile.metrics.map[c]
        out.append(f"  {c}: ", style="bold")
        out.append(f"{' | '.join(m.names)}  [{m.kind}, {m.aggregate} over label series]\n")
        if m.unit:
            out.append(f"    raw unit: {m.unit}\n", style="dim")
        if m.note:
            out.append(f"    note: {m.note}\n", style="dim")
    if not shown:
        out.append("No console column shows it directly.\n", style="dim")
        return out
    out.append(f"Shown as: {', '.join(METRICS[k].title for k in shown)}.\n\n")
    out.append_text(explain(shown[0], profile, engine_name=engine_name, simulated=simulated))
    return out


# Benchmark result rows (console.client.report.ROWS keys, by prefix): what the number is.
_BENCH: tuple[tuple[str, str], ...] = (
    ("completed", "Requests that finished with a 2xx status and at least one token (measured, not warmup)."),
    ("failed", "Requests that failed: an HTTP error, a broken stream, a timeout, or no token at all."),
    (
        "ttft",
        "Time to first token, seen by the client: from sending the request to the first event that "
        "carries a token. Includes queueing and prefill, and the network.",
    ),
    (
        "tpot",
        "Time per output token of each request: (last token time - first token time) / (tokens - 1); "
        "the percentile is over requests.",
    ),
    (
        "itl",
        "Inter-token latency: every gap between token events, split over the tokens the event carried "
        "(engines that bundle chunks are corrected); the percentile is over all gaps.",
    ),
    ("e2e", "End to end: from sending the request to the end of its stream."),
    ("request_tput", "Completed requests per second over the level."),
    (
        "steady_output_tput",
        "Output tokens per second arriving between the end of warmup and the last send: "
        "the engine at full load, without ramp-up and drain.",
    ),
    ("output_tput", "Output tokens per second over the whole level, ramp-up and drain included."),
    ("goodput", "Requests per second that met every SLO given with --slo."),
    ("slo_attainment", "Share of the requests that met every SLO given with --slo."),
    ("error_rate", "Failed requests / (failed + completed)."),
    (
        "prompt_tokens_mean",
        "Prompt tokens per request as the server counted them (usage.prompt_tokens): the "
        "same prompt through a different tokenizer or chat template is different work.",
    ),
    ("output_tokens_mean", "Output tokens per request (the server's usage when sent, else counted events)."),
    ("prefix_hit_rate", "The engine's own prefix-cache hit rate over the level, from its /metrics."),
    ("kv_usage_peak", "The highest KV-cache usage the engine reported during the level, from its /metrics."),
    ("preemptions", "Requests the engine preempted (evicted from the batch) during the level, from its /metrics."),
    (
        "server_ttft",
        "The engine's own TTFT histogram over the level (from its /metrics), for comparison with the client's.",
    ),
    (
        "client_minus_server_ttft",
        "Client TTFT p50 minus the engine's TTFT p50: network, HTTP and client overhead, give or take "
        "a histogram bucket. The engine's p50 is interpolated inside the bucket of its TTFT histogram that "
        "holds the median (as Prometheus' histogram_quantile), the client's is exact, so with coarse buckets "
        "the difference can be negative: '±bucket' in the row name.",
    ),
    ("gpu_util", "Mean GPU utilisation of the engine's GPUs during the level (simulated in the demo)."),
    ("gpu_power", "Mean GPU power draw of the engine's GPUs during the level (simulated in the demo)."),
    ("tokens_per_joule", "Output tokens per joule of GPU energy in the level's steady state (warm-up and drain "
                         "excluded): the tokens of that window / the energy of the engine's GPUs over the same "
                         "window, from their energy counter (else power integrated at 10 Hz; without either, "
                         "the mean sampled power)."),
    ("joules_per_1k_output", "GPU energy per 1,000 output tokens in the steady state (1000 / tokens per joule)."),
    ("joules_per_response", "GPU energy per completed response: J per output token × mean output tokens."),
    (
        "client_cpu",
        "CPU the load generator itself used: near 100% of a core means the client, not the "
        "engine, limits the numbers (CLIENT-BOUND).",
    ),
    (
        "loop_lag",
        "How late the load generator's event loop woke (p99): above 5 ms latencies include "
        "client delay (CLIENT-BOUND).",
    ),
    ("schedule_lag", "How late requests were sent against their schedule (p99): the client could not keep up."),
)


def explain_bench(key: str) -> Text:
    from console.client.bench import DIRECTION, SAME_BAND
    from console.client.report import ROWS

    out = Text()
    row = next((r for r in ROWS if r[0] == key), None)
    if row is None:
        out.append("Benchmark results\n", style="bold")
        out.append("Move the cursor to a result row (r runs a benchmark), then e explains its metric.\n")
        return out
    _, label, _ = row
    direction = DIRECTION.get(key, "neutral")
    out.append(label + "\n", style="bold")
    meaning = next((text for prefix, text in _BENCH if key.startswith(prefix)), "")
    out.append((meaning or "A benchmark metric.") + "\n\n")
    if key.endswith(("_p50_ms", "_p90_ms", "_p99_ms")):
        out.append("Percentile: ", style="bold")
        out.append(f"p{key.rsplit('_', 2)[-2][1:]} over the level's measured requests.\n")
    out.append("Better: ", style="bold")
    out.append(f"{direction}; B/A is marked ▲ better or ▼ worse, ≈ same within {SAME_BAND:.0%}\n"
               if direction != "neutral" else "neither (it describes the work or the test, not the engine)\n")
    out.append("Columns: ", style="bold")
    out.append(
        "one per engine (the median over repeats; min-max when repeats disagree), then B/A, the ratio of the medians.\n"
    )
    return out


def explain_playground() -> Text:
    out = Text()
    out.append("Playground timings\n", style="bold")
    rows = (
        ("TTFT ms", "send to the first token of the reply (queueing, prefill, network)"),
        ("TPOT ms", "(last token - first token) / (tokens - 1): this request's average gap"),
        ("tok/s", "decode speed of this request: tokens after the first / time after the first"),
        ("N", "output tokens (the server's usage when sent)"),
        ("E2E ms", "send to the end of the stream"),
        ("r/w/KV", "the engine's running and waiting requests and KV-cache usage when the request was sent"),
        ("status", "ok, the finish reason, cancelled, or the error"),
    )
    for name, text in rows:
        out.append(f"{name}: ", style="bold")
        out.append(text + "\n")
    out.append("\nThe ITL line under a reply is the gaps between its tokens, as they arrived.\n", style="dim")
    return out


def energy_now(view: EnergyView | None) -> Text:
    """This engine's energy right now: figures, source, and why it is an estimate."""
    out = Text()
    out.append("\nThis engine now: ", style="bold")
    if view is None:
        out.append("no energy figure: none of its GPUs reports energy (no GPU, NVML unavailable, or the "
                   "first samples are not in yet)\n", style="dim")  # fmt: skip
        return out

    def num(v: float | None, f: str) -> str:
        return "n/a" if v is None else f.format(v)

    out.append(f"{num(view.tokens_per_joule, '{:.3f} tok/J')} generated, "
               f"{num(view.total_tokens_per_joule, '{:.3f} tok/J')} with prompt, "
               f"{num(view.joules_per_1k_output, '{:.0f} J')} per 1k output tokens, "
               f"{num(view.power_w, '{:.0f} W')} over {num(view.window_s, '{:.0f} s')}; "
               f"idle {num(view.idle_w, '{:.0f} W')}, busy {num(view.busy_w, '{:.0f} W')}\n")  # fmt: skip
    source = {"counter": "NVML total-energy counter", "integrated": "power integrated at 10 Hz (no counter)",
              "simulated": "the simulated GPUs' counter (demo)", "mixed": "counter on some GPUs, integrated on others"}
    out.append(f"  GPUs {', '.join(map(str, view.gpus)) or '-'}: {source.get(view.source, view.source or 'n/a')}\n")
    if view.estimate:
        out.append(f"  estimate: {view.reason}\n", style=fmt.WARN)
    else:
        out.append("  exact: every process on its GPUs is this engine's\n")
    return out


def explain_key(key: str, profile: EngineProfile | None, *, engine_name: str = "", simulated: bool = False,
                energy: EnergyView | None = None) -> Text:  # fmt: skip
    if key == "tokens_per_joule":
        out = explain(key, profile, engine_name=engine_name, simulated=simulated)
        out.append_text(energy_now(energy))
        return out
    if key.startswith("raw:"):
        return explain_raw(key[4:], profile, engine_name=engine_name, simulated=simulated)
    if key.startswith("bench:"):
        return explain_bench(key[6:])
    if key == "playground":
        return explain_playground()
    return explain(key, profile, engine_name=engine_name, simulated=simulated)


__all__ = ["canonical_of", "energy_now", "explain_bench", "explain_key", "explain_playground", "explain_raw"]
