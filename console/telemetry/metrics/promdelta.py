"""One engine's successive scrapes, each parsed as the changes to the one before.

An engine's exposition repeats itself: the same lines in the same order, and from one scrape to the
next most values do not move (under load, a small share of a vLLM payload's lines change).
``ScrapeParser.parse`` compares the new payload's lines with the previous payload's, in C (an
equal line costs a length check and a memcmp, cheaper than hashing each line); when every
changed line is a sample line with the name and labels it had, or a line the ``wanted`` filter
skips either way, the previous result is reused with those samples' values replaced. Anything
else (a line added or removed, a new series, a comment or ``_created`` line that changed, a
malformed line anywhere) is a full ``promtext.parse``, which also records where each sample came
from, for the next payload.

The result equals a full parse of the same payload (tests compare them on mutated payloads). The
previous payload's lines are kept for the comparison (memory in proportion to the payload; the size
for a large vLLM payload is in docs/performance.md). One parser per engine, used by one thread at a
time (the engine's digest worker).
"""

from __future__ import annotations

from array import array
from collections.abc import Container
from itertools import compress, count
from operator import ne

from console.telemetry.metrics.promtext import Family, ParseResult, Sample, known_labels, match_sample_line, parse
from console.telemetry.metrics.wanted import expand_wanted

_SKIP = 0  # a line the wanted filter skips (its name is not wanted)
_SLOT = 1  # a sample line: its family and position are in the slot arrays
_FIXED = 2  # anything else: if it changes, the payload is parsed whole


class ScrapeParser:
    """Parses an engine's payloads, reusing the previous result for what did not change."""

    def __init__(self) -> None:
        self._wanted: frozenset[str] | None = None
        self._result: ParseResult | None = None
        self._lines: list[str] = []  # the previous payload's lines
        self._kinds = bytearray()
        self._slot_family: list[str | None] = []
        self._slot_pos = array("l")
        self.full_parses = 0  # for tests and benchmarks: how often the shortcut did not apply
        self.delta_parses = 0

    def parse(self, payload: bytes | str, wanted: frozenset[str] | None) -> ParseResult:
        if isinstance(payload, bytes):
            try:
                text = payload.decode("utf-8")
            except UnicodeDecodeError:
                return self._full(payload, wanted, None)  # the full parse reports where
        else:
            text = payload
        lines = text.split("\n")
        prev = self._result
        if prev is None or wanted != self._wanted or len(lines) != len(self._lines):
            return self._full(text, wanted, lines)
        if lines == self._lines:
            self.delta_parses += 1
            return prev  # not one line changed: an idle engine
        got = self._delta(prev, lines, wanted)
        if got is None:
            return self._full(text, wanted, lines)
        self.delta_parses += 1
        self._result, self._lines = got, lines
        return got

    def _delta(self, prev: ParseResult, lines: list[str], wanted: frozenset[str] | None) -> ParseResult | None:
        old = self._lines
        kinds, fam_of, pos_of = self._kinds, self._slot_family, self._slot_pos
        accept, prefixes = (None, None) if wanted is None else expand_wanted(wanted)
        plain, labels_of = match_sample_line, known_labels
        copies: dict[str, Family] = {}
        families = prev.families
        # The changed lines' indices, found in C (a Python loop over every line cost more than the rest).
        for i in compress(count(), map(ne, lines, old)):
            kind = kinds[i]
            line = lines[i]
            if kind == _SKIP:
                if not _skipped(line, accept, prefixes):
                    return None
                continue
            if kind != _SLOT:
                return None
            m = plain(line)
            if m is None:
                return None
            name, ltext, token = m.groups()
            fname = fam_of[i]
            assert fname is not None
            fam = copies.get(fname)
            if fam is None:
                was = families[fname]
                fam = copies[fname] = Family(was.name, was.kind, was.help, list(was.samples))
            pos = pos_of[i]
            before = fam.samples[pos]
            labels = () if ltext is None else labels_of(ltext)
            if token is None or name != before[0] or labels != before[1]:
                return None  # another series on this line (or a label text evicted from the cache)
            try:
                value = float(token)
            except ValueError:
                return None
            fam.samples[pos] = tuple.__new__(Sample, (before[0], before[1], value))  # its name and labels kept
        out = ParseResult(families={n: copies.get(n, f) for n, f in families.items()}, created=prev.created,
                          layout=prev.layout)
        out.line_count = prev.line_count
        out.sample_count = prev.sample_count
        return out

    def _full(self, payload: bytes | str, wanted: frozenset[str] | None, lines: list[str] | None) -> ParseResult:
        self.full_parses += 1
        slots: dict[int, tuple[str, int]] = {}
        result = parse(payload, wanted, slots=slots)
        self._wanted = wanted
        if lines is None or result.error_count:
            self._result = None  # no shortcut from a payload with errors: its report needs a full parse
            return result
        accept, prefixes = (None, None) if wanted is None else expand_wanted(wanted)
        kinds = bytearray(len(lines))
        fam_of: list[str | None] = [None] * len(lines)
        pos_of = array("l", [0]) * len(lines)
        for i, line in enumerate(lines):
            slot = slots.get(i)
            if slot is not None:
                kinds[i] = _SLOT
                fam_of[i], pos_of[i] = slot
            elif not _skipped(line, accept, prefixes):
                kinds[i] = _FIXED
        result.layout = object()  # what the next payloads read as changes to this one share
        self._result, self._lines = result, lines
        self._kinds, self._slot_family, self._slot_pos = kinds, fam_of, pos_of
        return result


def _skipped(line: str, accept: Container[str] | None, prefixes: tuple[str, ...] | None) -> bool:
    """Whether a full parse skips this line for its name alone (never a comment, a blank line or a
    line that starts with whitespace, whose meaning does not depend on the filter)."""
    if prefixes is None or accept is None or not line or line[0] == "#" or line[0].isspace():
        return False
    if not line.startswith(prefixes):
        return True
    m = match_sample_line(line)
    return m is not None and m.group(1) not in accept
