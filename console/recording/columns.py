"""Document frames in column form: after the first document of a run, only the values that changed.

A frame's documents (one a second for 8 s) share almost all their text: the keys, the names, the
URLs. Split at its values (``split``: each number, ``true``, ``false`` or ``null`` that follows a
key), a document is a *layout* (the text around the values, strings included) and a list of values.
Consecutive documents of one layout form a run: its first document is stored whole, then each value
that changes in the run as a column, by position, with its values in the run's later documents.
Columns are stored in groups by how their values are written (``d``):

- ``d`` >= 0: decimals with no exponent, each exactly ``n / 10**d``; ``d`` -1: integers. The column
  holds the integer differences (``n1 - n0``, ``n2 - n1``, ...; ``n0`` is the first document's): the
  small differences of slowly moving figures compress better than the figures themselves;
- ``null``: the values as they are; -2: the values' texts as strings (a value JSON would write
  otherwise, e.g. ``1e-07``, which orjson writes ``1e-7``);
- -3: a column with the same values as another (an engine with one model has its totals twice).

A group is ``[d, [j, ...], [x1, x2, ...], ...]`` (value positions, then one array a column), and the
-3 group ``[-3, [j, ...], [k, ...]]`` (column j repeats column k). A layout that changes (a reason
appears, an engine is added) starts a new run. Decoding works a group and a document at a time with
``map`` (no Python step per value): a bundle decodes 900 documents of 8 engines.

The payload (then compressed like the plain one, against the segment's dictionary)::

    {"t": [times], "runs": [documents in each run]}
    the first document of run 1, as JSON text
    [group, ...]                    the columns of run 1
    ... the same two lines for each further run

The plain form (``payloads.docs_payload``) starts with ``[``; ``payloads.read_doc_lines`` reads both.
Decoding gives the documents' exact JSON text back (a test checks it byte for byte).
"""

from __future__ import annotations

import collections
import itertools
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

# A value: a number, true, false, null or a flat array of numbers after a key, up to what ends it.
# The key's closing quote and the colon before it are consumed (``join`` puts them back).
_VALUE = re.compile(rb'":(-?[0-9][0-9.eE+-]*|true|false|null|\[[-0-9.eE+,]*\])(?=[,}])')
_SEP = b'":'
_NUM_INT = rb"-?(?:0|[1-9][0-9]*)"
_INTS = re.compile(rb"%s(?:,%s)*" % (_NUM_INT, _NUM_INT))
_DECS = re.compile(rb"%s\.[0-9]+(?:,%s\.[0-9]+)*" % (_NUM_INT, _NUM_INT))
_FRACTION = re.compile(rb"\.([0-9]+)")
_NEG_ZERO = re.compile(rb"(?:^|,)-0\.0*(?:,|$)")
MAX_DECODED = 256 * 2**20  # a frame's documents decoded, at most (a frame of a large fleet is a few MB)


class ColumnsError(ValueError):
    """A payload that is not a column-form documents payload."""


@dataclass(frozen=True, slots=True)
class Payload:
    """A recorded frame's documents in column form, not decoded (a cut copies it whole), with the
    frame's rows payload when it has one."""

    times: list[float]
    data: bytes
    rows: bytes | None = None

    @classmethod
    def of(cls, data: bytes, rows: bytes | None = None) -> Payload:
        """Raises ColumnsError for a payload whose header or line count is not a column form's."""
        times, runs = _header(data)
        if data.count(b"\n") < 2 * len(runs) + 1:
            raise ColumnsError("a column-form payload of inconsistent lengths")
        return cls(times, data, rows)

    def firsts(self) -> list[bytes]:
        """Each run's first document: every string of the frame's documents is in one of them."""
        _times, runs = _header(self.data)
        lines = self.data.split(b"\n", 2 * len(runs))
        return [lines[1 + 2 * r] for r in range(len(runs))]

    def lines(self) -> list[tuple[float, bytes]]:
        return decode(self.data)


def split(line: bytes) -> tuple[list[bytes], list[bytes]]:
    """(layout, values) of one document's JSON text: ``join(layout, values) == line``. The split is
    lossless whatever the text (a digit inside a string that looks like a value is one): only how
    well it compresses depends on it."""
    parts = _VALUE.split(line)  # text, value, text, value, ..., text
    return parts[0::2], parts[1::2]


