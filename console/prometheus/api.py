"""The Prometheus HTTP API as this console uses it: ``/federate``, ``/api/v1/targets``, ``query_range``.

Synchronous (``httpx.Client``, called from the source's own threads), bounded by the source's
timeout, never following redirects; every failure is one ``PromError`` line that names the endpoint
and never the URL's user:password (the target's ``display``).
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from console.secrets import scrub
from console.sources import PromTarget

MAX_POINTS = 11_000  # Prometheus refuses a query_range of more points per series than this


class PromError(Exception):
    """One line: which endpoint failed and why, scrubbed of credentials (httpx names the URL it
    asked, with its ``user:password@``; a server's error text can quote a ``?token=``)."""

    def __init__(self, message: str) -> None:
        super().__init__(scrub(message))


@dataclass(frozen=True, slots=True)
class TargetInfo:
    """One active scrape target, as ``/api/v1/targets`` lists it."""

    labels: dict[str, str]
    scrape_url: str
    health: str  # up | down | unknown
    last_error: str
    interval_s: float


Series = tuple[dict[str, str], tuple[float, ...], tuple[float | None, ...]]  # labels, times, values


@dataclass(frozen=True, slots=True)
class Matrix:
    """A ``query_range`` result: per series its labels, its times (unix seconds) and its values
    (None where not finite), as two columns."""

    series: tuple[Series, ...]
    fetched_s: float = 0.0  # the request until its last byte (the server's evaluation most of it)
    decoded_s: float = 0.0  # JSON to these tuples


def step_for(range_s: float, interval_s: float) -> float:
    """Seconds between points: the scrape interval, or coarser where the range needs more than
    ``MAX_POINTS`` (Prometheus' limit per series)."""
    return float(max(max(1.0, interval_s), math.ceil(range_s / MAX_POINTS)))


def accept_encoding(url: str) -> str:
    """``identity`` for a server on this machine (loopback), ``gzip`` otherwise: on loopback the
    bytes cost nothing to move, while Prometheus compressing a backfill's answers and us inflating
    them cost CPU the two share (a backfill's answers took more than twice as long gzipped:
    docs/performance.md); over a network the compressed answers are a fraction of the bytes."""
    host = httpx.URL(url).host
    if host == "localhost":
        return "identity"
    try:
        return "identity" if ipaddress.ip_address(host).is_loopback else "gzip"
    except ValueError:  # a name: another machine, as far as we can tell
        return "gzip"


def duration_s(text: str) -> float:
    """A Prometheus duration (``1s``, ``15s``, ``1m30s``, ``500ms``) in seconds; 0 when unreadable."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    total, num, i = 0.0, "", 0
    while i < len(text):
        c = text[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        unit = "ms" if text.startswith("ms", i) else c
        if unit not in units or not num:
            return 0.0
        total += float(num) * units[unit]
        num = ""
        i += len(unit)
    return total


class PromClient:
    """HTTP calls to one source's server (one connection pool, reused)."""

    def __init__(self, target: PromTarget) -> None:
        self.target = target
        self._client = httpx.Client(base_url=target.url, timeout=target.timeout, trust_env=False,
                                    follow_redirects=False, headers={"Accept-Encoding": accept_encoding(target.url)})

    def close(self) -> None:
        self._client.close()

    def _get(self, path: str, params: httpx.QueryParams) -> httpx.Response:
        try:
            resp = self._client.get(path, params=params)
        except httpx.TimeoutException:
            raise PromError(f"{path}: no answer within {self.target.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise PromError(f"{path}: {type(exc).__name__}: {str(exc) or 'failed'}"[:200]) from None
        if resp.status_code != 200:
            raise PromError(f"{path}: HTTP {resp.status_code}{_api_error(resp)}")
        return resp

    def federate(self, matches: Sequence[str]) -> bytes:
        """The current value of every series of the ``match[]`` selectors (text format)."""
        return self._get("/federate", httpx.QueryParams([("match[]", m) for m in matches])).content

    def targets(self) -> list[TargetInfo]:
        doc = _data(self._get("/api/v1/targets", httpx.QueryParams({"state": "active"})), "/api/v1/targets")
        out = []
        for t in doc.get("activeTargets") or ():
            out.append(TargetInfo(labels=dict(t.get("labels") or {}), scrape_url=str(t.get("scrapeUrl") or ""),
                                  health=str(t.get("health") or "unknown"), last_error=str(t.get("lastError") or ""),
                                  interval_s=duration_s(str(t.get("scrapeInterval") or ""))))
        return out

    def query_range(self, query: str, start: float, end: float, step: float) -> Matrix:
        """``query`` evaluated every ``step`` seconds from ``start`` to ``end`` (unix seconds)."""
        began = time.perf_counter()
        resp = self._get("/api/v1/query_range", httpx.QueryParams(
            {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}))
        fetched = time.perf_counter()
        out = _flat_series(resp.content)
        if out is None:
            out = _pair_series(_data(resp, "query_range"))
        return Matrix(tuple(out), fetched - began, time.perf_counter() - fetched)


_POINTS = b'},"values":['  # where a series' points begin in Prometheus' answer (after its labels)


def _flat_series(body: bytes) -> list[Series] | None:
    """The series of a ``query_range`` answer read with each one's ``[[t,"v"],...]`` as one flat
    ``[t,v,...]`` of JSON numbers (the brackets and quotes dropped in one C pass): a third of the
    objects to make, the values read by the JSON parser, and a few times faster on a backfill's
    bucket series. None where that reading could differ (a ``-0``, which a JSON number loses the
    sign of; a NaN or Inf, which is no JSON number; anything unexpected): the pairs are read then
    (``_pair_series``)."""
    if b'"-0"' in body:
        return None
    parts: list[bytes] = []
    pos = 0
    while (i := body.find(_POINTS, pos)) >= 0:
        i += len(_POINTS)
        j = body.find(b"]]", i)
        if j < 0 or body[i:i + 1] != b"[":
            return None
        points = body[i:j + 1].translate(None, b'[]"')
        if points.translate(None, b"0123456789.,-+eE"):  # not numbers only (NaN, Inf)
            return None
        parts += (body[pos:i], points)
        pos = j + 1
    parts.append(body[pos:])
    try:
        doc = orjson.loads(b"".join(parts))
        if doc["status"] != "success":
            return None
        out: list[Series] = []
        for s in doc["data"]["result"] or ():
            flat = s.get("values") or []
            values = tuple(map(float, flat[1::2]))
            if len(flat) % 2 or not all(map(math.isfinite, values)):
                return None
            out.append((dict(s.get("metric") or {}), tuple(map(float, flat[0::2])), values))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None
    return out


def _pair_series(doc: dict[str, Any]) -> list[Series]:
    """The series of a ``query_range`` answer as Prometheus sends them (``[[t, "v"], ...]``; a value
    that is not a finite number is None)."""
    out: list[Series] = []
    for s in doc.get("result") or ():
        # [[t, "v"], ...] into its two columns, each converted in one C loop (map), not per pair.
        ts, vs = zip(*pairs, strict=True) if (pairs := s.get("values")) else ((), ())
        try:  # the common case: numbers, all finite
            values: tuple[float | None, ...] = tuple(map(float, vs))
            if not all(map(math.isfinite, values)):  # type: ignore[arg-type]
                raise ValueError
        except (TypeError, ValueError):
            values = tuple(map(_value, vs))
        out.append((dict(s.get("metric") or {}), tuple(map(float, ts)), values))
    return out


def _value(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _api_error(resp: httpx.Response) -> str:
    try:
        doc = orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        return ""
    err = doc.get("error") if isinstance(doc, dict) else None
    return f": {str(err)[:160]}" if err else ""


def _data(resp: httpx.Response, what: str) -> dict[str, Any]:
    try:
        doc = orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        raise PromError(f"{what}: the answer is not JSON (is this a Prometheus server?)") from None
    if not isinstance(doc, dict) or doc.get("status") != "success" or not isinstance(doc.get("data"), dict):
        raise PromError(f"{what}: {str(doc.get('error') if isinstance(doc, dict) else 'unexpected answer')[:160]}")
    data: dict[str, Any] = doc["data"]
    return data
