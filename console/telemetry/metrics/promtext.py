"""A fast, lenient parser for the Prometheus text exposition format (0.0.4).

Lenient means: a malformed line is skipped and reported in ``ParseResult.errors`` (with its line
number), never raised. Documentation excerpts with ``...`` lines, lines cut mid-way, invalid
UTF-8 (decoded with replacement characters) and arbitrary garbage all parse to "what could be
read, plus errors". ``parse`` never raises on any ``bytes`` or ``str`` input.

Speed: one ``split("\\n")``; the usual sample line is read by one regex match, others by a loop of
``str.find``. Label sets are parsed once per distinct label text and cached (successive scrapes
repeat them); a label set never seen before costs a split and a lookup of its shape (the series of
a family share one). With ``wanted``, a line that starts with none of the wanted names is skipped
by one ``startswith``. A label set over 64 KiB makes its line malformed (reported, skipped);
``parse_labels`` itself is linear in any length.

Conventions:
- Metric names may contain ``:`` (vLLM, SGLang, llama.cpp).
- Labels of a sample are sorted by label name (stable series identity across scrapes).
- ``*_created`` series of counters, histograms and summaries (prometheus_client) are not samples of
  any family unless ``keep_created``: their values go to ``ParseResult.created`` (when each series was
  born, unix seconds), keyed by base name (``x`` for ``x_created``) and labels.
- Samples without a ``# TYPE`` are "untyped"; ``X_bucket`` samples with an ``le`` label and no
  TYPE are grouped into an (inferred) histogram family ``X``, and ``X_sum``/``X_count`` join it.
- Timestamps are accepted and ignored (values are "now"): integer milliseconds (text 0.0.4) or
  float seconds (OpenMetrics). OpenMetrics exemplars (``... 7 # {trace_id="x"} 0.7``) are
  skipped; the sample before them is kept.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from operator import itemgetter
from typing import NamedTuple

from console.telemetry.metrics.wanted import CHILD_SUFFIXES, expand_wanted

__all__ = ["KINDS", "Family", "Labels", "ParseResult", "Sample", "clear_caches", "known_labels", "match_sample_line",
           "parse", "parse_labels"]

Labels = tuple[tuple[str, str], ...]

# Family kinds as written on ``# TYPE`` lines (OpenMetrics adds the last four; "unknown" = untyped).
KINDS = frozenset({"counter", "gauge", "histogram", "summary", "untyped", "gaugehistogram", "info", "stateset"})
# Where a sample may sit in a family of another name: histogram/summary children, OpenMetrics counters.
_LOOKUP_SUFFIXES = (*CHILD_SUFFIXES, "_total")
_HAS_CHILDREN = frozenset({"histogram", "summary", "gaugehistogram"})

_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# The usual sample line, ``name{labels} value`` or ``name value``, in one match: a valid name, the
# labels up to the last ``}`` (no ``#``: no exemplar to look for), one space and one token without
# braces (or no value: an excerpt's bare name). For such a line the general path below reads the
# same name, label text and value token; other lines take that path.
_PLAIN_LINE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*+)(?:\{([^#]*)\})?(?: ([^\s#{}]++))?").fullmatch
# The value is written as an unrolled loop (runs of plain characters between escapes): one step
# per run instead of one alternation per character.
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"\\]*(?:\\.[^"\\]*)*)"\s*(,|$)', re.DOTALL)
_SPACE_RE = re.compile(r"\s*")
_LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# The ``name=`` heads of a label text without escapes, joined with '"' where each value was: the
# first head, and the heads after it (each starts with the comma after the previous value).
_HEADS_RE = re.compile(r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*(?:"\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*)*')
_MORE_HEADS_RE = re.compile(r'\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*(?:"\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*)*')
# Heads checked per regex call: a regex holds the GIL for its whole run, and a parse in a worker
# thread must not stall the hub's loop for long on megabytes of labels.
_HEADS_PER_CALL = 8192
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_ESCAPE_RE = re.compile(r"\\[\\\"n]")

# The process-wide caches below (and normalize.py's label splits) are shared by every engine's
# digest thread. A read is one dict lookup (atomic under the interpreter lock) and needs no lock;
# every write, with the bounds' bookkeeping and the clearing it may do, holds ``CACHE_LOCK`` (taken
# only on a miss). What each keeps, and why, is in normmemo.py's docstring.
CACHE_LOCK = threading.Lock()
# Label texts seen before -> parsed labels. Bounded by count and by the bytes of text held: cleared
# when either grows past its limit; texts longer than _CACHED_TEXT_MAX are one-offs in practice
# and would pin megabytes each.
_LABEL_CACHE: dict[str, Labels] = {}
_LABEL_CACHE_MAX = 50_000
_LABEL_CACHE_BYTES = 8 * 1024 * 1024
_CACHED_TEXT_MAX = 4096
_label_cache_bytes = 0
# The shape of a label text without backslashes (the text with its values cut out: the ``name=``
# heads joined with '"') -> its sorted names and a picker of their values from ``text.split('"')``,
# or the ValueError message of a malformed shape. The series of a family share a shape, so a label
# set never seen before (a new replica, thousands of them in one payload) costs one split, one join
# and a lookup instead of regex checks and a sort. Bounded by bytes like the label cache.
_Plan = tuple[tuple[str, ...], Callable[[list[str]], tuple[str, ...]]] | str
_SHAPES: dict[str, _Plan] = {}
_SHAPES_BYTES = 1024 * 1024
_shapes_bytes = 0
# A sample whose label set is longer than this is a malformed line, not a series: real label sets
# are a few hundred bytes, and a megabyte-long one would cost its engine's worker thread long
# GIL-holding calls (sorting, hashing) that stall every other thread, the hub's loop included.
_MAX_LABEL_TEXT = 64 * 1024

# For readers of later payloads as changes (promdelta): the usual sample line's match (name, label
# text, value token), and a label text's parsed labels when seen before (the cache is only ever
# cleared in place, so this stays bound to it).
match_sample_line = _PLAIN_LINE
known_labels = _LABEL_CACHE.get


class Sample(NamedTuple):
    """One sample line: full sample name (``x_bucket``, ``x_total`` ...), sorted labels, value.

    A named tuple, built in the parse loop by ``tuple.__new__`` (a quarter of a dataclass's
    ``__init__``: a payload can hold tens of thousands of samples)."""

    name: str
    labels: Labels
    value: float


@dataclass(slots=True)
class Family:
    """A metric family: the ``# TYPE`` name (or inferred), its kind, help text and samples."""

    name: str
    kind: str = "untyped"
    help: str = ""
    samples: list[Sample] = field(default_factory=list)


