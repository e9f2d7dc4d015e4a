"""HTTP probes of one engine: health/readiness, identity and the raw metrics payload.

Every request has a timeout and a response-size cap, sends the API key only where the engine's
profile says the path is guarded, and turns every failure into a short reason string, never an
exception, so one dead engine cannot disturb the others. Why no answer came is a ``Failure``
kind, never read back from the text. The lifecycle's readiness probe (``console.lifecycle.probe``)
fetches through ``fetch`` too and reads bodies with ``error_message`` and ``model_ids``.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
from dataclasses import dataclass
from enum import Enum
from typing import Any

from console.config import EngineInstance
from console.model import EngineIdentity, Phase
from console.secrets import mask_url, scrub
from console.transport.bodies import ACCEPT_ENCODING, BodyError, BoundedBody, decode_body, release_refused, size_text
from console.transport.http import ClosedEarly, ConnectFailed, HTTPClient, HTTPError, NoAnswer, Response

MAX_METRICS_BYTES = 16 * 1024 * 1024
MAX_JSON_BYTES = 1024 * 1024


class Failure(Enum):
    """Why an exchange gave no usable body."""

    REFUSED = "refused"  # nothing listens on the port
    NO_HOST = "no host"  # the name does not resolve
    TLS = "tls"  # the TLS handshake failed
    CANNOT_CONNECT = "cannot connect"  # any other reason the connection was not made
    NO_ANSWER = "no answer"  # the connection, headers or body did not arrive in time
    CLOSED_EARLY = "closed early"  # the server closed before the response was complete
    BAD_RESPONSE = "bad response"  # not HTTP, or malformed
    BODY_REFUSED = "body refused"  # over the size cap, or an encoding that cannot be undone


@dataclass(frozen=True, slots=True)
class Fetched:
    """One HTTP exchange. ``status`` is None when no HTTP response arrived; ``error`` says why no usable
    body came (no response, or a body refused: over the size cap, undecodable), ``failure`` its kind."""

    status: int | None
    body: bytes = b""
    error: str = ""
    content_type: str = ""
    elapsed: float = 0.0
    failure: Failure | None = None
    location: str = ""  # a redirect's Location header, for a caller that follows redirects itself

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300 and not self.error

    def reason(self) -> str:
        if self.error:
            return self.error
        detail = error_message(self.body)
        code = str(self.status)
        if detail.startswith(code) and detail[len(code):len(code) + 1] in (":", " ", ""):
            detail = detail[len(code):].lstrip(": ")  # "302: Found" (aiohttp's bodies) says the code again
        return f"HTTP {self.status}" + (f" {detail}" if detail else "")


@dataclass(frozen=True, slots=True)
class Health:
    phase: Phase
    detail: str
    reachable: bool


def error_message(body: bytes) -> str:
    """The message inside an engine's error body, whatever its shape (nested, flat, plain text),
    with anything secret-shaped masked (an error body can echo a token back)."""
    return scrub(_message(body))


def _message(body: bytes) -> str:
    text = body[:2048].decode("utf-8", "replace").strip()
    if not text:
        return ""
    try:
        data = json.loads(text)
    except ValueError:
        return text.splitlines()[0][:120]
    if isinstance(data, dict):
        err = data.get("error", data.get("message"))
        if isinstance(err, dict):
            err = err.get("message")
        if isinstance(err, str):
            return err[:120]
        msg = data.get("message")
        if isinstance(msg, str):
            return msg[:120]
    return ""


NOT_AN_ENGINE = "not an engine"
# A Content-Type's media type (``text/html; charset=utf-8`` -> ``text/html``); anything else a server
# puts there is not repeated.
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9!#$&^_.+-]{1,40}/[A-Za-z0-9!#$&^_.+-]{1,60}")


def _media_type(content_type: str) -> str:
    m = _MEDIA_TYPE.match(content_type.strip())
    return m.group(0).lower() if m else ""


def not_an_engine(path: str, got: Fetched, *, model_list: bool) -> str:
    """What answered ``path`` when no inference engine answers that way (``''`` when one could):
    a redirect (a login page's), an HTML page, and where a model list is expected (``model_list``:
    the ready path), a 2xx with no body, a body that is not JSON, or JSON of another shape. Every
    engine answers its health and ready paths with an empty body or JSON, and refuses the
    connection or answers 503 while it loads (engines/*.toml ``loading``), so none of these is
    loading. The answer is described by its status and media type, never by its text."""
    status = got.status
    if status is None or got.error:
        return ""
    if 300 <= status < 400:
        where = mask_url(got.location.strip())[:120] if got.location.strip() else "no Location"
        return f"{path} redirected ({status}) to {where}"
    if not 200 <= status < 300:
        return ""
    media = _media_type(got.content_type)
    body = got.body
    if media in ("text/html", "application/xhtml+xml"):
        return f"{path} answered {media}"
    if body[:512].lstrip()[:1] == b"<":  # markup under another (or no) Content-Type
        return f"{path} answered an HTML page"
    if not model_list:
        return ""
    if not body.strip():
        return f"{path} answered {status} with no body"
    data = _json(body)
    if data is None and body.strip() != b"null":
        return f"{path} answered {media if media and 'json' not in media else 'a body that is not JSON'}"
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return f"{path} answered JSON that is not a model list"
    if items and not model_ids(body):
        return f"{path} answered a model list without model ids"
    return ""  # an empty model list: an engine with nothing loaded yet


def _describe(exc: HTTPError, timeout: float) -> tuple[Failure, str]:
    if isinstance(exc, ConnectFailed):
        cause = exc.cause
        if isinstance(cause, ConnectionRefusedError):
            return Failure.REFUSED, "connection refused"
        if isinstance(cause, socket.gaierror):
            return Failure.NO_HOST, "host not found"
        if isinstance(cause, ssl.SSLError):
            return Failure.TLS, f"TLS: {getattr(cause, 'verify_message', '') or cause.reason or 'handshake failed'}"
        return Failure.CANNOT_CONNECT, "cannot connect"
    if isinstance(exc, NoAnswer):
        return Failure.NO_ANSWER, f"no answer within {timeout:g} s"
    if isinstance(exc, ClosedEarly):
        # docker-proxy accepts on the published port, then closes while the container is not listening
        return Failure.CLOSED_EARLY, "connection closed mid-response"
    return Failure.BAD_RESPONSE, f"bad HTTP response ({exc})"


class _Refused(HTTPError):
    """The body was refused while it arrived (over the cap, an encoding that cannot be undone)."""


class _CappedBody:
    """Sink for a 2xx body: decoded from its Content-Encoding as it arrives, under ``max_bytes``.
    A refusal aborts the connection at once, so a huge body is never read to its end."""

    __slots__ = ("_body", "_max", "error", "status")

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._body: BoundedBody | None = None
        self.error = ""
        self.status: int | None = None

    def on_sent(self, t_ns: int) -> None:
        pass

    def on_headers(self, resp: Response) -> None:
        self.status = resp.status
        try:
            declared = int(resp.headers.get("content-length", "") or -1)
        except ValueError:
            declared = -1  # the client refuses a malformed length itself
        if declared > self._max:  # refused before a byte of it is read
            self.error = f"response larger than {size_text(self._max)} (Content-Length {declared})"
            raise _Refused(self.error)
        try:
            self._body = BoundedBody(resp.headers.get("content-encoding", ""), self._max)
        except BodyError as exc:
            self.error = str(exc)
            raise _Refused(self.error) from None

    def on_body(self, data: bytes, t_ns: int) -> None:
        assert self._body is not None
        try:
            self._body.feed(data)
        except BodyError as exc:
            self.error = str(exc)
            raise _Refused(self.error) from None

    def on_end(self, t_ns: int) -> None:
        pass

    def result(self) -> bytes:
        return self._body.result() if self._body is not None else b""


async def fetch(client: HTTPClient, path: str, headers: dict[str, str], *, max_bytes: int, timeout: float) -> Fetched:
    """GET one path through ``client`` with ``headers`` (a key, a narrower Accept): the body decoded
    from any Content-Encoding, capped before and after decoding; every failure a ``Fetched`` with its
    kind, never an exception. Redirects are not followed (``location`` says where to)."""
    headers = {"Accept": "*/*", "Accept-Encoding": ACCEPT_ENCODING, **headers}
    sink = _CappedBody(max_bytes)
    start = time.perf_counter()
    try:
        resp = await client.request("GET", path, headers=headers, sink=sink, timeout=timeout)
    except _Refused:
        release_refused()
        return Fetched(sink.status, error=sink.error, elapsed=time.perf_counter() - start, failure=Failure.BODY_REFUSED)
    except HTTPError as exc:
        failure, error = _describe(exc, timeout)
        return Fetched(None, error=error, elapsed=time.perf_counter() - start, failure=failure)
    encoding = resp.headers.get("content-encoding", "")
    try:
        if 200 <= resp.status < 300:
            data = sink.result()
        else:  # an error body, collected whole (bounded by the client): decode it too
            data = decode_body(resp.body, encoding, max_bytes) if encoding else resp.body
    except BodyError as exc:
        return Fetched(resp.status, error=str(exc), elapsed=time.perf_counter() - start, failure=Failure.BODY_REFUSED)
    return Fetched(resp.status, data, content_type=resp.headers.get("content-type", ""),
                   elapsed=time.perf_counter() - start, location=resp.headers.get("location", ""))


class EngineProbe:
    """Talks HTTP to one engine instance over its own keep-alive connection, through the console's
    own HTTP client (``console.transport.http``), which fetches a payload for a fraction of httpx's CPU
    (``benchmarks/scrape_path.py``; docs/performance.md)."""

    def __init__(self, instance: EngineInstance, *, timeout: float = 2.0, tls: ssl.SSLContext | None = None) -> None:
        self.instance = instance
        self.profile = instance.profile
        self.timeout = timeout
        self._tls = tls
        self._client: HTTPClient | None = None
        self.ever_ready = False

    @property
    def client(self) -> HTTPClient:
        """Made on first use: a URL the client refuses (a port out of range) fails that round,
        as the engine's reason, not the constructor of everything that holds a probe."""
        if self._client is None:
            self._client = HTTPClient(self.instance.url, connect_timeout=self.timeout, tls=self._tls)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def _headers(self, path: str) -> dict[str, str]:
        # The key goes only where the profile says the engine checks it (an engine that guards
        # more, such as older SGLang builds on /metrics, needs a profile override saying so).
        key = self.instance.api_key
        if key and self.profile.path_needs_key(path):
            return {"Authorization": f"Bearer {key}"}
        return {}

    async def fetch(self, path: str, *, max_bytes: int = MAX_JSON_BYTES, timeout: float | None = None) -> Fetched:
        """GET one path: the body decoded from any Content-Encoding, capped before and after decoding."""
        t = self.timeout if timeout is None else timeout
        return await fetch(self.client, path, self._headers(path), max_bytes=max_bytes, timeout=t)

    async def metrics(self) -> Fetched:
        return await self.fetch(self.profile.metrics.path, max_bytes=MAX_METRICS_BYTES)

    async def health(self) -> Health:
        """Map the engine's health/readiness answers to a phase, per its profile's semantics."""
        h = self.profile.health
        resp = await self.fetch(h.path)
        if resp.status is None:
            if resp.failure is Failure.REFUSED and "refused" in h.loading and not self.ever_ready:
                # Engines that bind late refuse while loading; without lifecycle knowledge we cannot
                # tell loading from down, so say both.
                return Health(Phase.UNREACHABLE, "connection refused (down, or still loading)", False)
            return Health(Phase.UNREACHABLE, resp.error, False)
        if resp.status == 503:
            msg = error_message(resp.body)
            if "503" in h.loading and not self.ever_ready:
                return Health(Phase.LOADING, f"503 {msg}".strip(), True)
            return Health(Phase.UNHEALTHY, f"503 {msg}".strip(), True)
        stranger = not_an_engine(h.path, resp, model_list=h.path == h.ready_path)
        if stranger:
            return Health(Phase.UNHEALTHY, f"{NOT_AN_ENGINE}: {stranger}", True)
        if not resp.ok:
            return Health(Phase.UNHEALTHY, resp.reason(), True)
        ready = await self.fetch(h.ready_path)
        if ready.ok and model_ids(ready.body):
            self.ever_ready = True
            return Health(Phase.READY, "", True)
        stranger = not_an_engine(h.ready_path, ready, model_list=True)
        if stranger:
            return Health(Phase.UNHEALTHY, f"{NOT_AN_ENGINE}: {stranger}", True)
        if ready.status == 503:
            return Health(Phase.LOADING, ready.reason(), True)
        if ready.status in (401, 403):
            return Health(Phase.DEGRADED, f"{h.ready_path}: {ready.reason()} (check api_key_env)", True)
        phase = Phase.DEGRADED if self.ever_ready else Phase.LOADING
        return Health(phase, f"{h.ready_path}: {ready.reason()}", True)

    async def identity(self) -> EngineIdentity:
        h = self.profile.health
        models: tuple[str, ...] = ()
        max_len: int | None = None
        ready = await self.fetch(h.ready_path)
        if ready.ok:
            models = model_ids(ready.body)
            max_len = _max_model_len(ready.body)
        version: str | None = None
        if h.version_path:
            resp = await self.fetch(h.version_path)
            if resp.ok:
                data = _json(resp.body)
                value = _dotted(data, h.version_key)
                if value is not None:
                    version = str(value)
                if max_len is None and isinstance(data, dict):
                    for key in ("max_total_tokens", "max_model_len", "context_length"):
                        if isinstance(data.get(key), int):
                            max_len = int(data[key])
                            break
        return EngineIdentity(version=version, models=models, max_model_len=max_len)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _dotted(data: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def model_ids(body: bytes) -> tuple[str, ...]:
    """The model ids of an OpenAI-style ``/v1/models`` answer (``{"data": [{"id": ...}, ...]}``)."""
    data = _json(body)
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return ()
    return tuple(str(m["id"]) for m in items if isinstance(m, dict) and "id" in m)


def _max_model_len(body: bytes) -> int | None:
    data = _json(body)
    items = data.get("data") if isinstance(data, dict) else None
    if isinstance(items, list):
        for m in items:
            if isinstance(m, dict) and isinstance(m.get("max_model_len"), int):
                return int(m["max_model_len"])
    return None
