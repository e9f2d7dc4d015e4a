"""Raw metric samples -> canonical per-model values, driven by an engine profile.

``normalize(profile, payload)`` parses a payload (Prometheus text or trtllm-serve JSON) and maps it
with ``profile.metrics``:

- **Name resolution.** For each canonical metric the first raw name of ``names`` present in the
  payload (with at least one sample) wins; ``Resolution.legacy`` is true when it is not
  ``names[0]``. Gauges and counters are looked up by sample name (``vllm:prompt_tokens_total``),
  histograms by base name (``_bucket``/``_sum``/``_count``), ``histogram_sum``/``histogram_count``
  by ``<name>_sum``/``<name>_count`` (TGI's token counts).
- **Filters.** ``match`` keeps only series whose label has one of the listed values; a key ``a|b``
  reads label ``a``, else label ``b``. ``scale`` multiplies gauge and counter values and histogram
  bounds and sums.
- **Series.** Series are split by ``model_label`` (engines without one give the single model
  ``""``). Within a model a series is identified by its labels minus the model label, the
  ``shard_labels`` and ``le``: series that differ only in shard labels (TP/PP ranks) report the same
  logical value, so the largest is kept (for a histogram: the shard with the largest count, whole),
  never the sum. The remaining series (DP replicas, ``finished_reason`` values ...) are kept apart in
  ``ModelReading.counters`` / ``histograms`` so that windows can detect resets per series; gauges
  are combined at once with the mapping's ``aggregate`` (sum / max / mean), and ``kv_usage`` also
  gets its mean over series (``kv_usage_mean``).
- **Bookkeeping.** ``unmapped``: raw family names (with samples) that no mapping used;
  ``missing``: canonical metrics the profile maps but the payload lacked; ``raw``: every raw sample
  for a metrics browser (built lazily on first access).

Nothing here raises on bad payloads: garbage gives a ``Reading`` with ``errors`` and
``empty == True`` (no sample parsed at all), which callers test instead of catching an exception.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from operator import lt
from typing import TYPE_CHECKING

from console import gc_control
from console.model import InvalidFigure
from console.profiles import EngineProfile, MetricMapping
from console.telemetry.metrics.info_gauges import adopt_engine_counters, adopt_unlabelled, from_label
from console.telemetry.metrics.normmemo import HistAcc, LabelSplit, NormalizeMemo, PartKey, Picks
from console.telemetry.metrics.promtext import CACHE_LOCK, Family, ParseResult, Sample, parse
from console.telemetry.metrics.promtext import clear_caches as clear_label_caches
from console.telemetry.metrics.readings import (
    HistogramSeries,
    ModelReading,
    PayloadFormat,
    Reading,
    Resolution,
    SeriesKey,
    finite_sum,
)
from console.telemetry.metrics.trtjson import parse_trtllm_json

if TYPE_CHECKING:
    from console.telemetry.metrics.promdelta import ScrapeParser

__all__ = ["clear_caches", "normalize", "parse_payload", "sniff_format", "wanted_names"]

def escaped_name(name: str) -> str:
    """A metric name as prometheus_client (0.22+) writes it in OpenMetrics and text 1.0.0 samples under
    the default ``escaping=underscores``: ``vllm:num_requests_running`` -> ``vllm_num_requests_running``
    (the HELP/TYPE lines keep the colon). A Prometheus server stores the escaped form too."""
    return name.replace(":", "_")


def wanted_names(profile: EngineProfile) -> frozenset[str]:
    """Raw names the profile maps, also in their escaped form (for ``promtext.parse(wanted=...)``)."""
    names = [n for m in profile.metrics.map.values() for n in m.raw_names()]
    # Counters' ``_created`` series (prometheus_client): x_total -> x_created; and their OpenMetrics
    # family name x (declared with no sample yet, the family of a first-use counter is still there).
    bases = [n.removesuffix("_total") for m in _counter_parts(profile) for n in m.names]
    names += bases + [b + "_created" for b in bases]
    return frozenset(names + [escaped_name(n) for n in names])


def _counter_parts(profile: EngineProfile) -> list[MetricMapping]:
    out: list[MetricMapping] = []
    for m in profile.metrics.map.values():
        if m.kind == "counter":
            out += [m, *(p for p in m.plus if p.kind == "counter")]
    return out


def sniff_format(payload: bytes | str) -> PayloadFormat:
    """JSON (trtllm-serve iteration stats) when the payload starts with ``[`` or ``{``."""
    head = payload[:64]
    head_s = head.decode("utf-8", errors="replace") if isinstance(head, bytes) else head
    head_s = head_s.lstrip("\ufeff \t\r\n")
    return "trtllm-json" if head_s[:1] in ("[", "{") else "prometheus"


def parse_payload(payload: bytes | str, *, format: PayloadFormat | None = None, wanted: frozenset[str] | None = None,
                  parser: ScrapeParser | None = None) -> tuple[PayloadFormat, ParseResult]:
    fmt = format or sniff_format(payload)
    if fmt == "trtllm-json":
        return fmt, parse_trtllm_json(payload)
    if parser is not None:
        return fmt, parser.parse(payload, wanted)
    return fmt, parse(payload, wanted)


def normalize(profile: EngineProfile, payload: bytes | str | ParseResult, *, format: PayloadFormat | None = None,
              full: bool = True, parser: ScrapeParser | None = None, memo: NormalizeMemo | None = None) -> Reading:
    """Parse (unless given a ParseResult) and map a payload with ``profile``. Never raises.

    ``format``: None sniffs (JSON -> trtllm-json, else Prometheus text).
    ``full=False`` parses only the families the profile maps (much faster on large payloads);
    ``raw`` and ``unmapped`` then cover only those.
    ``parser``: the engine's ``ScrapeParser`` (its payloads read as changes to the previous one).
    ``memo``: the engine's ``NormalizeMemo`` (which samples each mapping reads, kept while the payload's
    layout stands; histogram series rebuilt only where values moved).
    """
    # A payload becomes tens of thousands of tuples, none in a reference cycle: the cyclic collector
    # would only walk them (and every other object of the process, in its full passes) over and
    # over while they are made. It runs once afterwards instead.
    with gc_control.paused():
        return _normalize(profile, payload, format, full, parser, memo)


def _normalize(profile: EngineProfile, payload: bytes | str | ParseResult, format: PayloadFormat | None, full: bool,
               parser: ScrapeParser | None, memo: NormalizeMemo | None) -> Reading:
    if isinstance(payload, ParseResult):
        fmt: PayloadFormat = format or "prometheus"
        parsed = payload
    else:
        wanted = None if full else wanted_names(profile)
        fmt, parsed = parse_payload(payload, format=format, wanted=wanted, parser=parser)
    if memo is not None:
        memo.for_profile(profile)
    spec = profile.metrics
    builder = _Builder(spec.model_label, spec.replica_labels, spec.shard_labels, memo)
    resolved: dict[str, Resolution] = {}
    missing: list[str] = []
    used_families: set[str] = set()
    builder.created = parsed.created
    first_use_zero: list[str] = []
    for canonical, mapping in spec.map.items():
        # A counter may add further raw counters (``plus``): each part is read on its own, and the
        # series of a part after the first carry its raw name, so that they never collide.
        none_yet = False
        for i, part in enumerate((mapping, *mapping.plus)):
            part_key = (canonical, i)
            found = _resolve(parsed, part, part_key, memo)
            if found is None:
                none_yet = none_yet or (part.first_use and _has_family(parsed, part))
                continue
            index, samples, fams = found
            used_families.update(fams)
            if canonical not in resolved:
                resolved[canonical] = Resolution(canonical, part.names[index], index > 0, part.kind)
            if part.from_label:
                samples = from_label(samples, part.from_label, spec.model_label)
            builder.add(canonical, part, part_key, samples, tag=(("__name__", part.names[index]),) if i else ())
        if canonical not in resolved:
            if none_yet:
                # Created on first use and none used yet: 0, not n/a (the engine has the family).
                resolved[canonical] = Resolution(canonical, mapping.names[0], False, mapping.kind, none_yet=True)
                first_use_zero.append(canonical)
            elif not mapping.optional:
                missing.append(canonical)
    builder.zero_counters(first_use_zero, default_model=not spec.model_label)
    if spec.model_label:
        adopt_unlabelled(builder.models, [c for c, m in spec.map.items() if m.from_label])
        adopt_engine_counters(builder.models)
    unmapped = tuple(name for name, fam in parsed.families.items() if fam.samples and name not in used_families)
    return Reading(
        profile=profile.name,
        format=fmt,
        models=builder.build(),
        resolved=resolved,
        missing=tuple(missing),
        unmapped=unmapped,
        errors=tuple(parsed.errors),
        sample_count=parsed.sample_count,
        parsed=parsed,
    )


def _samples_named(parsed: ParseResult, name: str, fams: set[str], picks: list[tuple[str, list[int]]]) -> list[Sample]:
    """The samples named ``name`` (in its family, or its parent's for a suffixed name); the families
    they came from go to ``fams``, and where in them to ``picks``."""
    out: list[Sample] = []
    candidates: list[Family] = []
    fam = parsed.families.get(name)
    if fam is not None:
        candidates.append(fam)
    for suffix in ("_bucket", "_sum", "_count", "_total"):
        if name.endswith(suffix):
            parent = parsed.families.get(name[: -len(suffix)])
            if parent is not None and parent is not fam:
                candidates.append(parent)
    for f in candidates:
        got = f.samples
        at = [i for i, s in enumerate(got) if s[0] == name]  # s[0]: the sample name
        if at:
            out += map(got.__getitem__, at)
            fams.add(f.name)
            picks.append((f.name, at))
    return out


def _resolve(parsed: ParseResult, mapping: MetricMapping, part_key: PartKey,
             memo: NormalizeMemo | None) -> tuple[int, list[Sample], set[str]] | None:
    """The first of the mapping's names with samples: (its index, the samples, their families)."""
    kept = False if memo is None else memo.picks(parsed.layout, part_key)
    if kept is not False:  # the payload's layout is the one these picks were made on
        if kept is None:
            return None
        index, where, fams = kept
        samples: list[Sample] = []
        families = parsed.families
        for family, at in where:
            samples += map(families[family].samples.__getitem__, at)
        return index, samples, fams
    found: tuple[int, list[Sample], set[str]] | None = None
    made: Picks | None = None
    for index, declared in enumerate(mapping.names):
        picks: list[tuple[str, list[int]]] = []
        got = _resolve_name(parsed, mapping, declared, picks)
        if got is None and ":" in declared:
            got = _resolve_name(parsed, mapping, escaped_name(declared), picks)
        if got is not None:
            found, made = (index, *got), Picks(index, picks, got[1])
            break
    if memo is not None:
        memo.keep_picks(parsed.layout, part_key, made)
    return found


def _resolve_name(parsed: ParseResult, mapping: MetricMapping, name: str,
                  picks: list[tuple[str, list[int]]]) -> tuple[list[Sample], set[str]] | None:
    fams: set[str] = set()
    if mapping.kind == "histogram":
        samples = (
            _samples_named(parsed, name + "_bucket", fams, picks)
            + _samples_named(parsed, name + "_sum", fams, picks)
            + _samples_named(parsed, name + "_count", fams, picks)
        )
    elif mapping.kind == "histogram_sum":
        samples = _samples_named(parsed, name + "_sum", fams, picks)
    elif mapping.kind == "histogram_count":
        samples = _samples_named(parsed, name + "_count", fams, picks)
    else:
        samples = _samples_named(parsed, name, fams, picks)
    return (samples, fams) if samples else None


def _has_family(parsed: ParseResult, mapping: MetricMapping) -> bool:
    """Whether the payload shows that the engine has this first-use counter family: it declares it
    (a ``# TYPE`` line without samples yet), one of ``present_with`` has samples, or every build has
    it (``present_with`` empty)."""
    declared = {v for name in mapping.names for v in (name, name.removesuffix("_total"))}
    if any(n in parsed.families or escaped_name(n) in parsed.families for n in declared):
        return True
    if not mapping.present_with:
        return True
    for name in mapping.present_with:
        for n in (name, escaped_name(name)):
            if parsed.samples_named(n) or any(parsed.samples_named(n + s) for s in ("_count", "_sum")):
                return True
    return False


_MatchPlan = list[tuple[list[str], tuple[str, ...]]]


def _match(labels: SeriesKey, plan: _MatchPlan) -> bool:
    """Whether the series passes a mapping's ``match`` (as ``_match_plan``). A label the series lacks
    reads "", as Prometheus treats an absent label and an empty one alike: ``priority = [""]`` keeps
    SGLang's total under ``priority=""`` with priority scheduling and the only series without it."""
    if not plan:
        return True
    present = dict(labels)
    for alts, allowed in plan:
        value = ""
        for alt in alts:
            if alt in present:
                value = present[alt]
                break
        if value not in allowed:
            return False
    return True


def _match_plan(match: dict[str, tuple[str, ...]]) -> _MatchPlan:
    """A mapping's ``match`` with its ``a|b`` keys split: made once per mapping and payload."""
    return [(key.split("|"), allowed) for key, allowed in match.items()]


def _le_value(v: str) -> float | None:
    """An ``le`` label's bound, None when it is not a number."""
    try:
        return float(v)
    except ValueError:
        return None


def _hist_total(h: HistAcc) -> float | None:
    """The observation count: ``_count``, else the +Inf bucket; None when it has neither (the
    largest finite bucket is not the count: observations above it are unknown)."""
    count: float | None = h.count
    if count is not None:
        return count
    inf: float | None = h.buckets.get(math.inf)
    return inf


def _hist_size(h: HistAcc) -> float:
    """For choosing among shards: the count, else the largest bucket."""
    total = _hist_total(h)
    return total if total is not None else max(h.buckets.values(), default=0.0)


def _invalid_hist(problem: str, value: float) -> HistogramSeries:
    return HistogramSeries((), (), None, None, problem, value)


def _hist_build(h: HistAcc, scale: float) -> HistogramSeries:
    """A series' ``HistogramSeries``; one carrying a ``problem`` when its samples cannot all be true
    (then no quantile, mean or count may be made of them)."""
    if h.problem:
        return _invalid_hist(h.problem, h.problem_value)
    buckets: dict[float, float] = h.buckets
    count = _hist_total(h)
    if not buckets:  # count and sum only (an excerpt, TGI's token counts): nothing to sort
        if count is not None and count < 0:
            return _invalid_hist(f"_count is negative ({count:g})", count)
        s = None if h.sum is None else h.sum * scale
        return HistogramSeries((), (), s if s is None or math.isfinite(s) else None, count)
    inf_count = buckets.get(math.inf)
    if inf_count is None:
        # The format requires a +Inf bucket. A documentation excerpt that lost that line still has a
        # consistent total in its _count (at least its top bucket); without one, or below it, no
        # quantile or count can be read.
        top = buckets[max(buckets)]
        if count is None:
            return _invalid_hist("no +Inf bucket and no _count (the total is unknown)", math.nan)
        if count < top:
            return _invalid_hist(f"no +Inf bucket, and _count {count:g} is below the top bucket {top:g}", count)
        buckets = {**buckets, math.inf: count}
    elif h.count is not None and h.count != inf_count:
        return _invalid_hist(f"_count {h.count:g} differs from the +Inf bucket {inf_count:g}", h.count)
    bounds = tuple(sorted(buckets))
    counts = [buckets[b] for b in bounds]
    if counts[0] < 0:
        return _invalid_hist(f"bucket le={bounds[0]:g} is negative ({counts[0]:g})", counts[0])
    # Cumulative counts never decrease with le: where they do, no quantile can be read from them.
    if any(map(lt, counts[1:], counts)):  # in C: the series is rebuilt whenever a value moved
        i = next(i for i in range(1, len(counts)) if counts[i] < counts[i - 1])
        return _invalid_hist(f"buckets decrease with le: le={bounds[i - 1]:g} holds {counts[i - 1]:g}, "
                             f"le={bounds[i]:g} holds {counts[i]:g}", counts[i])
    scaled = tuple(b * scale for b in bounds) if scale != 1.0 else bounds
    s = None if h.sum is None else h.sum * scale
    if s is not None and not math.isfinite(s):
        s = None  # overflowed by the scale
    return HistogramSeries(scaled, tuple(counts), s, count)


class _ModelAcc:
    __slots__ = ("counters", "created", "gauges", "histograms", "invalid", "kv_mean", "replicas")

    def __init__(self) -> None:
        self.gauges: dict[str, float] = {}
        self.kv_mean: float | None = None
        self.counters: dict[str, dict[SeriesKey, float]] = {}
        self.created: dict[str, dict[SeriesKey, float]] = {}
        self.histograms: dict[str, dict[SeriesKey, HistogramSeries]] = {}
        self.replicas: set[SeriesKey] = set()
        self.invalid: dict[str, InvalidFigure] = {}  # canonical -> why its samples are invalid

    def mark(self, canonical: str, field: str, value: float, reason: str) -> None:
        """The first reason a metric's samples are invalid; the metric is left out at ``build``."""
        if canonical not in self.invalid:
            self.invalid[canonical] = InvalidFigure(field, value, "", reason)


def _series_text(name: str, labels: SeriesKey) -> str:
    """A sample's name and labels as written, cut short (for a reason shown to a person)."""
    if not labels:
        return name
    shown = ",".join(f'{k}="{v}"' for k, v in labels)
    return f"{name}{{{shown if len(shown) <= 120 else shown[:117] + '...'}}}"


def _counter_problem(value: float) -> str:
    if value != value:
        return "is NaN"
    if value in (math.inf, -math.inf):
        return "is +Inf" if value > 0 else "is -Inf"
    return f"is negative ({value:g})"


# Label splitting per profile layout, kept across scrapes (the same label sets recur every scrape):
# labels -> (model, series key, shard key, replica key, ``le`` bound, (model, series key, shard key)).
# The last is built once per label set, so that the hot loops do not build a tuple per sample.
# Process-wide, one per configuration (see normmemo.py's docstring for why and how it is locked).
_Split = LabelSplit
_SPLIT_CACHES: dict[tuple[str, frozenset[str], frozenset[str]], dict[SeriesKey, _Split]] = {}
_SPLIT_CACHE_MAX = 50_000


def clear_caches() -> None:
    """Forget every cached label split and parsed label set (what an engine's first scrape finds)."""
    with CACHE_LOCK:
        _SPLIT_CACHES.clear()
    clear_label_caches()


class _Builder:
    def __init__(self, model_label: str, replica_labels: Iterable[str], shard_labels: Iterable[str],
                 memo: NormalizeMemo | None = None) -> None:
        self.model_label = model_label
        self.memo = memo if memo is not None else NormalizeMemo()  # without one: kept for this reading only
        self.replica_labels = frozenset(replica_labels)
        self.shard_labels = frozenset(shard_labels)
        self.models: dict[str, _ModelAcc] = {}
        self.created: dict[str, dict[SeriesKey, float]] = {}  # the payload's _created values
        config = self.config = (model_label, self.replica_labels, self.shard_labels)
        # Shared by the engines' digest threads (a read is one lookup; writes under the lock). An
        # entry is a pure function of its label set, so two threads adding the same one agree.
        with CACHE_LOCK:
            cache = _SPLIT_CACHES.get(config)
            if cache is None:
                if len(_SPLIT_CACHES) > 64:
                    _SPLIT_CACHES.clear()
                cache = _SPLIT_CACHES[config] = {}
            elif len(cache) > _SPLIT_CACHE_MAX:
                cache.clear()
            self.split_cache = cache

    def _split_new(self, labels: SeriesKey) -> _Split:
        """Split a label set not in the cache, and keep it there."""
        model = ""
        le: float | None = None
        le_seen = False
        key: list[tuple[str, str]] = []
        shard: list[tuple[str, str]] = []
        replica: list[tuple[str, str]] = []
        model_label, shard_labels, replica_labels = self.model_label, self.shard_labels, self.replica_labels
        for pair in labels:
            k = pair[0]
            if k == "le" and not le_seen:
                le_seen = True
                le = _le_value(pair[1])
            if k == model_label:
                model = pair[1]
            elif k in shard_labels:
                shard.append(pair)
            elif k != "le":
                key.append(pair)
                if k in replica_labels:
                    replica.append(pair)
        skey, sshard = tuple(key), tuple(shard)
        hit = LabelSplit(model, skey, sshard, tuple(replica), le, (model, skey, sshard))
        with CACHE_LOCK:
            self.split_cache[labels] = hit
        return hit

    def _model(self, name: str) -> _ModelAcc:
        acc = self.models.get(name)
        if acc is None:
            acc = self.models[name] = _ModelAcc()
        return acc

    def add(self, canonical: str, mapping: MetricMapping, part_key: PartKey, samples: list[Sample],
            tag: SeriesKey = ()) -> None:
        if mapping.kind == "histogram":
            self._add_histogram(mapping, part_key, samples)
            return
        scale = mapping.scale
        match = _match_plan(mapping.match) if mapping.match else None
        # model -> series key -> max over shards
        per_model: dict[str, dict[SeriesKey, float]] = {}
        born: dict[str, dict[SeriesKey, float]] = {}
        created_of = self.created if mapping.kind == "counter" else None
        cache_get = self.split_cache.get
        split_new = self._split_new
        models = self.models
        isfinite = math.isfinite
        last_model: str | None = None
        replicas: set[SeriesKey] = set()
        series: dict[SeriesKey, float] = {}
        is_gauge = mapping.kind == "gauge"
        # Samples that cannot be a reading: (model, name, labels, value, why); the metric is then
        # invalid for that model, whichever shard or replica sent them.
        bad: list[tuple[str, str, SeriesKey, float, str]] = []
        seen: set[SeriesKey] = set()  # label sets read: one given twice is a duplicate series
        seen_add = seen.add
        for name, labels, raw in samples:
            if labels in seen:
                dup = cache_get(labels) or split_new(labels)
                bad.append((dup.model, name, labels, raw, "appears twice in one payload"))
                continue
            seen_add(labels)
            hit = cache_get(labels)
            if hit is None:
                hit = split_new(labels)
            model, key, _shard, replica, _le, _ident = hit
            if tag:
                key = (*key, *tag)
            if created_of:
                created = created_of.get(name.removesuffix("_total"), {}).get(labels)
                if created is not None and isfinite(created):
                    births = born.setdefault(model, {})
                    births[key] = min(births.get(key, created), created)
            if model != last_model:
                acc = models.get(model)
                if acc is None:
                    acc = models[model] = _ModelAcc()
                replicas = acc.replicas
                got = per_model.get(model)
                if got is None:
                    got = per_model[model] = {}
                series = got
                last_model = model
            replicas.add(replica)
            if match and not _match(labels, match):
                continue  # the metric exists for this model; this series is filtered out
            # +Inf/-Inf/NaN carry no usable number: a gauge's series is left out (engines export NaN
            # for a gauge with nothing to average yet); a counter's is invalid, as is a negative one.
            value = raw * scale
            if not isfinite(value) or (value < 0 and not is_gauge):
                if not is_gauge:
                    bad.append((model, name, labels, raw, _counter_problem(value)))
                continue
            prev = series.get(key)
            series[key] = value if prev is None or value > prev else prev
        field = canonical if is_gauge else f"counters.{canonical}"
        for model, name, labels, raw, why in bad:
            self._model(model).mark(canonical, field, raw, f"{_series_text(name, labels)} {why}")
        for model, ser in per_model.items():
            acc = self.models[model]
            if mapping.kind == "gauge":
                if not ser:
                    continue
                values = list(ser.values())
                total = finite_sum(values)
                # A sum that overflows is no number: the gauge is left out rather than shown as inf.
                combined = max(values) if mapping.aggregate == "max" else total
                if combined is not None and mapping.aggregate not in ("sum", "max"):
                    combined /= len(values)
                if combined is not None:
                    acc.gauges[canonical] = combined
                if canonical == "kv_usage" and total is not None:
                    acc.kv_mean = total / len(values)
            else:
                # Counters: an empty dict means "present, nothing matched yet" (sums to 0).
                acc.counters.setdefault(canonical, {}).update(ser)
                if model in born:
                    acc.created.setdefault(canonical, {}).update(born[model])

    def zero_counters(self, canonicals: list[str], *, default_model: bool) -> None:
        """Counters with no series yet that read 0: present (empty) for every model of the payload,
        or for the single model "" of an engine without a model label."""
        if not canonicals:
            return
        if not self.models and default_model:
            self._model("")
        for acc in self.models.values():
            for canonical in canonicals:
                acc.counters.setdefault(canonical, {})

    def _split(self, labels: SeriesKey) -> _Split:
        hit = self.split_cache.get(labels)
        return hit if hit is not None else self._split_new(labels)

    def _add_histogram(self, mapping: MetricMapping, part_key: PartKey, samples: list[Sample]) -> None:
        # Grouped into series by a plan kept per engine (normmemo.py): the hot loop of a large payload.
        canonical = part_key[0]
        plan = _match_plan(mapping.match) if mapping.match else None
        keep = (lambda labels: _match(labels, plan)) if plan else None
        out, replicas = self.memo.series(part_key, self.config, samples, self._split, keep,
                                         lambda h: _hist_build(h, mapping.scale), _hist_size)
        for model, reps in replicas.items():
            self._model(model).replicas.update(reps)
        for model, series in out.items():
            acc = self.models[model]
            for h in series.values():
                if h.problem:
                    acc.mark(canonical, canonical, h.problem_value, h.problem)
                    break
            acc.histograms[canonical] = series

    def build(self) -> dict[str, ModelReading]:
        for acc in self.models.values():
            for canonical in acc.invalid:
                # An invalid metric is n/a for its model: no number made of the samples that remain.
                acc.gauges.pop(canonical, None)
                acc.counters.pop(canonical, None)
                acc.created.pop(canonical, None)
                acc.histograms.pop(canonical, None)
                if canonical == "kv_usage":
                    acc.kv_mean = None
        return {
            name: ModelReading(
                model=name,
                gauges=acc.gauges,
                kv_usage_mean=acc.kv_mean,
                replicas=max(1, len({r for r in acc.replicas if r})),
                counters=acc.counters,
                histograms=acc.histograms,
                created=acc.created,
                invalid=acc.invalid,
            )
            for name, acc in self.models.items()
        }