def join(layout: Sequence[bytes], values: Sequence[bytes]) -> bytes:
    """The JSON text of a document from its layout and values."""
    if len(layout) != len(values) + 1:
        raise ColumnsError("a layout and values of inconsistent lengths")
    return b"".join(_interleaved(layout, values))


def _interleaved(layout: Sequence[bytes], values: Sequence[bytes]) -> list[bytes]:
    """piece, value, piece, ..., piece (the separator after each piece but the last): its join is the
    text; a copy with other values in its odd places is another document of the layout."""
    buf = [b""] * (2 * len(layout) - 1)
    buf[0::2] = [piece + _SEP for piece in layout[:-1]] + [layout[-1]]
    buf[1::2] = values
    return buf


def encode(times: Sequence[float], docs: Sequence[tuple[list[bytes], list[bytes]]]) -> bytes:
    """The column-form payload of a frame's documents, each given as ``split`` gives it."""
    runs: list[int] = []
    body: list[bytes] = []
    k = 0
    while k < len(docs):
        layout, first = docs[k]
        end = k + 1
        while end < len(docs) and (docs[end][0] is layout or docs[end][0] == layout):
            end += 1
        runs.append(end - k)
        body.append(join(layout, first))
        body.append(_columns(first, [values for _, values in docs[k + 1:end]]))
        k = end
    head = orjson.dumps({"t": list(times), "runs": runs})
    return b"\n".join([head, *body]) + b"\n"


def decode(payload: bytes) -> list[tuple[float, bytes]]:
    """(time, JSON text) of each document of a column-form payload."""
    times, runs = _header(payload)
    lines = payload.split(b"\n")
    if len(lines) < 2 * len(runs) + 1:
        raise ColumnsError("a column-form payload of inconsistent lengths")
    out: list[bytes] = []
    size = 0
    for r, n in enumerate(runs):
        first = lines[1 + 2 * r]
        # A run's documents are about as long as its first: a header claiming millions of them
        # (a few bytes compressed) is refused before they are built.
        size += n * len(first)
        if size > MAX_DECODED:
            raise ColumnsError(f"a column-form payload that decodes to more than {MAX_DECODED // 2**20} MiB")
        out.append(first)
        if n > 1:
            out.extend(_rebuild(first, lines[2 + 2 * r], n - 1))
    return list(zip(times, out, strict=True))


def _header(payload: bytes) -> tuple[list[float], list[int]]:
    head_line = payload[:payload.find(b"\n")] if b"\n" in payload else payload
    try:
        head = orjson.loads(head_line)
        times = [float(t) for t in head["t"]]
        runs = [int(n) for n in head["runs"]]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ColumnsError(f"not a column-form header: {exc}") from None
    if sum(runs) != len(times) or any(n < 1 for n in runs):
        raise ColumnsError("a column-form payload of inconsistent lengths")
    return times, runs


def _columns(first: list[bytes], later: list[list[bytes]]) -> bytes:
    """The columns line: each value position that changes in ``later``, with its later values, in groups."""
    if not later:
        return b"[]"
    groups: dict[bytes, tuple[list[bytes], list[bytes]]] = {}
    seen: dict[tuple[bytes, ...], int] = {}
    for j, col in enumerate(zip(first, *later, strict=True)):
        if col.count(col[0]) == len(col):
            continue
        k = seen.setdefault(col, j)
        if k != j:  # half the changing values repeat another's (a one-model engine's totals are its model's)
            js, xs = groups.setdefault(b"-3", ([], []))
            xs.append(b"%d" % k)
        else:
            d, text = _column(col)
            js, xs = groups.setdefault(d, ([], []))
            xs.append(b"[" + text + b"]")
        js.append(b"%d" % j)
    out = []
    for d, (js, xs) in groups.items():
        cols = b"[" + b",".join(xs) + b"]" if d == b"-3" else b",".join(xs)
        out.append(b"[" + d + b",[" + b",".join(js) + b"]," + cols + b"]")
    return b"[" + b",".join(out) + b"]"