@dataclass(slots=True)
class ParseResult:
    """Families by name (in payload order), and one error line per malformed input line."""

    families: dict[str, Family] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # All malformed lines, including those beyond the ``max_errors`` reported.
    error_count: int = 0
    sample_count: int = 0
    line_count: int = 0
    # base name (``vllm:request_success`` for ``vllm:request_success_created``) -> labels -> birth time.
    created: dict[str, dict[Labels, float]] = field(default_factory=dict)
    # The same object on every result a ScrapeParser read as value changes to the one it parsed
    # whole: the families, and each one's samples' names and labels in order, are the same.
    layout: object = None

    def samples_named(self, name: str) -> list[Sample]:
        """All samples whose sample name is exactly ``name``, whichever family holds them."""
        out: list[Sample] = []
        fam = self.families.get(name)
        if fam is not None:
            out.extend(s for s in fam.samples if s.name == name)
        for suffix in _LOOKUP_SUFFIXES:
            if name.endswith(suffix):
                parent = self.families.get(name[: -len(suffix)])
                if parent is not None and parent is not fam:
                    out.extend(s for s in parent.samples if s.name == name)
        return out


def _name_ok(name: str) -> bool:
    return _NAME_RE.fullmatch(name) is not None


def _unescape(value: str) -> str:
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], value)


