"""Which lines of a payload the parser keeps: the metric names a caller wants, grown by the child
suffixes of histograms and summaries (``_bucket``, ``_sum``, ``_count``), and the shortest prefixes
that let the parser skip a line with one ``startswith``. Pure functions over names; used by
``promtext.parse``."""

from __future__ import annotations

import threading
from collections.abc import Container

__all__ = ["CHILD_SUFFIXES", "expand_wanted"]

CHILD_SUFFIXES = ("_bucket", "_sum", "_count")


def expand_wanted(wanted: Container[str]) -> tuple[Container[str], tuple[str, ...] | None]:
    """(names to keep, the shortest prefixes of those names, or None): a line that starts with none
    of the prefixes (nor with whitespace or '#') cannot have a wanted name, and is skipped with one
    ``startswith`` instead of reading its name."""
    if isinstance(wanted, frozenset):
        hit = _CACHE.get(wanted)
        if hit is not None:
            return hit
    if isinstance(wanted, set | frozenset | dict | list | tuple):
        names = set(wanted)
        accept = frozenset(names | {n + s for n in names for s in CHILD_SUFFIXES})
        prefixes = [n for n in sorted(names) if n and not any(n.startswith(m) for m in names if m and m != n)]
        out: tuple[Container[str], tuple[str, ...] | None] = (accept, None if "" in names else (*prefixes, "#"))
        if isinstance(wanted, frozenset):
            with _LOCK:  # shared by the engines' digest threads: a read is one lookup, writes lock
                if len(_CACHE) > 64:
                    _CACHE.clear()
                _CACHE[wanted] = out
        return out
    # An arbitrary container: test each line's name and its suffix-stripped base against it.
    return _StrippingContainer(wanted), None


_CACHE: dict[frozenset[str], tuple[Container[str], tuple[str, ...] | None]] = {}
_LOCK = threading.Lock()


class _StrippingContainer:
    def __init__(self, inner: Container[str]) -> None:
        self._inner = inner

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self._inner:
            return True
        return any(name.endswith(s) and name[: -len(s)] in self._inner for s in CHILD_SUFFIXES)
