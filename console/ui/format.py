"""Cell formatting: units always, "n/a" (dim) for None and never 0, "~" for low-sample quantiles.

Pure functions over model values returning Rich ``Text``; no Textual, no I/O.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from collections.abc import Sequence

from rich.text import Span, Text

from console import secrets, textout
from console.model import EnergyView, EngineSnapshot, Freshness, LifecycleView, Phase, Quantiles, SourceState

GIB = 1024**3
NA_STYLE = "dim"

# With NO_COLOR, Textual renders in greys where red on dark is nearly invisible: problems then
# stand out by reverse video and bold instead of hue.
MONO = bool(os.environ.get("NO_COLOR"))
CRIT = "bold reverse" if MONO else "bold red"
WARN = "bold" if MONO else "yellow"
SIM = "bold reverse" if MONO else "bold magenta"


def shown(text: str, *, multiline: bool = False) -> str:
    """Outside text (from an engine, a stream, a remote host, a recording) as a screen may show it:
    credentials masked (on the raw text), then every control, escape, bidi and invisible character
    a visible placeholder: the same rule as the text outputs' (``console.textout``)."""
    return textout.shown(text, multiline=multiline) if text else text


def outside(text: str, style: str = "", *, multiline: bool = False) -> Text:
    """Outside text as a Rich ``Text`` (never parsed as markup: ``[bold]`` in a model id shows as it is)."""
    return Text(shown(text, multiline=multiline), style=style)


def shown_text(text: Text, *, multiline: bool = False) -> Text:
    """``text`` with :func:`shown` applied to each differently styled piece, styles kept. A widget that
    takes ``Text`` from anywhere passes it through this before it measures or draws it: a placeholder
    is wider than what it replaces, so the text is made safe before its cells are counted."""
    plain = text.plain
    whole = shown(plain, multiline=multiline)
    if whole == plain:
        return text
    if not text.spans:
        return Text(whole, style=text.style, justify=text.justify,
                    overflow=text.overflow, no_wrap=text.no_wrap, end=text.end)  # fmt: skip
    cuts = sorted({i for span in text.spans for i in (span.start, span.end) if 0 < i < len(plain)})
    out = Text(style=text.style, justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap, end=text.end)
    for piece in text.divide(cuts):
        safe = shown(piece.plain, multiline=multiline)
        start = len(out.plain)
        out.append(safe)
        # After the cuts each span covers its piece whole (or not at all).
        out.spans.extend(Span(start, start + len(safe), s.style) for s in piece.spans if s.end > s.start)
    return out


def na() -> Text:
    return Text("n/a", style=NA_STYLE)


def is_missing(v: float | None) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def si(v: float) -> str:
    """Compact magnitude: 950, 1.2k, 34k, 1.5M."""
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.1f}M"
    if a >= 1e4:
        return f"{v / 1e3:.0f}k"
    if a >= 1e3:
        return f"{v / 1e3:.1f}k"
    if a >= 100 or v == 0:
        return f"{v:.0f}"
    return f"{v:.1f}"


def fit_name(name: str, width: int) -> str:
    """``name`` in ``width`` cells: as it is when it fits, else its head and its tail around a "…", so a
    cut name never reads as another one (``sglang@10.255.255.1:30000`` keeps its port whole, never
    ``…:3000``). Engine names, URLs and hosts are ASCII: a character is a cell."""
    if len(name) <= width:
        return name
    if width <= 1:
        return "…"[:max(0, width)]
    # The tail holds what tells names apart (a port, a rank, a replica's number): the larger half.
    tail = width // 2
    head = width - 1 - tail
    return name[:head] + "…" + name[len(name) - tail:]


def fit_words(text: str, width: int) -> str:
    """``text`` in ``width`` cells: when it does not fit, the words that do and "…" for the rest (a GPU's
    model, read from its start: "H100 80GB…" for "H100 80GB HBM3"); a first word too long is cut."""
    if len(text) <= width:
        return text
    words = text.split(" ")
    kept = ""
    for w in words:
        if len(kept) + (1 if kept else 0) + len(w) > width - 1:
            break
        kept = f"{kept} {w}" if kept else w
    return (kept or text[:max(0, width - 1)]) + "…"[:max(0, width)]


def count(v: float | None) -> Text:
    if is_missing(v):
        return na()
    assert v is not None
    return Text(f"{v:.0f}")


# Marks a rate over 60 s of a counter the engine bumps only when a request finishes (explain says so).
AT_FINISH_MARK = "*"


