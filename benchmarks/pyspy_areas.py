"""Where a console's CPU goes, by area, from py-spy's raw output (`console_figures.py --py-spy DIR`).

    .venv/bin/python benchmarks/pyspy_areas.py DIR/0.txt [DIR/1.txt ...] [--seconds 60 --rate 100]
        [--grep PATTERN ...] [--top 25]

Each file holds collapsed stacks (`py-spy record --gil --threads -f raw`): one line per distinct stack,
its frames root first separated by ";", then its count of samples. A sample is taken only while a
thread holds the GIL, so the counts are where the process ran Python (and what it called while
holding the GIL). Each stack is put in the first area below one of whose frames it holds; an area's
share is its samples over the file's, and with --seconds and --rate also as a share of a core.
--grep adds the inclusive share of each PATTERN (a substring of a frame) per file; --top lists the
functions with the most samples of their own (the innermost frame).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

# (area, substrings of a frame): the first area one of whose substrings is in some frame of a stack
# takes the stack. Screen work first (it calls into Textual), then Textual's own, then the hub.
AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("overview trends (_sparks)", ("_sparks ", "_redraw_trends ")),
    ("top bar (refresh_top)", ("refresh_top ", "(console/ui/screens/base.py")),
    ("footer (DeckFooter)", ("console/ui/widgets/footer.py",)),
    ("alert toasts", ("_toast_alert_changes ",)),
    ("show_fleet: engines table", ("_show_engines ",)),
    ("show_fleet: GPU table", ("_show_gpus ",)),
    ("show_fleet: other", ("show_fleet ",)),
    ("our lines' strips (Line/RowTable render_line)",
     ("console/ui/widgets/line.py", "console/ui/widgets/row_table.py")),
    ("Textual compositor and rendering", ("textual/_compositor.py", "textual/strip.py", "render_line ",
                                          "textual/_segment_tools.py", "rich/segment.py", "textual/renderables/",
                                          "textual/content.py", "textual/visual.py", "textual/widget.py")),
    ("Textual layout and styles", ("textual/_arrange.py", "textual/_layout.py", "textual/layouts/",
                                   "textual/css/", "textual/dom.py", "textual/_styles_cache.py")),
    ("Textual driver and output", ("textual/drivers/", "console/ui/terminal_driver.py", "textual/_xterm_parser.py")),
    ("Textual timers and message pump", ("textual/timer.py", "textual/message_pump.py", "textual/app.py",
                                         "textual/screen.py", "textual/signal.py")),
    ("hub: fetch (transport)", ("console/transport/",)),
    ("hub: parse (promtext/promdelta)", ("promtext.py", "promdelta.py")),
    ("hub: normalise", ("normalize.py", "normmemo.py", "wanted.py", "features.py", "readings.py", "windows.py",
                        "info_gauges.py", "recognize.py")),
    ("hub: history and fan-out", ("console/telemetry/fanout.py", "console/telemetry/metrics/history.py")),
    ("hub: alerts", ("console/alerts/",)),
    ("hub: GPU side", ("console/telemetry/gpu/",)),
    ("hub: host side", ("console/telemetry/host/", "psutil/")),
    ("hub: collector and assembly", ("console/telemetry/",)),
    ("asyncio and threads", ("asyncio/", "threading.py", "selectors.py", "concurrent/")),
)
OTHER = "other"
FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def read_stacks(path: Path) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


def area_of(stack: tuple[str, ...]) -> str:
    for area, needles in AREAS:
        if any(n in frame for frame in stack for n in needles):
            return area
    return OTHER


def thread_of(stack: tuple[str, ...]) -> str:
    """The thread's name (``--threads`` makes it the first frame: ``thread (TID): NAME``); the UI's
    loop runs in MainThread, collection in enginedeck-hub, digests and host reads in workers."""
    first = stack[0]
    if not first.startswith("thread ("):
        return "(no thread names: record with --threads)"
    name = first.partition("): ")[2] or first
    return "UI (MainThread)" if name == "MainThread" else name.rstrip("_0123456789") or name


def own_function(stack: tuple[str, ...]) -> str:
    m = FRAME.match(stack[-1])
    return f"{m['name']} ({m['file']})" if m else stack[-1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--seconds", type=float, default=0.0, help="the recording's length (share of a core)")
    ap.add_argument("--rate", type=float, default=100.0, help="py-spy's samples a second")
    ap.add_argument("--grep", action="append", default=[], help="inclusive share of frames holding this")
    ap.add_argument("--top", type=int, default=0, help="the N functions with the most samples of their own")
    args = ap.parse_args()
    tables = [read_stacks(f) for f in args.files]
    totals = [sum(t.values()) for t in tables]
    width = 48

    def cell(n: int, total: int) -> str:
        core = f" {100 * n / (args.rate * args.seconds):5.2f}%c" if args.seconds else ""
        return f"{100 * n / max(1, total):5.1f}%{core}".rjust(16)

    print("samples".ljust(width) + "".join(str(t).rjust(16) for t in totals))
    print("(columns: " + ", ".join(str(f) for f in args.files) + "; %c: of a core)")
    for title, key in (("by thread", thread_of), ("by area", area_of)):
        print(f"\n{title}")
        counts = [Counter[str]() for _ in tables]
        for c, table in zip(counts, tables, strict=True):
            for stack, n in table.items():
                c[key(stack)] += n
        names = sorted({k for c in counts for k in c}, key=lambda k: -counts[0][k])
        for name in names:
            print(name[:width].ljust(width) + "".join(cell(c[name], t) for c, t in zip(counts, totals, strict=True)))
    if args.grep:
        print("\ninclusive")
        for pattern in args.grep:
            shares = [sum(n for s, n in table.items() if any(pattern in f for f in s)) for table in tables]
            print(pattern[:width].ljust(width) + "".join(cell(n, t) for n, t in zip(shares, totals, strict=True)))
    if args.top:
        for path, table, total in zip(args.files, tables, totals, strict=True):
            own: Counter[str] = Counter()
            for stack, n in table.items():
                own[own_function(stack)] += n
            print(f"\nown samples, {path}")
            for name, n in own.most_common(args.top):
                print(f"{100 * n / max(1, total):5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
