"""Document frames in column form: after the first document of a run, only the values that changed.

A frame's documents (one a second for 8 s) share almost all their text: the keys, the names, the
URLs. Split at its values (``split``: each number, ``true``, ``false`` or ``null`` that follows a
key), a document is a *layout* (the text around the values, strings included) and a list of values.
Consecutive documents of one layout form a run: its first document is stored whole, then each value
that changes in the run as a column, by position, with its values in the run's later documents.
Numbers of a column that are all integers, or all decimals with no exponent, are stored as integer
differences (``[j, d, n1 - n0, ...]``, the value being ``n / 10**d``; ``d`` -1 for integers; null for
the values as they are, -2 for values as strings of their text, e.g. ``1e-07``, which orjson would
write ``1e-7``; -3 for ``[j, -3, k]``, the same values as column k): the
small differences of slowly moving figures compress better than the figures themselves. A layout
that changes (a reason appears, an engine is added) starts a new run.

The payload (then compressed like the plain one, against the segment's dictionary)::

    {"t": [times], "runs": [documents in each run]}
    the first document of run 1, as JSON text
    [[j, d, x1, x2, ...], ...]      the columns of run 1 (d null: the values as they are)
    ... the same two lines for each further run

The plain form (``payloads.docs_payload``) starts with ``[``; ``payloads.read_doc_lines`` reads both.
Decoding gives the documents' exact JSON text back (a test checks it byte for byte).
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Sequence

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


class ColumnsError(ValueError):
    """A payload that is not a column-form documents payload."""


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
    # The layout has one piece more: zip stops before it, and it ends the text.
    heads = zip(layout, [_SEP + v for v in values], strict=False)
    return b"".join(itertools.chain.from_iterable(heads)) + layout[-1]


def encode(times: Sequence[float], docs: Sequence[tuple[list[bytes], list[bytes]]]) -> bytes:
    """The column-form payload of a frame's documents, each given as ``split`` gives it."""
    runs: list[int] = []
    body: list[bytes] = []
    k = 0
    while k < len(docs):
        layout, first = docs[k]
        end = k + 1
        while end < len(docs) and docs[end][0] == layout:
            end += 1
        runs.append(end - k)
        body.append(join(layout, first))
        body.append(_columns(first, [values for _, values in docs[k + 1:end]]))
        k = end
    head = orjson.dumps({"t": list(times), "runs": runs})
    return b"\n".join([head, *body]) + b"\n"


def decode(payload: bytes) -> list[tuple[float, bytes]]:
    """(time, JSON text) of each document of a column-form payload."""
    lines = payload.split(b"\n")
    try:
        head = orjson.loads(lines[0])
        times = [float(t) for t in head["t"]]
        runs = [int(n) for n in head["runs"]]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ColumnsError(f"not a column-form header: {exc}") from None
    if sum(runs) != len(times) or any(n < 1 for n in runs) or len(lines) < 2 * len(runs) + 1:
        raise ColumnsError("a column-form payload of inconsistent lengths")
    out: list[bytes] = []
    for r, n in enumerate(runs):
        first = lines[1 + 2 * r]
        out.append(first)
        if n > 1:
            out.extend(_rebuild(first, lines[2 + 2 * r], n - 1))
    return list(zip(times, out, strict=True))


def _columns(first: list[bytes], later: list[list[bytes]]) -> bytes:
    """The columns line: each value position that changes in ``later``, with its later values."""
    if not later:
        return b"[]"
    cols: list[bytes] = []
    seen: dict[tuple[bytes, ...], int] = {}
    for j, col in enumerate(zip(first, *later, strict=True)):
        if col.count(col[0]) == len(col):
            continue
        k = seen.setdefault(col, j)
        # Half the changing values repeat another's (a one-model engine's totals are its model's).
        cols.append(b"[%d,%s]" % (j, _column(col)) if k == j else b"[%d,-3,%d]" % (j, k))
    return b"[" + b",".join(cols) + b"]"


def _column(col: tuple[bytes, ...]) -> bytes:
    """``d,x1,x2,...`` for one column (its first value is in the run's first document)."""
    text = b",".join(col)
    if _INTS.fullmatch(text):
        ns = list(map(int, col))
        return b"-1," + b",".join(map(b"%d".__mod__, map(operator.sub, ns[1:], ns[:-1])))
    # Decimals without an exponent, none a negative zero: n / 10**d (n < 2**53, d <= 15) is then the
    # double the text was written for, whose shortest text (what orjson writes) is that text again.
    if _DECS.fullmatch(text) and not _NEG_ZERO.search(text):
        fracs = list(map(len, _FRACTION.findall(text)))
        d = max(fracs)
        digits = text.replace(b".", b"").split(b",")
        ns = (list(map(int, digits)) if min(fracs) == d
              else [int(n) * 10 ** (d - f) for n, f in zip(digits, fracs, strict=True)])
        if d <= 15 and max(map(abs, ns)) < 2**53:
            return b"%d," % d + b",".join(map(b"%d".__mod__, map(operator.sub, ns[1:], ns[:-1])))
    if all(map(_round_trips, col[1:])):
        return b"null," + b",".join(col[1:])
    return b"-2," + b",".join(orjson.dumps(v.decode()) for v in col[1:])  # texts that JSON would rewrite


def _round_trips(value: bytes) -> bool:
    try:
        return orjson.dumps(orjson.loads(value)) == value
    except orjson.JSONDecodeError:
        return False


def _rebuild(first: bytes, columns: bytes, n: int) -> list[bytes]:
    """The ``n`` later documents of a run from its first document and its columns line."""
    layout, base = split(first)
    try:
        cols = orjson.loads(columns)
    except orjson.JSONDecodeError as exc:
        raise ColumnsError(f"columns are not JSON: {exc}") from None
    rows = [list(base) for _ in range(n)]
    try:
        for col in cols:
            j, d, xs = int(col[0]), col[1], col[2:]
            if d == -3:  # the same values as an earlier column
                k = int(xs[0])
                for row in rows:
                    row[j] = row[k]
                continue
            if len(xs) != n:
                raise ColumnsError("a column of the wrong length")
            if d is None:
                texts = [orjson.dumps(x) for x in xs]
            elif d == -2:
                texts = [str(x).encode() for x in xs]
            elif d == -1:
                texts = [b"%d" % v for v in itertools.accumulate(xs, initial=int(base[j]))][1:]
            else:
                scale = 10 ** int(d)
                n0 = int(base[j].replace(b".", b"")) * 10 ** (int(d) - len(base[j].partition(b".")[2]))
                texts = [orjson.dumps(v / scale) for v in itertools.accumulate(xs, initial=n0)][1:]
            for row, text in zip(rows, texts, strict=True):
                row[j] = text
    except (IndexError, TypeError, ValueError) as exc:
        raise ColumnsError(f"a bad column: {exc}") from None
    return [join(layout, row) for row in rows]