def tps(v: float | None, *, at_finish: bool = False, approximate: bool = False) -> Text:
    """Tokens per second; ``at_finish``: the 60 s rate of a counter counted when requests end, marked;
    ``approximate``: the 60 s rate of a counter printed with few significant digits, marked '~'."""
    if is_missing(v):
        return na()
    assert v is not None
    return Text(("~" if approximate else "") + f"{si(v)} t/s" + (AT_FINISH_MARK if at_finish else ""))


# Marks an energy figure that is an estimate (a shared GPU, MIG, no process visible): explain says why.
ESTIMATE_MARK = "~"


def tok_per_joule(view: EnergyView | None, *, total: bool = False) -> Text:
    """Generated (or prompt + generated) tokens per joule; '~' before an estimate."""
    v = None if view is None else (view.total_tokens_per_joule if total else view.tokens_per_joule)
    if view is None or is_missing(v):
        return na()
    assert v is not None
    text = f"{v:.2f}" if v < 10 else si(v)
    return Text((ESTIMATE_MARK if view.estimate else "") + text)


def per_s(v: float | None) -> Text:
    if is_missing(v):
        return na()
    assert v is not None
    return Text("0/s" if v == 0 else f"{v:.2f}/s" if v < 10 else f"{si(v)}/s")


def pct(fraction: float | None, *, warn: float = 0.9, crit: float = 0.97) -> Text:
    """A 0-1 fraction as a percentage, coloured when high."""
    if is_missing(fraction):
        return na()
    assert fraction is not None
    style = CRIT if fraction >= crit else WARN if fraction >= warn else ""
    return Text(f"{100 * fraction:.0f}%", style=style)


def seconds_text(s: float) -> str:
    if s < 1:
        return f"{s * 1000:.0f} ms" if s >= 0.001 else f"{s * 1000:.2f} ms"
    return f"{s:.2f} s" if s < 10 else f"{s:.0f} s"


def short_seconds(s: float) -> str:
    """A duration in at most 6 cells: 85ms, 1.2s, 340s, 12ks."""
    if s < 1:
        return f"{s * 1000:.0f}ms"
    if s < 100:
        return f"{s:.1f}s"
    return f"{si(s)}s"


def quantile(q: Quantiles, which: str) -> Text:
    """p50/p90/p99 of a latency histogram; '~' and dim when the window had few samples."""
    v: float | None = getattr(q, which)
    if is_missing(v):
        return na()
    assert v is not None
    # ">" when it fell in the +Inf bucket: the shown bound is a lower bound of the truth.
    text = (">" if which in q.capped else "") + seconds_text(v)
    if q.low_sample:
        return Text("~" + text, style="dim")
    return Text(text, style=WARN if which in q.capped else "")


def hbm(used: int | None, total: int | None) -> Text:
    """'71.2/80.0 GiB 89%'"""
    if used is None:
        return na()
    pct_txt = f" {100 * used / total:.0f}%" if total else ""
    tot = f"/{total / GIB:.1f}" if total else ""
    style = WARN if total and used / total > 0.95 else ""
    return Text(f"{used / GIB:.1f}{tot} GiB{pct_txt}", style=style)


def unit(v: float | None, suffix: str, fmt: str = "{:.0f}") -> Text:
    if is_missing(v):
        return na()
    return Text(fmt.format(v) + suffix)


def ago(now: float, then: float | None) -> str:
    if then is None:
        return "never"
    d = max(0.0, now - then)
    if d < 120:
        return f"{d:.0f} s"
    if d < 7200:
        return f"{d / 60:.0f} min"
    return f"{d / 3600:.1f} h"


def staleness(f: Freshness, now: float) -> str:
    """'stale 12 s: connection refused' ('' when fresh). The reason is often an engine's or a remote
    host's words (an error body, stderr): shown inert, on one line."""
    if f.state is SourceState.OK:
        return ""
    reason = shown(f.reason) if f.reason else ""
    if f.state is SourceState.UNAVAILABLE:
        return f"unavailable: {reason}" if reason else "unavailable"
    since = f.stale_since if f.stale_since is not None else f.updated_at
    head = f"stale {ago(now, since)}" if since is not None else "stale"
    return f"{head}: {reason}" if reason else head


_PHASE_STYLE: dict[Phase, tuple[str, str]] = {
    Phase.READY: ("●", "green"),
    Phase.DEGRADED: ("▲", WARN),
    Phase.LOADING: ("◐", "cyan"),
    Phase.STARTING: ("◐", "cyan"),
    Phase.CREATING: ("◐", "cyan"),
    Phase.PULLING: ("◐", "cyan"),
    Phase.STOPPING: ("◑", "cyan"),
    Phase.UNHEALTHY: ("✖", CRIT),
    Phase.UNREACHABLE: ("✖", CRIT),
    Phase.FAILED: ("✖", CRIT),
    Phase.EXITED: ("■", "dim"),
    Phase.UNKNOWN: ("?", "dim"),
}

