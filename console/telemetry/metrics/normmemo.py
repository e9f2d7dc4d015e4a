"""What normalising one engine's payload keeps for its next payload, where only values moved; and
the one statement of every cache on the metrics path (parse, normalise, windows).

From one scrape to the next an engine's samples keep their names and labels, and most values do
not move (on a 2,188-series vLLM payload under load, about one wanted sample in eight).

- **Profile.** The profile the memo was made with: another one forgets everything kept.
- **Picks.** Which samples each mapping reads (its resolved name, the families and the positions
  in them) stand as long as the payload's layout does: a ``ParseResult`` that a ``ScrapeParser``
  read as changes to an earlier one carries that one's ``layout`` token.
- **Histograms.** Grouping a histogram's samples (split each label set, test the mapping's
  ``match``, find the series and shard, read the bucket bound) is the hot loop of normalising a
  large payload. ``HistogramPlan`` is that grouping, kept: which series each sample feeds and how.
  Given the next payload's samples, the changed ones are found in C and only the series they feed
  are rebuilt; every other ``HistogramSeries`` object is reused as it was (and the windows take a
  series they saw before as unchanged).

The caches of the path, each kept because ``benchmarks/cache_worth.py`` shows it saving at least
a tenth of the path's CPU or 0.2 ms a scrape on a demo engine's payload or a 2,188-series one,
from one scrape to the next or (the label shapes) on an engine's first scrape (the table, and the
caches removed for saving less, are in docs/performance.md):

- per engine: its ``ScrapeParser`` (``promdelta.py``: the previous payload's lines and result), this
  memo, and in ``windows.EngineMetricsState`` each histogram series' last ``HistogramSeries`` object
  with the vector it gave;
- process-wide, shared by the engines' digest threads: the wanted-name expansions
  (``wanted._CACHE``: a frozenset of names -> the names kept and the line prefixes), parsed label
  sets (``promtext._LABEL_CACHE``: label text -> sorted pairs), label shapes
  (``promtext._SHAPES``: a label text with its values cut out -> its sorted names and where their
  values are) and label splits (``normalize._SPLIT_CACHES``: split configuration -> label set ->
  ``LabelSplit``).

Invariants (the differential tests, tests/telemetry/test_normmemo.py and test_promdelta.py, check
them on seeded mutated payloads and print their seed; ``cache_worth.py`` compares each cache on and
off on the simulators' payloads):

1. A reading made with the caches equals one made from scratch, payload after payload.
2. What is kept is keyed by what it was made from, never by an object's ``id()``: picks by the
   payload's layout token (an object the memo holds, compared with ``is``) and the mapping's
   ``PartKey`` (canonical name, part index); plans by the ``PartKey`` and the label split's
   configuration; the memo's profile and the windows' last series are held and compared with
   ``is``; the process-wide caches by value (the wanted names, the label text, its shape, the
   configuration and the label set). Another profile, layout or configuration starts that part
   afresh.
3. A changed sample whose name or labels differ, or a different sample count, is a new plan.
4. Per-engine state (parser, memo, windows) is used by one thread at a time (the engine's digest
   worker) and shared with no other engine, so it needs no lock.
5. A process-wide entry is a pure function of its key, so two threads adding the same one agree.
   A read is one dict lookup (atomic under the interpreter lock) and takes no lock; every write
   and every clearing holds a lock (``promtext.CACHE_LOCK``; ``wanted.py``'s own, as promtext
   imports it). Each is bounded, emptied when over its bound: about 64 wanted sets; about 50,000
   label texts or 8 MiB of them, none over 4 KiB; about 1 MiB of shapes; about 64 configurations
   of about 50,000 label sets each (checked as a reading starts). A cache is only ever cleared in
   place (``promdelta`` holds ``_LABEL_CACHE.get``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import compress, count
from operator import ne
from typing import TYPE_CHECKING, Literal, NamedTuple

from console.telemetry.metrics.promtext import Sample
from console.telemetry.metrics.readings import HistogramSeries, SeriesKey

if TYPE_CHECKING:
    from console.profiles import EngineProfile

_INF = math.inf
# What a sample gives its series: a bucket's bound (a float), the sum, the count, or nothing.
_SUM = "sum"
_COUNT = "count"
_Role = float | str | None
_Ident = tuple[str, SeriesKey, SeriesKey]  # (model, series key, shard key)
PartKey = tuple[str, int]  # (canonical name, index of the part: 0 the mapping, then its ``plus``)


class LabelSplit(NamedTuple):
    """A label set split by normalize's layout (made once per label set, kept across scrapes)."""

    model: str
    key: SeriesKey  # the series key: every label but the model, shard and ``le`` ones
    shard: SeriesKey
    replica: SeriesKey
    le: float | None  # a bucket's bound; None for no ``le`` label or one that is not a number
    ident: _Ident  # (model, key, shard), built once so that the hot loops build no tuple per sample


