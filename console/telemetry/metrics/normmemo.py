"""What normalising one engine's payload keeps for its next payload, where only values moved.

From one scrape to the next an engine's samples keep their names and labels, and most values do
not move (on a 2,188-series vLLM payload under load, about one wanted sample in eight).

- **Picks.** Which samples each mapping reads (its resolved name, the families and the positions
  in them) stand as long as the payload's layout does: a ``ParseResult`` that a ``ScrapeParser``
  read as changes to an earlier one carries that one's ``layout`` token.
- **Histograms.** Grouping a histogram's samples (split each label set, test the mapping's
  ``match``, find the series and shard, read the bucket bound) is the hot loop of normalising a
  large payload. ``HistogramPlan`` is that grouping, kept: which series each sample feeds and how.
  Given the next payload's samples, the changed ones are found in C and only the series they feed
  are rebuilt; every other ``HistogramSeries`` object is reused as it was (and the windows take a
  series they saw before as unchanged).

The results equal a reading from scratch (tests compare them on mutated payloads): a changed
sample whose name or labels differ, or a different sample count, is a new plan. One memo per
engine, used by one thread at a time (the engine's digest worker), like its ``ScrapeParser``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import compress, count
from operator import ne
from typing import Any, Literal

from console.telemetry.metrics.promtext import Sample
from console.telemetry.metrics.readings import HistogramSeries, SeriesKey

_INF = math.inf
# What a sample gives its series: a bucket's bound (a float), the sum, the count, or nothing.
_SUM = "sum"
_COUNT = "count"
_Role = float | str | None
_Ident = tuple[str, SeriesKey, SeriesKey]  # (model, series key, shard key)
# A label set -> (model, series key, shard key, replica key, ``le`` bound, ident): normalize's split.
Split = Callable[[SeriesKey], tuple[str, SeriesKey, SeriesKey, SeriesKey, float | None, _Ident]]


class HistogramPlan:
    """Which series (model, key, shard) each sample of one histogram mapping feeds, and how."""

    __slots__ = ("ident_of", "members", "replicas", "role_of", "shards")

    def __init__(self, samples: list[Sample], split: Split, keep: Callable[[SeriesKey], bool] | None) -> None:
        n = len(samples)
        self.ident_of: list[_Ident | None] = [None] * n
        self.role_of: list[_Role] = [None] * n
        self.members: dict[_Ident, list[int]] = {}  # in sample order: the last finite value wins
        self.replicas: dict[str, set[SeriesKey]] = {}  # model -> replica keys (also of filtered series)
        shards: dict[tuple[str, SeriesKey], list[_Ident]] = {}
        for i, (name, labels, _value) in enumerate(samples):
            hit = split(labels)
            reps = self.replicas.get(hit[0])
            if reps is None:
                reps = self.replicas[hit[0]] = set()
            reps.add(hit[3])
            if keep is not None and not keep(labels):
                continue  # the metric exists for this model; this series is filtered out
            ident = hit[5]
            self.ident_of[i] = ident
            idx = self.members.get(ident)
            if idx is None:
                idx = self.members[ident] = []
                shards.setdefault((ident[0], ident[1]), []).append(ident)
            idx.append(i)
            if name[-7:] == "_bucket":
                bound = hit[4]
                if bound is not None and bound == bound and bound != -_INF:  # not NaN, not -Inf
                    self.role_of[i] = bound
            elif name[-4:] == "_sum":
                self.role_of[i] = _SUM
            elif name[-6:] == "_count":
                self.role_of[i] = _COUNT
        # (model, key) -> its shards' series, where there is more than one shard (TP/PP ranks).
        self.shards = shards

    def fill(self, ident: _Ident, samples: list[Sample]) -> list[Any]:
        """One series' [bucket bound -> count, sum or None, count or None] from ``samples``."""
        h: list[Any] = [{}, None, None]
        role_of = self.role_of
        for i in self.members[ident]:
            value = samples[i][2]
            if not -_INF < value < _INF:  # NaN or an infinity: no usable count or sum
                continue
            role = role_of[i]
            if role is _SUM:
                h[1] = value
            elif role is _COUNT:
                h[2] = value
            elif role is not None:
                h[0][role] = value
        return h


