"""Garbage collection paused while a command starts, and run less often once it has.

Starting the console makes a few hundred thousand long-lived objects (modules, classes, the methods
dataclasses write), and the collector walks them again and again while they are being made: about
0.15-0.2 s of a 1 s start, measured here. ``cli.main`` pauses collection first thing; a command that
paints resumes it just before its first frame (``ui.launch``), every other command as soon as its
arguments are parsed. What exists by then is frozen out of later collections: it lives as long as
the process does.

Then the youngest generation is collected every ``YOUNG`` allocations instead of CPython's 700. Each
scrape of a large payload makes tens of thousands of objects that live until the engine's next
scrape; at 700 each of them is walked by several young collections before it is promoted, and the
collector took 0.78 ms of a 4.85 ms sample (16 engines of 2,188 series, ``benchmarks/hub_cpu.py``),
0.10 ms at 50,000. The hub makes no reference cycles (a 20 s run with collection off left none to
collect), so garbage waits no longer in practice.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG", "pause", "resume"]

YOUNG = 50_000


def pause() -> None:
    gc.disable()


def resume() -> None:
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG, older, oldest)
