"""Label sets of the Prometheus text format: the inside of ``{...}`` -> sorted (name, value) pairs.

``parse_labels`` reads one label text (ValueError when malformed), linear in any length.
``labels_of`` reads many at once, the label texts of one run of sample lines (the series of a
family): texts of one shape (the same names in the same order, values cut out) are checked once and
cut into values by one ``split`` of all of them joined, so a payload of thousands of series never
seen before costs a few C-level passes per family instead of Python work per series.

Parsed label sets are cached by their text (successive scrapes repeat them); so are the shapes.
Used by ``promtext``; imports nothing of the console.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import repeat
from operator import itemgetter

__all__ = ["Labels", "cached", "clear_caches", "new_labels", "parse_labels", "prefill", "unescape"]

Labels = tuple[tuple[str, str], ...]

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
# The plan also keeps where each sorted name's value sits in the split (for ``labels_of``).
_Plan = tuple[tuple[str, ...], Callable[[list[str]], tuple[str, ...]], tuple[int, ...]] | str
_SHAPES: dict[str, _Plan] = {}
_SHAPES_BYTES = 1024 * 1024
_shapes_bytes = 0

# The label text of a line, for ``prefill``: from a '{' to the last '}' before any '#', '{' or line end
# (what the line reader takes on a usual line; where it takes another, that line parses its own).
# No '{' inside: a failed match ends at the next '{', so a line of many '{' costs linear time.
_LABEL_TEXTS = re.compile(r"\{([^#\n{]*)\}")
# Label texts looked up first: when all are cached, so are the others, most likely.
_PEEK = 32

# The parsed label set of a text, if cached (None otherwise).
cached: Callable[[str], Labels | None] = _LABEL_CACHE.get


def unescape(value: str) -> str:
    """A label value (or HELP text) with its ``\\\\``, ``\\"`` and ``\\n`` escapes resolved."""
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], value)


def parse_labels(text: str) -> Labels:
    """Parse the inside of ``{...}`` into sorted (name, value) pairs; ValueError when malformed.

    Linear in ``len(text)`` (slicing the rest of the text per label made megabytes of labels
    take minutes)."""
    hit = _LABEL_CACHE.get(text)
    return hit if hit is not None else new_labels(text)


def new_labels(text: str) -> Labels:
    """``parse_labels`` of a text not in the cache (the caller has just looked)."""
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
        names, pick, _where = plan
        # pick pads a lone label to two values; zip stops at the names (a strict= keyword costs half again).
        labels = tuple(zip(names, pick(parts)))  # noqa: B905
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
        at = tuple(where[n] for n in order)
        indices = list(at) or [0]
        if len(indices) == 1:
            indices *= 2  # itemgetter of one index gives the item, not a tuple; zip stops at the names
        plan = order, itemgetter(*indices), at
    if _shapes_bytes > _SHAPES_BYTES:
        _SHAPES.clear()
        _shapes_bytes = 0
    _SHAPES[shape] = plan
    _shapes_bytes += len(shape)
    return plan


def clear_caches() -> None:
    """Forget every parsed label set and shape (what an engine's first scrape finds)."""
    global _label_cache_bytes, _shapes_bytes
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
            value = unescape(value)
        pairs[m.group(1)] = value
        pos = m.end()
        if m.group(3) == "" and pos < end:
            raise ValueError("missing ',' between labels")
    return pairs


def prefill(text: str) -> None:
    """Parse and cache at once the label sets of a payload that are not cached yet, so that reading
    its lines one by one finds them cached: the texts of one shape by one split of all of them (the
    series of a family share a shape). What it caches is ``parse_labels`` of each text; a text it
    leaves out (malformed, escaped, long, alone in its shape) is parsed when its line is read."""
    found = _LABEL_TEXTS.finditer(text)
    peek = [m for _, m in zip(range(_PEEK), found, strict=False)]
    if all(m[1] in _LABEL_CACHE for m in peek):
        return  # a scrape like the one before: its label sets are cached
    texts = [m[1] for m in peek]
    if len(peek) == _PEEK:
        texts += _LABEL_TEXTS.findall(text, peek[-1].end())
    todo = [t for t in dict.fromkeys(texts) if len(t) <= _CACHED_TEXT_MAX and "\\" not in t and t not in _LABEL_CACHE]
    if len(todo) < 2:
        return
    runs, parts = _by_shape(todo[: _LABEL_CACHE_MAX // 2])
    for shape, same in runs.items():
        labels = _one_shape(shape, same, parts) if len(same) > 1 else None
        if labels is not None:
            _remember(same, labels)


def _by_shape(texts: list[str]) -> tuple[dict[str, list[str]], list[str] | None]:
    """Plain texts (no backslash) by shape (the text with each quoted value cut to one ``"``), from
    one split of all of them joined (given back when they are all of one shape); a text with an
    unterminated value is left out."""
    parts = "\n".join(texts).split('"')
    shapes = '"'.join(parts[::2]).split("\n")  # every text's quotes are paired: each is in an even part
    if len(shapes) != len(texts) or not len(parts) & 1:
        # A text with an odd number of quotes shifts the pairing of the texts after it: without those.
        texts = [t for t, n in zip(texts, map(str.count, texts, repeat('"')), strict=True) if not n & 1]
        parts = "\n".join(texts).split('"')
        shapes = '"'.join(parts[::2]).split("\n")
        if not texts:
            return {}, None
    if shapes.count(shapes[0]) == len(shapes):
        return {shapes[0]: texts}, parts  # one family, or families of one shape
    runs: dict[str, list[str]] = {}
    for text, shape in zip(texts, shapes, strict=True):
        runs.setdefault(shape, []).append(text)
    return runs, None


def _one_shape(shape: str, texts: list[str], parts: list[str] | None) -> list[Labels] | None:
    """The label sets of plain texts (no backslash) of one shape, each with its quotes paired, all
    cut by one split (``parts``: of them joined with '\\n', when known); None when the shape is
    malformed."""
    k = shape.count('"')  # one quote per value in the shape, two in each text
    plan = _SHAPES.get(shape) or _shape_plan(texts[0].split('"'))
    if isinstance(plan, str):
        return None
    names, _pick, at = plan
    if not names:
        return [()] * len(texts)
    if parts is None:
        parts = "\n".join(texts).split('"')  # text i's value j is parts[2k * i + 2j + 1]
    step = 2 * k
    columns = [zip(repeat(name), parts[i::step]) for name, i in zip(names, at, strict=True)]
    return list(zip(*columns))  # noqa: B905 (columns are of one length: one value per text)


def _remember(texts: list[str], labels: list[Labels]) -> None:
    global _label_cache_bytes
    if len(_LABEL_CACHE) + len(texts) > _LABEL_CACHE_MAX or _label_cache_bytes > _LABEL_CACHE_BYTES:
        _LABEL_CACHE.clear()
        _label_cache_bytes = 0
    _LABEL_CACHE.update(zip(texts, labels, strict=True))
    _label_cache_bytes += sum(map(len, texts))