class _Entry:
    __slots__ = ("accs", "out", "plan", "samples")

    def __init__(self, plan: HistogramPlan, samples: list[Sample], accs: dict[_Ident, list[Any]],
                 out: dict[str, dict[SeriesKey, HistogramSeries]]) -> None:
        self.plan, self.samples, self.accs, self.out = plan, samples, accs, out


# A mapping's picks: (index of the resolved name, [(family name, positions of its samples)], the
# families read); None when none of its names has samples.
Picks = tuple[int, list[tuple[str, list[int]]], set[str]] | None


class NormalizeMemo:
    """One engine's picks and histogram plans and series, from its previous payload."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, int], _Entry] = {}
        self._split_config: object = None
        self._picks: dict[int, Picks] = {}
        self._picks_layout: object = None
        self.rebuilt = 0  # for tests and benchmarks: series built, and mappings planned anew
        self.planned = 0

    def picks(self, layout: object, mapping_id: int) -> Picks | Literal[False]:
        """The picks kept for a mapping under this payload ``layout``; False when there are none."""
        if layout is None or layout is not self._picks_layout:
            return False
        return self._picks.get(mapping_id, False)

    def keep_picks(self, layout: object, mapping_id: int, picks: Picks) -> None:
        if layout is None:
            return
        if layout is not self._picks_layout:
            self._picks.clear()
            self._picks_layout = layout
        self._picks[mapping_id] = picks

    def series(self, canonical: str, mapping_id: int, split_config: object, samples: list[Sample], split: Split,
               keep: Callable[[SeriesKey], bool] | None, build: Callable[[list[Any]], HistogramSeries],
               size: Callable[[list[Any]], float]) -> tuple[dict[str, dict[SeriesKey, HistogramSeries]],
                                                            dict[str, set[SeriesKey]]]:
        """(model -> series key -> series, model -> replica keys) for one mapping's samples.

        ``split_config`` names the label split and ``mapping_id`` the mapping (its match and scale):
        a memo made under others starts afresh. ``build`` turns a series' accumulator into a
        ``HistogramSeries``; ``size`` ranks shards (the one with the largest count is kept, whole).
        """
        if split_config != self._split_config:
            self._entries.clear()
            self._split_config = split_config
        key = (canonical, mapping_id)
        entry = self._entries.get(key)
        changed = None if entry is None else _changed(entry.samples, samples)
        if entry is None or changed is None:
            plan = HistogramPlan(samples, split, keep)
            self.planned += 1
            accs = {ident: plan.fill(ident, samples) for ident in plan.members}
            out: dict[str, dict[SeriesKey, HistogramSeries]] = {m: {} for m in plan.replicas}
            for (model, skey), idents in plan.shards.items():
                out[model][skey] = build(_largest(idents, accs, size))
            self.rebuilt += len(plan.shards)
            self._entries[key] = _Entry(plan, samples, accs, out)
            return out, plan.replicas
        plan = entry.plan
        entry.samples = samples
        if not changed:
            return entry.out, plan.replicas
        ident_of, accs = plan.ident_of, entry.accs
        touched: set[_Ident] = set()
        for i in changed:
            ident = ident_of[i]
            if ident is not None:
                touched.add(ident)
        if not touched:
            return entry.out, plan.replicas
        for ident in touched:
            accs[ident] = plan.fill(ident, samples)
        out = {m: dict(series) for m, series in entry.out.items()}  # the previous reading keeps its own
        for model, skey in {(i[0], i[1]) for i in touched}:
            out[model][skey] = build(_largest(plan.shards[(model, skey)], accs, size))
        self.rebuilt += len(touched)
        entry.out = out
        return out, plan.replicas


def _changed(before: list[Sample], now: list[Sample]) -> list[int] | None:
    """Indices of the samples whose value moved; None when the samples are not the same series in
    the same order (a sample added or removed, another name or label set at some position)."""
    if len(before) != len(now):
        return None
    changed = list(compress(count(), map(ne, now, before)))  # found in C: most samples are unchanged
    for i in changed:
        a, b = now[i], before[i]
        if a[0] != b[0] or a[1] != b[1]:
            return None
    return changed


def _largest(idents: list[_Ident], accs: dict[_Ident, list[Any]], size: Callable[[list[Any]], float]) -> list[Any]:
    """The accumulator of the shard with the largest count (the first of equals, in sample order)."""
    best = accs[idents[0]]
    for ident in idents[1:]:
        h = accs[ident]
        if size(h) > size(best):
            best = h
    return best
