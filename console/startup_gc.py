"""Garbage collection paused while a command starts.

Starting the console makes a few hundred thousand long-lived objects (modules, classes, the methods
dataclasses write), and the collector walks them again and again while they are being made: about
0.15-0.2 s of a 1 s start, measured here. ``cli.main`` pauses collection first thing; a command that
paints resumes it just before its first frame (``ui.launch``), every other command as soon as its
arguments are parsed. What exists by then is frozen out of later collections: it lives as long as
the process does.
"""

from __future__ import annotations

import gc

from console import gcpause

__all__ = ["pause", "resume"]

_held = False  # whether the start-up pause is in force (resume is called from more than one place)


def pause() -> None:
    global _held
    if not _held:
        _held = True
        gcpause.pause()


def resume() -> None:
    global _held
    if _held:
        _held = False
        gc.freeze()
        gcpause.resume()