# Sort order "sickest first" (lower = worse).
PHASE_SEVERITY: dict[Phase, int] = {
    Phase.FAILED: 0,
    Phase.UNREACHABLE: 1,
    Phase.UNHEALTHY: 2,
    Phase.DEGRADED: 3,
    Phase.EXITED: 4,
    Phase.UNKNOWN: 5,
    Phase.STOPPING: 6,
    Phase.PULLING: 7,
    Phase.CREATING: 7,
    Phase.STARTING: 7,
    Phase.LOADING: 7,
    Phase.READY: 9,
}


def plural(n: int, word: str, many: str = "") -> str:
    """'1 engine', '2 engines' ('1 needs', '2 need' with ``many``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def exit_text(code: int | None, oom: bool = False) -> str:
    """'exit 137 (SIGKILL)', 'exit 1', 'OOMKilled, exit 137 (SIGKILL)', 'no exit code'."""
    if code is None:
        return "OOMKilled" if oom else "no exit code"
    text = f"exit {code}"
    if code > 128:
        with contextlib.suppress(ValueError):
            text += f" ({signal.Signals(code - 128).name})"
    return f"OOMKilled, {text}" if oom else text


def _requested_end(code: int | None) -> str:
    """'SIGTERM', 'SIGINT', 'exit 0': how a stop someone asked for ended."""
    text = exit_text(code)
    return text.split("(")[1].rstrip(")") if "(" in text else text


# How a managed engine's last run ended -> (glyph, short word, words, style). A crash is red and
# says so; a stop someone asked for is grey.
_ENDINGS: dict[str, tuple[str, str, str, str]] = {
    "crashed": ("✖", "crashed", "crashed", CRIT),
    "failed": ("✖", "failed", "start failed", CRIT),
    "gave-up": ("✖", "failed", "start given up", CRIT),
    "stopped": ("■", "stopped", "stopped by you", "dim"),
    "outside": ("■", "stopped", "stopped outside this console", "dim"),
    "unknown": ("■", "exited", "ended", "dim"),
}
_ENDING_SAYS_EXIT = frozenset({"crashed", "failed", "outside"})


def _lifecycle_shown(e: EngineSnapshot) -> LifecycleView | None:
    """The lifecycle's view when the phase on screen is the lifecycle's own."""
    v = e.lifecycle
    return v if v is not None and v.phase is e.phase else None


def _ending(e: EngineSnapshot) -> tuple[str, str, str, str] | None:
    v = _lifecycle_shown(e)
    if v is None or not v.ended or e.phase not in (Phase.EXITED, Phase.FAILED):
        return None
    return _ENDINGS.get(v.ended)


def phase(e: EngineSnapshot) -> Text:
    """Glyph + word, so it reads without colour (NO_COLOR); metrics staleness overrides 'ready'."""
    end = _ending(e)
    if end is not None:
        return Text(f"{end[0]} {end[1]}", style=end[3])
    glyph, style = _PHASE_STYLE.get(e.phase, ("?", "dim"))
    if e.phase is Phase.READY and e.metrics_freshness.state is SourceState.STALE:
        return Text("▲ stale", style=WARN)
    if e.phase is Phase.READY and e.invalid:
        return Text("▲ bad data", style=WARN)  # figures out of range, shown as n/a (problem() names them)
    return Text(f"{glyph} {e.phase.value}", style=style)


def health(e: EngineSnapshot, now: float, width: int) -> Text:
    """The health cell: the longest of its forms that fits ``width`` ('✖ crashed: exit 137
    (SIGKILL) 12 s ago', '✖ crashed 12 s ago', '✖ crashed')."""
    short = phase(e)
    forms: list[str] = []
    end = _ending(e)
    v = _lifecycle_shown(e)
    if end is not None and v is not None:
        glyph, _word, words, _style = end
        since = f" {ago(now, v.since)} ago" if v.since is not None else ""
        what = exit_text(v.exit_code, v.oom_killed) if v.ended in _ENDING_SAYS_EXIT else ""
        if v.ended == "failed" and v.exit_code is None:
            what = ""
        if what and v.ended == "outside":
            forms.append(f"{glyph} {words} ({_requested_end(v.exit_code)}){since}")
        elif what:
            forms.append(f"{glyph} {words}: {what}{since}")
        forms += [f"{glyph} {words}{since}", f"{glyph} {words}"]
    elif v is not None and e.phase is Phase.STOPPING and v.countdown:
        forms.append(f"{short.plain}: SIGKILL in {v.countdown} s")
    elif v is not None and e.phase in (Phase.STARTING, Phase.LOADING, Phase.CREATING) and v.since is not None:
        forms.append(f"{short.plain} {ago(now, v.since)}")
    elif e.phase is Phase.READY and e.metrics_freshness.stale and e.metrics_freshness.updated_at is not None:
        seen = ago(now, e.metrics_freshness.updated_at)
        forms += [f"{short.plain}: last seen {seen} ago", f"{short.plain} {seen}"]
    text = next((f for f in forms if len(f) <= width), short.plain)
    return Text(text, style=short.style)


def severity(e: EngineSnapshot) -> int:
    """Sort order "sickest first" (lower = worse): a crash with the failures, a stop you asked for
    after the engines that are starting."""
    end = _ending(e)
    if end is not None:
        v = e.lifecycle
        assert v is not None
        return {"crashed": 0, "failed": 0, "gave-up": 0, "stopped": 8}.get(v.ended, 4)
    return PHASE_SEVERITY.get(e.phase, 5)


def stopped_by_you(e: EngineSnapshot) -> bool:
    end = _ending(e)
    return end is not None and e.lifecycle is not None and e.lifecycle.ended == "stopped"


def is_sick(e: EngineSnapshot) -> bool:
    if stopped_by_you(e):
        return False  # asked for: worth a line, not an alarm
    return e.phase is not Phase.READY or e.metrics_freshness.stale or e.health_freshness.stale or bool(e.invalid)


def problem(e: EngineSnapshot, now: float) -> str:
    """One line saying why an engine needs attention ('' when it does not); the engine's own words in
    it (health detail, reasons, invalid values) shown inert."""
    return shown(_problem(e, now))


def _problem(e: EngineSnapshot, now: float) -> str:
    v = _lifecycle_shown(e)
    if v is not None and e.phase is not Phase.READY:
        # Engine control knows what happens: HTTP refusals while it starts, stops or after it
        # ended are expected, not news, and are not repeated.
        return _lifecycle_problem(e, v, now)
    if e.lifecycle is not None and e.phase is Phase.LOADING and e.health_detail:
        return f"{e.phase.value}: {e.health_detail}"
    parts: list[str] = []
    if e.phase is not Phase.READY:
        detail = e.health_detail or e.health_freshness.reason
        st = staleness(e.health_freshness, now)
        head = e.phase.value
        if st:
            head += f" · {st}"
            if detail and detail not in st:
                head += f" ({detail})"
        elif detail:
            head += f": {detail}"
        parts.append(head)
    mst = staleness(e.metrics_freshness, now)
    if mst and not (parts and e.metrics_freshness.reason and e.metrics_freshness.reason in parts[0]):
        parts.append(f"metrics {mst}")
    if e.invalid:
        parts.append(invalid_summary(e))
    return "; ".join(parts)


def invalid_summary(e: EngineSnapshot, shown: int = 2) -> str:
    """'invalid data, shown as n/a: kv_usage 1e+308 outside 0-1, running ... (+21 more; e lists them)'."""
    head = ", ".join(f.describe() for f in e.invalid[:shown])
    more = len(e.invalid) - shown
    return f"invalid data, shown as n/a: {head}" + (f" (+{more} more; e on health lists them)" if more > 0 else "")


def _lifecycle_problem(e: EngineSnapshot, v: LifecycleView, now: float) -> str:
    since = ago(now, v.since) if v.since is not None else ""
    end = _ending(e)
    if end is not None:
        words = end[2]
        when = f" {since} ago" if since else ""
        if v.ended == "crashed":
            return f"{words}: {exit_text(v.exit_code, v.oom_killed)}{when}"
        if v.ended == "outside":
            return f"{words} ({_requested_end(v.exit_code)}){when}"
        if v.ended == "stopped":
            return f"{words}{when}"
        return f"{words}{when}: {v.detail}" if v.detail else f"{words}{when}"
    head = e.phase.value
    if since and e.phase in (Phase.STARTING, Phase.LOADING, Phase.CREATING, Phase.PULLING):
        head += f" {since}"
    return f"{head}: {v.detail}" if v.detail else head


def mask_args(args: Sequence[str]) -> list[str]:
    """Launch arguments with secret values replaced by '****' (the lifecycle layer's rules)."""
    return secrets.mask_args(args)
