"""The bundle's ``README.md``: a bug report shaped like the vLLM and SGLang issue templates ("Your
current environment", "Describe the bug", reproduction, environment), kept under GitHub's 65,536
characters for an issue body so that it pastes as it is. Long parts (logs first) are cut to fit,
and the cut says where the whole of it is in the bundle."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.bundle.window import Window, duration_text

MAX_CHARS = 65_536
LOG_LINES = 40  # per engine in the summary; the bundle has more


@dataclass(frozen=True, slots=True)
class EngineSummary:
    name: str
    profile: str
    url: str
    phase: str = "unknown"
    detail: str = ""
    version: str | None = None
    models: tuple[str, ...] = ()
    figures: str = ""  # "running 3, waiting 0, KV 41%"
    launch: str | None = None
    log: tuple[str, ...] = ()
    log_path: str = ""
    log_note: str = ""  # why there is no log (monitor-only, not started here)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SummaryInput:
    host: str
    created_at: float
    window: Window
    archive_name: str
    recording_note: str
    environment: Mapping[str, Any]  # host facts
    gpus: Mapping[str, Any]  # gpu facts
    engines: Sequence[EngineSummary] = ()
    simulated_gpus: Sequence[str] = field(default_factory=tuple)
    failures: Sequence[str] = ()
    # The alert rules not ok at the end of the window: (engine, rule, severity, state, summary).
    alerts: Sequence[tuple[str, str, str, str, str]] = ()
    history_note: str = ""  # where the console's chart history of the window is (the bundle key)


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _gib(n: object) -> str:
    return f"{n / 2**30:.1f} GiB" if isinstance(n, int | float) else "n/a"


def _environment(s: SummaryInput) -> list[str]:
    env = s.environment
    lines = [
        f"OS: {env.get('os')}",
        f"Kernel: {env.get('kernel')}",
        f"CPU: {env.get('cpu_model')} ({env.get('cpu_count_logical')} logical cores)",
        f"Memory: {_gib(env.get('mem_total_bytes'))}",
        f"Python: {env.get('python')}",
        f"enginedeck: {env.get('enginedeck')}",
    ]
    if env.get("docker"):
        lines.append(f"Docker: {env.get('docker')}")
    g = s.gpus
    if g.get("available"):
        lines.append(f"NVIDIA driver: {g.get('driver_version')}  CUDA (driver): {g.get('cuda_driver_version')}")
        for d in g.get("devices", ()):
            reasons = d.get("throttle_reasons")
            held = ", ".join(reasons) if reasons else "none" if reasons is not None else "n/a"
            ecc = (d.get("ecc_errors") or {}).get("volatile_uncorrected")
            xid = d.get("xid_errors")
            lines.append(f"GPU {d.get('index')}: {d.get('name')} {_gib(d.get('mem_used_bytes'))} / "
                         f"{_gib(d.get('mem_total_bytes'))}, {d.get('pstate')}, {d.get('temperature_c')} C, "
                         f"clocks held by: {held}, ECC uncorrected: {ecc}, XID: {xid if xid is not None else 'n/a'}")
    else:
        lines.append(f"GPUs: {g.get('reason', 'n/a')}")
    lines.extend(s.simulated_gpus)
    installed = {k: v for k, v in (env.get("packages") or {}).items() if v}
    if installed:
        lines.append("Packages: " + ", ".join(f"{k}=={v}" for k, v in installed.items()))
    for e in s.engines:
        lines.append(f"Engine {e.name}: {e.profile} {e.version or 'version n/a'}, models: "
                     f"{', '.join(e.models) or 'n/a'}")
    return lines


def _engine_table(engines: Sequence[EngineSummary]) -> list[str]:
    if not engines:
        return ["No engine was configured or given."]
    out = ["| engine | profile | version | phase | figures | detail |", "|---|---|---|---|---|---|"]
    for e in engines:
        cells = (e.name, e.profile, e.version or "n/a", e.phase, e.figures or "n/a", e.detail or "")
        out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return out


def _fence(lines: Sequence[str], lang: str = "text") -> list[str]:
    # A line of backticks in the body would end the fence early: use a longer fence.
    ticks = "```"
    while any(ticks in line for line in lines):
        ticks += "`"
    return [f"{ticks}{lang}", *lines, ticks]


def render(s: SummaryInput, *, log_lines: int = LOG_LINES) -> str:
    w = s.window
    out = [
        f"# enginedeck incident bundle: {s.host}, {_when(w.start)} to {_when(w.end)} ({duration_text(w.seconds)})",
        "",
        f"Written by `enginedeck bundle` at {_when(s.created_at)}. The archive `{s.archive_name}` holds every file "
        "named here; `manifest.json` lists them with their sha256 and what was masked (secrets are replaced by "
        "`****`).",
        "",
        "### Your current environment",
        "",
        "<details>",
        "<summary>Environment (host, GPUs, packages, engines) as enginedeck read it</summary>",
        "",
        *_fence(_environment(s)),
        "",
        "</details>",
        "",
        "### 🐛 Describe the bug",
        "",
        "_Say here what you saw and what you expected._",
        "",
        f"What enginedeck saw at the end of the window ({s.recording_note}):",
        "",
        *_engine_table(s.engines),
        "",
    ]
    if s.history_note:
        out += [f"How they moved over the window: {s.history_note}.", ""]
    if s.failures:
        out += ["Parts of the bundle that could not be collected:", "", *(f"- {f}" for f in s.failures), ""]
    out += ["### Alerts", ""]
    if s.alerts:
        out += ["| engine | rule | severity | state | summary |", "|---|---|---|---|---|"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in a) + " |" for a in s.alerts]
    else:
        out.append("No alert rule pending or firing at the end of the window.")
    out += ["", "### Reproduction: how the engines were started", ""]
    for e in s.engines:
        out += [f"**{e.name}**" + (f" ({'; '.join(e.notes)})" if e.notes else ""), ""]
        out += _fence([e.launch], "bash") if e.launch else ["_launch command not known_"]
        out.append("")
    out += ["### Logs", ""]
    for e in s.engines:
        shown = [line[:400] for line in e.log[-log_lines:]] if log_lines > 0 else []
        if not shown:
            out += [f"- {e.name}: no log ({e.log_note or 'empty'})", ""] if e.log_note or not e.log else []
            continue
        head = f"{e.name}: last {len(shown)} lines"
        if e.log_path:
            head += f" (more in `{e.log_path}`)"
        out += ["<details>", f"<summary>{head}</summary>", "", *_fence(shown), "", "</details>", ""]
    return "\n".join(out)


def summary_markdown(s: SummaryInput) -> str:
    """The summary, under ``MAX_CHARS``: fewer log lines per engine until it fits, then none, then cut."""
    for n in (LOG_LINES, 20, 10, 5, 0):
        text = render(s, log_lines=n)
        if len(text) < MAX_CHARS:
            return text
    cut = "\n\n_(cut to fit an issue body; the whole report is in the bundle)_\n"
    return text[: MAX_CHARS - len(cut) - 1] + cut