Split = Callable[[SeriesKey], LabelSplit]


class HistAcc:
    """One histogram series being read: bucket bound -> cumulative count, the sum, the count."""

    __slots__ = ("buckets", "count", "problem", "problem_value", "sum")

    def __init__(self) -> None:
        self.buckets: dict[float, float] = {}
        self.sum: float | None = None
        self.count: float | None = None
        self.problem = ""  # why the samples cannot be read as a histogram ("" when they can)
        self.problem_value = math.nan


class Picks(NamedTuple):
    """Which samples a mapping reads: its resolved name's index, where they sit (family name, positions
    of its samples), and the families read."""

    name_index: int
    where: list[tuple[str, list[int]]]
    families: set[str]


class HistogramPlan:
    """Which series (model, key, shard) each sample of one histogram mapping feeds, and how."""

    __slots__ = ("bad", "ident_of", "members", "replicas", "role_of", "shards")

    def __init__(self, samples: list[Sample], split: Split, keep: Callable[[SeriesKey], bool] | None) -> None:
        n = len(samples)
        self.ident_of: list[_Ident | None] = [None] * n
        self.role_of: list[_Role] = [None] * n
        self.members: dict[_Ident, list[int]] = {}  # in sample order: the last finite value wins
        self.replicas: dict[str, set[SeriesKey]] = {}  # model -> replica keys (also of filtered series)
        # Series whose layout is invalid whatever the values: a bucket whose ``le`` is not a number,
        # a sample given twice (same name and labels). Found once per layout, like the rest.
        self.bad: dict[_Ident, tuple[str, float]] = {}
        shards: dict[tuple[str, SeriesKey], list[_Ident]] = {}
        for i, (name, labels, value) in enumerate(samples):
            hit = split(labels)
            reps = self.replicas.get(hit.model)
            if reps is None:
                reps = self.replicas[hit.model] = set()
            reps.add(hit.replica)
            if keep is not None and not keep(labels):
                continue  # the metric exists for this model; this series is filtered out
            ident = hit.ident
            self.ident_of[i] = ident
            idx = self.members.get(ident)
            if idx is None:
                idx = self.members[ident] = []
                shards.setdefault((ident[0], ident[1]), []).append(ident)
            idx.append(i)
            if name[-7:] == "_bucket":
                bound = hit.le
                if bound is not None and bound == bound and bound != -_INF:  # not NaN, not -Inf
                    self.role_of[i] = bound
                elif ident not in self.bad:
                    le = dict(labels).get("le")
                    self.bad[ident] = (f"{name} has le={le!r}, not a bucket bound" if le is not None
                                       else f"{name} has no le label", value)
            elif name[-4:] == "_sum":
                self.role_of[i] = _SUM
            elif name[-6:] == "_count":
                self.role_of[i] = _COUNT
        role_of = self.role_of
        for ident, members in self.members.items():
            if len(members) > 1 and ident not in self.bad and len({role_of[i] for i in members}) < len(members):
                self._duplicate(ident, members, samples)
        # (model, key) -> its shards' series, where there is more than one shard (TP/PP ranks).
        self.shards = shards

    def _duplicate(self, ident: _Ident, members: list[int], samples: list[Sample]) -> None:
        """Mark a series that has a sample twice (the same name and labels): which one to keep is
        not known, so neither is kept."""
        seen: set[_Role] = set()
        for i in members:
            role = self.role_of[i]
            if role in seen:
                name, labels, value = samples[i]
                shown = ",".join(f'{k}="{v}"' for k, v in labels)
                self.bad[ident] = (f"{name}{{{shown[:120]}}} appears twice in one payload", value)
                return
            seen.add(role)

    def fill(self, ident: _Ident, samples: list[Sample]) -> HistAcc:
        """One series' buckets, sum and count from ``samples``."""
        h = HistAcc()
        if self.bad:
            bad = self.bad.get(ident)
            if bad is not None:
                h.problem, h.problem_value = bad
                return h
        buckets = h.buckets
        role_of = self.role_of
        for i in self.members[ident]:
            value = samples[i][2]
            role = role_of[i]
            if not -_INF < value < _INF:  # NaN or an infinity: no usable count or sum
                if role is not _SUM and not h.problem:  # a bucket or the count: no histogram
                    name = samples[i][0]
                    h.problem = (f"{name} is {_nonfinite(value)}" if role is _COUNT
                                 else f"{name} le={role:g} is {_nonfinite(value)}")
                    h.problem_value = value
                continue
            if role is _SUM:
                h.sum = value
            elif role is _COUNT:
                h.count = value
            elif role is not None:
                buckets[role] = value  # type: ignore[index]  # neither _SUM nor _COUNT: a bound
        return h