def parse_labels(text: str) -> Labels:
    """Parse the inside of ``{...}`` into sorted (name, value) pairs; ValueError when malformed.

    Linear in ``len(text)`` (slicing the rest of the text per label made megabytes of labels
    take minutes)."""
    cached = _LABEL_CACHE.get(text)
    return cached if cached is not None else _new_labels(text)


def _new_labels(text: str) -> Labels:
    """``parse_labels`` of a text not in the cache (the parse loop has just looked)."""
    global _label_cache_bytes
    if len(text) > _CACHED_TEXT_MAX:
        pairs = _split_plain(text) if "\\" not in text else _match_escaped(text)
        return tuple(sorted(pairs.items()))
    if "\\" in text:
        labels = tuple(sorted(_match_escaped(text).items()))
    else:
        parts = text.split('"')
        if not len(parts) & 1:
            raise ValueError(f"unterminated label value near {parts[-1][:30]!r}")
        plan = _SHAPES.get('"'.join(parts[::2])) or _shape_plan(parts)
        if isinstance(plan, str):
            raise ValueError(plan)
        names, pick = plan
        # pick pads a lone label to two values; zip stops at the names (a strict= keyword costs half again).
        labels = tuple(zip(names, pick(parts)))  # noqa: B905
    with CACHE_LOCK:
        if len(_LABEL_CACHE) > _LABEL_CACHE_MAX or _label_cache_bytes > _LABEL_CACHE_BYTES:
            _LABEL_CACHE.clear()
            _label_cache_bytes = 0
        _LABEL_CACHE[text] = labels
        _label_cache_bytes += len(text)
    return labels


def _shape_plan(parts: list[str]) -> _Plan:
    """The plan for the shape of ``parts`` (a plain label text split at '"', odd length): checked
    once per shape with the same rules as ``_split_plain``; cached, errors included."""
    global _shapes_bytes
    shape = '"'.join(parts[::2])
    plan: _Plan
    try:
        names = _plain_names(parts)
    except ValueError as exc:
        plan = str(exc)
    else:
        where = {name: 2 * i + 1 for i, name in enumerate(names)}  # a repeated name: the last value
        order = tuple(sorted(where))
        indices = [where[n] for n in order] or [0]
        if len(indices) == 1:
            indices *= 2  # itemgetter of one index gives the item, not a tuple; zip stops at the names
        plan = order, itemgetter(*indices)
    with CACHE_LOCK:
        if _shapes_bytes > _SHAPES_BYTES:
            _SHAPES.clear()
            _shapes_bytes = 0
        _SHAPES[shape] = plan
        _shapes_bytes += len(shape)
    return plan


def clear_caches() -> None:
    """Forget every parsed label set and shape (what an engine's first scrape finds)."""
    global _label_cache_bytes, _shapes_bytes
    with CACHE_LOCK:
        _LABEL_CACHE.clear()
        _SHAPES.clear()
        _label_cache_bytes = _shapes_bytes = 0


def _split_plain(text: str) -> dict[str, str]:
    """Label text without backslashes: no value can hold a quote, so ``split('"')`` cuts it into
    values (odd pieces) and ``name=`` heads (even pieces); the heads, re-joined with ``"``, are
    checked by one regex and their names read by another. All of it runs in C: megabytes of
    labels parse at string-method speed."""
    parts = text.split('"')
    names = _plain_names(parts)
    return dict(zip(names, parts[1 : len(parts) - 1 : 2], strict=True))