def _column(col: tuple[bytes, ...]) -> tuple[bytes, bytes]:
    """(d, ``x1,x2,...``) for one column (its first value is in the run's first document)."""
    text = b",".join(col)
    if _INTS.fullmatch(text):
        ns = list(map(int, col))
        return b"-1", b",".join(map(b"%d".__mod__, map(operator.sub, ns[1:], ns[:-1])))
    # Decimals without an exponent, none a negative zero: n / 10**d (n < 2**53, d <= 15) is then the
    # double the text was written for, whose shortest text (what orjson writes) is that text again.
    if _DECS.fullmatch(text) and not _NEG_ZERO.search(text):
        fracs = list(map(len, _FRACTION.findall(text)))
        d = max(fracs)
        digits = text.replace(b".", b"").split(b",")
        ns = (list(map(int, digits)) if min(fracs) == d
              else [int(n) * 10 ** (d - f) for n, f in zip(digits, fracs, strict=True)])
        if d <= 15 and max(map(abs, ns)) < 2**53:
            return b"%d" % d, b",".join(map(b"%d".__mod__, map(operator.sub, ns[1:], ns[:-1])))
    if all(map(_round_trips, col[1:])):
        return b"null", b",".join(col[1:])
    return b"-2", b",".join(orjson.dumps(v.decode()) for v in col[1:])  # texts that JSON would rewrite


def _round_trips(value: bytes) -> bool:
    try:
        return orjson.dumps(orjson.loads(value)) == value
    except orjson.JSONDecodeError:
        return False


def _rebuild(first: bytes, columns: bytes, n: int) -> list[bytes]:
    """The ``n`` later documents of a run from its first document and its columns line."""
    layout, base = split(first)
    template = _interleaved(layout, base)  # a later document: a copy with its values in the odd places
    try:
        groups = orjson.loads(columns)
    except orjson.JSONDecodeError as exc:
        raise ColumnsError(f"columns are not JSON: {exc}") from None
    sets: list[tuple[list[int], list[list[bytes]]]] = []  # (positions, each later document's texts)
    dups: tuple[list[int], list[int]] = ([], [])
    try:
        for group in groups:
            d, js, cols = group[0], [int(j) for j in group[1]], group[2:]
            if d == -3:
                dups = ([2 * j + 1 for j in js], [2 * int(k) + 1 for k in cols[0]])
                continue
            if len(cols) != len(js) or any(len(c) != n for c in cols):
                raise ColumnsError("a column group of inconsistent lengths")
            rows = list(zip(*cols, strict=True)) if cols else [()] * n
            if d is None:
                texts = [list(map(orjson.dumps, row)) for row in rows]
            elif d == -2:
                texts = [[str(x).encode() for x in row] for row in rows]
            elif isinstance(d, int) and -1 <= d <= 15:
                texts = _sums(d, [base[j] for j in js], rows)
            else:
                raise ColumnsError(f"a column group of unknown kind {d!r}")
            if max(js, default=0) >= len(base) or min(js, default=0) < 0:
                raise ColumnsError("a column for a value the document does not have")
            sets.append(([2 * j + 1 for j in js], texts))
        out = []
        for k in range(n):
            buf = template.copy()
            for places, texts in sets:
                collections.deque(map(buf.__setitem__, places, texts[k]), maxlen=0)
            collections.deque(map(buf.__setitem__, dups[0], map(buf.__getitem__, dups[1])), maxlen=0)
            out.append(b"".join(buf))
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        raise ColumnsError(f"a bad column: {exc}") from None
    return out


def _sums(d: int, firsts: list[bytes], rows: Sequence[tuple[Any, ...]]) -> list[list[bytes]]:
    """Each later document's texts of a group of difference columns (``d`` -1: integers)."""
    if d == -1:
        acc = list(map(int, firsts))
    else:
        acc = [int(v.replace(b".", b"")) * 10 ** (d - len(v.partition(b".")[2])) for v in firsts]
    scale = itertools.repeat(10**d) if d >= 0 else None
    out = []
    for row in rows:
        acc = list(map(operator.add, acc, row))
        if scale is None:
            out.append(list(map(b"%d".__mod__, acc)))
        else:
            out.append(list(map(orjson.dumps, map(operator.truediv, acc, scale))))
    return out