class _Entry:
    __slots__ = ("accs", "out", "plan", "samples")

    def __init__(self, plan: HistogramPlan, samples: list[Sample], accs: dict[_Ident, HistAcc],
                 out: dict[str, dict[SeriesKey, HistogramSeries]]) -> None:
        self.plan, self.samples, self.accs, self.out = plan, samples, accs, out


class NormalizeMemo:
    """One engine's profile, picks and histogram plans and series, from its previous payload."""

    def __init__(self) -> None:
        self._profile: EngineProfile | None = None
        self._entries: dict[PartKey, _Entry] = {}
        self._split_config: object = None
        self._picks: dict[PartKey, Picks | None] = {}
        self._picks_layout: object = None
        self.rebuilt = 0  # for tests and benchmarks: series built, and mappings planned anew
        self.planned = 0

    def for_profile(self, profile: EngineProfile) -> None:
        """Read with ``profile``: another profile than the last forgets everything kept."""
        if profile is self._profile:
            return
        self._entries.clear()
        self._split_config = None
        self._picks.clear()
        self._picks_layout = None
        self._profile = profile

    def picks(self, layout: object, part: PartKey) -> Picks | Literal[False] | None:
        """The picks kept for a mapping's part under this payload ``layout`` (None: it has no samples);
        False when there are none kept."""
        if layout is None or layout is not self._picks_layout:
            return False
        return self._picks.get(part, False)

    def keep_picks(self, layout: object, part: PartKey, picks: Picks | None) -> None:
        if layout is None:
            return
        if layout is not self._picks_layout:
            self._picks.clear()
            self._picks_layout = layout
        self._picks[part] = picks

    def series(self, part: PartKey, split_config: object, samples: list[Sample], split: Split,
               keep: Callable[[SeriesKey], bool] | None, build: Callable[[HistAcc], HistogramSeries],
               size: Callable[[HistAcc], float]) -> tuple[dict[str, dict[SeriesKey, HistogramSeries]],
                                                         dict[str, set[SeriesKey]]]:
        """(model -> series key -> series, model -> replica keys) for one mapping part's samples.

        ``split_config`` names the label split and ``part`` the mapping's part (its match and scale):
        a memo made under another split starts afresh. ``build`` turns a series' accumulator into a
        ``HistogramSeries``; ``size`` ranks shards (the one with the largest count is kept, whole).
        """
        if split_config != self._split_config:
            self._entries.clear()
            self._split_config = split_config
        key = part
        entry = self._entries.get(key)
        changed = None if entry is None else _changed(entry.samples, samples)
        if entry is None or changed is None:
            plan = HistogramPlan(samples, split, keep)
            self.planned += 1
            accs = {ident: plan.fill(ident, samples) for ident in plan.members}
            out: dict[str, dict[SeriesKey, HistogramSeries]] = {m: {} for m in plan.replicas}
            for (model, skey), idents in plan.shards.items():
                out[model][skey] = _build_largest(idents, accs, size, build)
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
            out[model][skey] = _build_largest(plan.shards[(model, skey)], accs, size, build)
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


def _build_largest(idents: list[_Ident], accs: dict[_Ident, HistAcc], size: Callable[[HistAcc], float],
                   build: Callable[[HistAcc], HistogramSeries]) -> HistogramSeries:
    """The series of the shard with the largest count (the first of equals, in sample order); an
    invalid shard's, whatever its count: the shards report one logical value, and one that cannot
    be true makes it unknown."""
    best = accs[idents[0]]
    if len(idents) == 1:
        return build(best)
    built = build(best)
    if built.problem:
        return built
    for ident in idents[1:]:
        h = accs[ident]
        series = build(h)
        if series.problem:
            return series
        if size(h) > size(best):
            best, built = h, series
    return built


def _nonfinite(value: float) -> str:
    return "NaN" if value != value else ("+Inf" if value > 0 else "-Inf")