def _plain_names(parts: list[str]) -> list[str]:
    """The label names of a plain label text split at '"'; ValueError when malformed."""
    last = len(parts) - 1
    if last % 2:
        raise ValueError(f"unterminated label value near {parts[-1][:30]!r}")
    tail = parts[last].strip()
    if last == 0:
        if tail:
            raise ValueError(f"malformed label set near {tail[:30]!r}")
        return []
    if tail and tail != ",":
        raise ValueError(f"malformed label set near {tail[:30]!r}")
    all_heads = parts[0:last:2]
    names: list[str] = []
    for start in range(0, len(all_heads), _HEADS_PER_CALL):
        heads = '"'.join(all_heads[start : start + _HEADS_PER_CALL])
        heads_re = _HEADS_RE if start == 0 else _MORE_HEADS_RE
        if heads_re.fullmatch(heads) is None:
            m = heads_re.match(heads)
            near = heads[m.end() if m else 0 :][:30]
            raise ValueError(f"malformed label set near {near!r}")
        names += _LABEL_NAME_RE.findall(heads)
    return names


def _match_escaped(text: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    pos = 0
    end = len(text)
    while pos < end:
        m = _LABEL_RE.match(text, pos)
        if m is None:
            space = _SPACE_RE.match(text, pos)
            if space is not None and space.end() == end:
                break  # only trailing whitespace left
            raise ValueError(f"malformed label set near {text[pos : pos + 30]!r}")
        value = m.group(2)
        if "\\" in value:
            value = _unescape(value)
        pairs[m.group(1)] = value
        pos = m.end()
        if m.group(3) == "" and pos < end:
            raise ValueError("missing ',' between labels")
    return pairs


def _parse_value(tokens: list[str]) -> float:
    """``value [timestamp]`` -> value. float() accepts +Inf, -Inf, NaN and exponents."""
    if not tokens:
        raise ValueError("missing value")
    if len(tokens) > 2:
        raise ValueError("trailing garbage after value")
    value = float(tokens[0])
    if len(tokens) == 2:
        float(tokens[1])  # timestamp: ms (0.0.4) or float seconds (OpenMetrics); ValueError if neither
    return value


def _label_end(line: str, br: int) -> int:
    """Index of the ``}`` closing the label set opened at ``br``, skipping quoted values (which may
    hold ``}`` or ``#``); -1 if it is not closed. Only used on lines holding a ``#`` (exemplars)."""
    quoted = False
    i = br + 1
    n = len(line)
    while i < n:
        c = line[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c == "}":
            return i
        i += 1
    return -1


def _without_exemplar(rest: str) -> str:
    """The value (and timestamp) part of a sample line, without an OpenMetrics exemplar."""
    cut = rest.find("#")
    return rest if cut == -1 else rest[:cut]


def _decode(payload: bytes | bytearray | memoryview | str, errors: list[str]) -> str:
    if isinstance(payload, str):
        return payload
    data = bytes(payload)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        errors.append(f"payload: invalid UTF-8 at byte {exc.start}; decoded with replacement characters")
        return data.decode("utf-8", errors="replace")


def parse(
    payload: bytes | bytearray | memoryview | str,
    wanted: Container[str] | None = None,
    *,
    keep_created: bool = False,
    max_errors: int = 50,
    slots: dict[int, tuple[str, int]] | None = None,
) -> ParseResult:
    """Parse a Prometheus text payload. Never raises.

    ``wanted``: family names to keep (e.g. ``vllm:prompt_tokens_total``,
    ``vllm:time_to_first_token_seconds``); samples named ``<w>``, ``<w>_bucket``, ``<w>_sum`` and
    ``<w>_count`` are kept, every other line is skipped after reading its name (and is not checked
    for errors). ``None`` keeps everything.
    ``max_errors``: how many error lines to keep (``error_count`` counts them all).
    ``slots``: filled with line index -> (family name, position in its samples) for each sample kept
    (``promdelta`` reads a later payload as changes to this one).
    """
    result = ParseResult()
    errors = result.errors
    try:
        text = _decode(payload, errors)
    except Exception as exc:  # e.g. a memoryview of a non-byte format
        errors.append(f"payload: cannot decode: {exc}")
        result.error_count = 1
        return result
    if errors:
        result.error_count = len(errors)
    accept, prefixes = (None, None) if wanted is None else expand_wanted(wanted)
    families = result.families
    # sample name -> family it belongs to (None: skipped, e.g. a _created series).
    route: dict[str, Family | None] = {}
    created_skip: set[str] = set()
    label_cache = _LABEL_CACHE
    new_tuple = tuple.__new__
    plain_line = _PLAIN_LINE
    n_samples = 0
    lines = text.split("\n")
    result.line_count = len(lines)

    def error(lineno: int, reason: str, line: str) -> None:
        result.error_count += 1
        if len(errors) < max_errors:
            shown = line if len(line) <= 80 else line[:77] + "..."
            errors.append(f"line {lineno}: {reason}: {shown!r}")

    for idx, line in enumerate(lines):
        if not line:
            continue
        first = line[0]
        if prefixes is not None and not line.startswith(prefixes) and not first.isspace():
            continue  # its name (a prefix of the line) is not wanted
        m = plain_line(line)
        if m is not None:
            name, ltext, token = m.groups()
            if accept is not None and name not in accept:
                continue
            fam = route.get(name, _NEW)
            if fam is None:
                continue
            if fam is not _NEW and (ltext is None or len(ltext) < _MAX_LABEL_TEXT):
                try:
                    labels: Labels | None
                    if ltext is None:
                        labels = ()
                    else:
                        labels = label_cache.get(ltext)
                        if labels is None:
                            labels = _new_labels(ltext)
                    if token is None:
                        error(idx + 1, "missing value", line)
                        continue
                    value = float(token)
                except ValueError as exc:
                    error(idx + 1, str(exc) or "malformed sample", line)
                    continue
                if fam is _CREATED:
                    result.created.setdefault(name[: -len("_created")], {})[labels] = value
                else:
                    fam.samples.append(new_tuple(Sample, (name, labels, value)))
                    n_samples += 1
                    if slots is not None:
                        slots[idx] = (fam.name, len(fam.samples) - 1)
                continue
            # A name seen for the first time here, or a label set over the limit: the general path.
        if first == "#":
            _comment(line, idx + 1, families, accept, created_skip, keep_created, error)
            continue
        if first in " \t" or line[-1] in " \t\r":
            line = line.strip()
            if not line:
                continue
            if line[0] == "#":
                _comment(line, idx + 1, families, accept, created_skip, keep_created, error)
                continue
        br = line.find("{")
        sp = line.find(" ")
        if "\t" in line:  # tabs separate tokens too (rare: check only when present)
            tab = line.find("\t")
            if sp == -1 or tab < sp:
                sp = tab
        if br != -1 and (sp == -1 or br < sp):
            name = line[:br]
        elif sp != -1:
            name = line[:sp]
            rest = line[sp + 1 :].lstrip(" \t")
            br = len(line) - len(rest) if rest[:1] == "{" else -1
        else:
            name = line
            br = -1
        if accept is not None and name not in accept:
            continue
        try:
            fam = route[name]
        except KeyError:
            if not _name_ok(name):
                error(idx + 1, "invalid metric name", line)
                continue
            fam = _route(name, families, created_skip, keep_created)
            route[name] = fam
        if fam is None:
            continue
        try:
            if br != -1:
                # An exemplar ("# {trace_id=...} 0.7") has braces of its own: find the label set's.
                hashed = "#" in line  # rare: an exemplar, or a '#' inside a label value
                close = _label_end(line, br) if hashed else line.rfind("}")
                if close < br:
                    raise ValueError("unterminated label set")
                if close - br > _MAX_LABEL_TEXT:
                    raise ValueError(f"label set longer than {_MAX_LABEL_TEXT // 1024} KiB")
                ltext = line[br + 1 : close]
                labels = label_cache.get(ltext)
                if labels is None:
                    labels = _new_labels(ltext)
                tokens = (_without_exemplar(line[close + 1 :]) if hashed else line[close + 1 :]).split()
            else:
                labels = ()
                rest = line[sp + 1 :] if sp != -1 else ""
                tokens = (_without_exemplar(rest) if "#" in rest else rest).split()
            # Fast path: a lone value (no timestamp).
            if len(tokens) == 1:
                value = float(tokens[0])
            elif tokens:
                value = _parse_value(tokens)
            else:
                error(idx + 1, "missing value", line)  # as _parse_value says, without raising
                continue
        except ValueError as exc:
            error(idx + 1, str(exc) or "malformed sample", line)
            continue
        if fam is _CREATED:
            result.created.setdefault(name[: -len("_created")], {})[labels] = value
            continue
        fam.samples.append(new_tuple(Sample, (name, labels, value)))
        n_samples += 1
        if slots is not None:
            slots[idx] = (fam.name, len(fam.samples) - 1)
    result.sample_count = n_samples
    if result.error_count > len(errors) and len(errors) >= max_errors:
        errors.append(f"... {result.error_count - len(errors)} more malformed lines not listed")
    return result


# Where ``_route`` sends the ``_created`` samples of counters and histograms (to ``ParseResult.created``).
_CREATED = Family("", "created")
_NEW = Family("", "not routed yet")  # a sample name not in ``route`` yet


def _route(name: str, families: dict[str, Family], created_skip: set[str], keep_created: bool) -> Family | None:
    """Which family a sample name belongs to; creates an untyped one when none is declared."""
    fam = families.get(name)
    if fam is not None:
        return _CREATED if name in created_skip else fam
    for suffix in CHILD_SUFFIXES:
        if name.endswith(suffix):
            parent = families.get(name[: -len(suffix)])
            if parent is not None and (parent.kind in _HAS_CHILDREN or parent.kind == "untyped"):
                if parent.kind == "untyped" and suffix == "_bucket":
                    parent.kind = "histogram"  # inferred from an untyped X_bucket
                return parent
    if name.endswith("_total"):
        # OpenMetrics style: "# TYPE x counter" with samples named x_total.
        parent = families.get(name[: -len("_total")])
        if parent is not None and parent.kind == "counter":
            return parent
    if not keep_created and name.endswith("_created"):
        base = name[: -len("_created")]
        if base in families or base + "_total" in families:
            return _CREATED
    if name.endswith("_bucket"):
        # An undeclared histogram (e.g. an excerpt that lost its TYPE line): group under its base.
        base = name[: -len("_bucket")]
        fam = Family(base, "histogram")  # inferred
        families[base] = fam
        return fam
    fam = Family(name, "untyped")
    families[name] = fam
    return fam


def _comment(
    line: str,
    lineno: int,
    families: dict[str, Family],
    accept: Container[str] | None,
    created_skip: set[str],
    keep_created: bool,
    error: Callable[[int, str, str], None],
) -> None:
    parts = line.split(None, 3)
    if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
        return  # a plain comment (or "# EOF")
    name = parts[2]
    if accept is not None and name not in accept:
        return
    if not _name_ok(name):
        error(lineno, "invalid metric name in " + parts[1], line)
        return
    fam = families.get(name)
    if parts[1] == "TYPE":
        kind = parts[3].strip().lower() if len(parts) > 3 else ""
        if kind == "unknown":
            kind = "untyped"
        if kind not in KINDS:
            error(lineno, f"unknown metric type {kind!r}", line)
            kind = "untyped"
        if not keep_created and name.endswith("_created"):
            base = name[: -len("_created")]
            parent = families.get(base) or families.get(base + "_total")
            if parent is not None and parent.kind in (*_HAS_CHILDREN, "counter"):
                created_skip.add(name)
                if fam is not None and not fam.samples:
                    del families[name]  # its HELP line created it
                return
        if fam is None:
            families[name] = Family(name, kind)
        elif not fam.samples:
            fam.kind = kind
        return
    help_text = parts[3].rstrip("\r") if len(parts) > 3 else ""
    if "\\" in help_text:
        help_text = _unescape(help_text)
    if fam is None:
        families[name] = Family(name, "untyped", help_text)
    else:
        fam.help = help_text
