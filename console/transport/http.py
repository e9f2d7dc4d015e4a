"""A small HTTP/1.1 client on ``asyncio.Protocol``, built for streaming responses.

Why not aiohttp/httpx: a load generator must timestamp every SSE event on arrival and keep its
own CPU cost per event low. Here the response body is decoded (chunked or length-delimited)
synchronously inside ``data_received`` and handed to a sink with the arrival time of the read
that carried it (``time.perf_counter_ns()`` taken before any parsing), so there is no await,
no task switch and no line iterator per event. Connections are kept alive and reused
(one request at a time per connection); ``TCP_NODELAY`` is set (Nagle's algorithm waiting on the
server's delayed ACK adds 40-80 ms stalls to small writes otherwise).

Every request to an engine goes through it: the telemetry probes (``console/telemetry/engine/scrape.py``),
the lifecycle's readiness probe and ``inspect-metrics`` (both through ``scrape.fetch``). A metrics
payload costs a fraction of the CPU to fetch here that it costs through httpx
(``benchmarks/scrape_path.py``), and the live console then imports no httpx. httpx stays only for the
Prometheus and Kubernetes API sources: blocking API clients called from worker threads, with a
cluster's own CA file, where one request per period makes its CPU cost immaterial.

It is kept because it measures better: ``benchmarks/client_capacity.py`` runs it against aiohttp
with everything else the same (orjson bodies encoded beforehand, ``sse.py``, the same sink), and
per CPU-second this client handles more requests and SSE events (docs/performance.md). Should that
ratio fall below 1.3x, it should give way to aiohttp.

Cancelling a request aborts its connection at once (RST/FIN), so the server sees the client go.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

_perf_ns = time.perf_counter_ns
_MAX_HEADER = 64 * 1024
_MAX_ERROR_BODY = 1 << 20


class BodySink(Protocol):
    """Receives the decoded body of one streaming response."""

    def on_sent(self, t_ns: int) -> None:
        """Called with the time taken immediately before the request bytes are written."""

    def on_body(self, data: bytes, t_ns: int) -> None: ...

    def on_end(self, t_ns: int) -> None: ...


class HTTPError(Exception):
    """Transport-level failure (refused, reset, timeout, malformed response)."""


class ConnectFailed(HTTPError):
    """No connection: ``cause`` is the OS's reason (refused, name not resolved, TLS refused)."""

    def __init__(self, message: str, cause: OSError) -> None:
        super().__init__(message)
        self.cause = cause


class NoAnswer(HTTPError):
    """The connection, the headers or the whole body did not arrive in time."""


class ClosedEarly(HTTPError):
    """The server closed the connection before the response was complete."""


class StreamCancelled(HTTPError):
    """The caller aborted the stream (``Cancellable.cancel``)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    base: str  # path prefix of the URL ("" for http://h:p)

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(slots=True)
class Response:
    status: int
    reason: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""  # only for non-streamed reads (errors, small JSON)
    t_headers_ns: int = 0
    t_end_ns: int = 0


def _seen(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


class _Collect:
    """Sink that keeps the whole body (bounded)."""

    __slots__ = ("chunks", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0

    def on_body(self, data: bytes, t_ns: int) -> None:
        if self.size < _MAX_ERROR_BODY:
            self.chunks.append(data)
            self.size += len(data)

    def on_end(self, t_ns: int) -> None:
        pass


_READ_BUF = 256 * 1024


class _Conn(asyncio.BufferedProtocol):
    """One keep-alive connection; one request in flight at a time.

    A buffered protocol: the loop ``recv_into``s one preallocated buffer instead of allocating a
    256 KiB bytes object per read (a measurable share of the per-read cost at high event rates).
    """

    def __init__(self) -> None:
        self._rbuf = bytearray(_READ_BUF)
        self._rview = memoryview(self._rbuf)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.aborted = False  # we aborted it (cancel), as opposed to the server closing it
        self._buf = b""
        # 0 idle, 1 headers, 2 chunk-size, 3 chunk-data, 4 chunk-crlf, 5 length, 6 until-close, 7 trailers
        self._state = 0
        self._remaining = 0
        self._sink: BodySink | None = None
        self._stream_ok = False  # 2xx: stream to the caller's sink; otherwise collect
        self._collect = _Collect()
        self._resp: Response | None = None
        self._headers_fut: asyncio.Future[Response] | None = None
        self._done_fut: asyncio.Future[None] | None = None
        self._keep_alive = True
        self._head_request = False
        self._on_headers: Callable[[Response], None] | None = None

    # --- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        t = _perf_ns()
        if self._state == 6 and self._resp is not None:  # close-delimited body ends here
            self._finish(t)
            return
        err: HTTPError
        if self.aborted:
            err = StreamCancelled("cancelled by the client")
        else:
            err = ClosedEarly(f"connection closed by server{': ' + str(exc) if exc else ''}")
        if self._headers_fut is not None and not self._headers_fut.done():
            self._headers_fut.set_exception(err)
        if self._done_fut is not None and not self._done_fut.done():
            self._done_fut.set_exception(err)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._rview

    def buffer_updated(self, nbytes: int) -> None:
        t = _perf_ns()  # arrival time, before any parsing
        self._received(bytes(self._rview[:nbytes]), t)

    def data_received(self, data: bytes) -> None:
        self._received(data, _perf_ns())

    def _received(self, data: bytes, t: int) -> None:
        buf = self._buf + data if self._buf else data
        self._buf = b""
        try:
            self._process(buf, t)
        except HTTPError as exc:
            self._fail(exc)

    # --- request side
    def start(
        self, raw: bytes, sink: BodySink | None, head: bool = False
    ) -> tuple[asyncio.Future[Response], asyncio.Future[None]]:
        loop = asyncio.get_running_loop()
        self._headers_fut = loop.create_future()
        self._done_fut = loop.create_future()
        # A request whose caller left (cancelled, timed out) still gets its failure set here later:
        # marked as seen, so asyncio does not log "Future exception was never retrieved" for it.
        for fut in (self._headers_fut, self._done_fut):
            fut.add_done_callback(_seen)
        if self.closed:
            # Closed between connect and now: docker-proxy accepts and at once resets a connection
            # while nothing listens in the container. Writing to the closed transport would be
            # dropped silently and the request would wait out its whole timeout.
            err = ClosedEarly("connection closed by server before the request was sent")
            self._headers_fut.set_exception(err)
            self._done_fut.set_exception(err)
            return self._headers_fut, self._done_fut
        self._sink = sink
        # A sink may want the status and headers before the body (e.g. to pick a decoder).
        self._on_headers = getattr(sink, "on_headers", None)
        self._collect = _Collect()
        self._resp = None
        self._state = 1
        self._head_request = head
        assert self.transport is not None
        if sink is not None:
            sink.on_sent(_perf_ns())  # t_send: immediately before the request is written
        self.transport.write(raw)
        return self._headers_fut, self._done_fut

    def abort(self) -> None:
        self.closed = True
        self.aborted = True
        if self.transport is not None:
            self.transport.abort()

    # --- parsing
    def _process(self, buf: bytes, t: int) -> None:
        pos = 0
        n = len(buf)
        while pos < n:
            st = self._state
            if 2 <= st <= 4:  # chunked body: the hot path
                pos = self._chunked(buf, pos, n, t)
                if 2 <= self._state <= 4:
                    break  # need more bytes
            elif st == 5:  # content-length body
                take = min(self._remaining, n - pos)
                self._emit(buf[pos : pos + take], t)
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._finish(t)
            elif st == 6:  # body until the server closes
                self._emit(buf[pos:], t)
                pos = n
            elif st == 7:  # trailers after the last chunk: end at an empty line
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                line_empty = eol == pos
                pos = eol + 2
                if line_empty:
                    self._finish(t)
            elif st == 1:
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    if n - pos > _MAX_HEADER:
                        raise HTTPError("response headers too large")
                    break
                self._parse_headers(buf[pos:end], t)
                pos = end + 4
            else:  # idle: bytes nobody asked for
                pos = n
        if pos < n:
            self._buf = buf[pos:]

    def _chunked(self, buf: bytes, pos: int, n: int, t: int) -> int:
        """Decode every complete chunk in ``buf[pos:]``; hand their data to the sink in ONE call
        (all of it arrived in the same read, so it carries the same arrival time)."""
        parts: list[bytes] = []
        find = buf.find
        state = self._state
        remaining = self._remaining
        while True:
            if state == 3:  # chunk data
                take = remaining if remaining <= n - pos else n - pos
                if take:
                    parts.append(buf[pos : pos + take])
                pos += take
                remaining -= take
                if remaining:
                    break
                state = 4
            if state == 4:  # CRLF after the data
                if n - pos < 2:
                    break
                pos += 2
                state = 2
            eol = find(b"\r\n", pos)  # chunk-size line
            if eol < 0:
                if n - pos > 1024:
                    raise HTTPError("malformed chunk size line")
                break
            try:
                size = int(buf[pos:eol], 16)
            except ValueError:
                size_s = buf[pos:eol].split(b";", 1)[0].strip()  # chunk extensions (rare)
                try:
                    size = int(size_s, 16)
                except ValueError:
                    raise HTTPError(f"malformed chunk size {size_s[:20]!r}") from None
            pos = eol + 2
            if size == 0:
                state = 7
                break
            remaining = size
            state = 3
        self._state = state
        self._remaining = remaining
        if parts:
            self._emit(parts[0] if len(parts) == 1 else b"".join(parts), t)
        return pos

    def _parse_headers(self, head: bytes, t: int) -> None:
        lines = head.split(b"\r\n")
        status_line = lines[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise HTTPError(f"malformed status line {status_line[:60]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise HTTPError(f"malformed status line {status_line[:60]!r}") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        if 100 <= status < 200:  # 100-continue and friends: wait for the real response
            return
        resp = Response(status, parts[2] if len(parts) > 2 else "", headers, t_headers_ns=t)
        self._resp = resp
        self._stream_ok = 200 <= status < 300 and self._sink is not None
        conn_hdr = headers.get("connection", "").lower()
        self._keep_alive = parts[0] == "HTTP/1.1" and conn_hdr != "close"
        if self._stream_ok and self._on_headers is not None:
            self._on_headers(resp)
        if self._headers_fut is not None and not self._headers_fut.done():
            self._headers_fut.set_result(resp)
        te = headers.get("transfer-encoding", "").lower()
        if self._head_request or status in (204, 304):
            self._finish(t)
        elif "chunked" in te:
            self._state = 2
        elif "content-length" in headers:
            try:
                self._remaining = int(headers["content-length"])
            except ValueError:
                raise HTTPError("malformed content-length") from None
            self._state = 5
            if self._remaining == 0:
                self._finish(t)
        else:
            self._keep_alive = False
            self._state = 6

    def _emit(self, data: bytes, t: int) -> None:
        if self._stream_ok:
            assert self._sink is not None
            self._sink.on_body(data, t)
        else:
            self._collect.on_body(data, t)

    def _finish(self, t: int) -> None:
        self._state = 0
        resp = self._resp
        if resp is not None:
            resp.t_end_ns = t
            if not self._stream_ok:
                resp.body = b"".join(self._collect.chunks)
        if self._stream_ok and self._sink is not None:
            self._sink.on_end(t)
        self._sink = None
        if not self._keep_alive:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
        if self._done_fut is not None and not self._done_fut.done():
            self._done_fut.set_result(None)

    def _fail(self, exc: Exception) -> None:
        for fut in (self._headers_fut, self._done_fut):
            if fut is not None and not fut.done():
                fut.set_exception(exc)
        self.abort()


class HTTPClient:
    """Keep-alive connection pool for one endpoint (http only; https goes through asyncio's SSL)."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 5.0,
        user_agent: str = "enginedeck",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.endpoint = Endpoint.parse(url)
        self.connect_timeout = connect_timeout
        # https: this context (one shared by many clients saves loading the CA store for each), else
        # asyncio's default one.
        self.tls = tls
        self._idle: list[_Conn] = []
        self._all: set[_Conn] = set()
        self._ua = user_agent

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        ep = self.endpoint
        tls: ssl.SSLContext | bool | None = (self.tls or True) if ep.scheme == "https" else None
        try:
            _, proto = await asyncio.wait_for(
                loop.create_connection(_Conn, ep.host, ep.port, ssl=tls), self.connect_timeout
            )
        except TimeoutError:
            raise NoAnswer(f"connect to {ep.host}:{ep.port} timed out after {self.connect_timeout:g}s") from None
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise ConnectFailed(f"cannot connect to {ep.host}:{ep.port}: {reason}", exc) from None
        self._all.add(proto)
        return proto

    async def _acquire(self) -> tuple[_Conn, bool]:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn, True
            self._all.discard(conn)
        return await self._connect(), False

    def _release(self, conn: _Conn) -> None:
        if conn.closed:
            self._all.discard(conn)
        else:
            self._idle.append(conn)

    def build(self, method: str, path: str, body: bytes | None, headers: Mapping[str, str] | None) -> bytes:
        ep = self.endpoint
        lines = [f"{method} {ep.base}{path} HTTP/1.1", f"Host: {ep.host_header}", f"User-Agent: {self._ua}"]
        if headers:
            lines.extend(f"{k}: {v}" for k, v in headers.items())
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + body if body else head

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        sink: BodySink | None = None,
        on_sent: Cancellable | None = None,
        timeout: float | None = None,
    ) -> Response:
        """Send one request. With ``sink``, a 2xx body streams to it; otherwise it is collected.

        ``on_sent`` (if given) is told the connection, so a caller can abort the stream.
        Returns when the whole body has arrived. Cancelling the awaiting task aborts the connection.
        """
        raw = self.build(method, path, body, headers)
        for attempt in (0, 1):
            conn, reused = await self._acquire()
            if on_sent is not None:
                on_sent.attach(conn)
            hfut, dfut = conn.start(raw, sink, head=method == "HEAD")
            try:
                resp = await asyncio.wait_for(asyncio.shield(hfut), timeout) if timeout else await hfut
                if timeout:
                    await asyncio.wait_for(dfut, timeout)
                else:
                    await dfut
            except StreamCancelled:
                self._all.discard(conn)
                raise
            except HTTPError:
                got_headers = hfut.done() and not hfut.cancelled() and hfut.exception() is None
                conn.abort()
                self._all.discard(conn)
                # A kept-alive connection the server closed while idle: retry once on a new one,
                # but only if nothing was received yet (the request was not processed).
                if reused and attempt == 0 and not got_headers and not (on_sent and on_sent.cancelled):
                    continue
                raise
            except TimeoutError:
                conn.abort()
                self._all.discard(conn)
                raise NoAnswer(f"{method} {path}: no complete response within {timeout:g}s") from None
            except BaseException:
                conn.abort()  # cancelled: close the stream at once so the server sees it
                self._all.discard(conn)
                raise
            self._release(conn)
            return resp
        raise HTTPError("unreachable")  # pragma: no cover

    async def get(self, path: str, *, headers: Mapping[str, str] | None = None, timeout: float = 5.0) -> Response:
        return await self.request("GET", path, headers=headers, timeout=timeout)

    def close(self) -> None:
        for conn in list(self._all):
            conn.abort()
        self._all.clear()
        self._idle.clear()


class Cancellable:
    """A handle a caller keeps to abort an in-flight stream from elsewhere (e.g. a UI key)."""

    __slots__ = ("_conn", "cancelled")

    def __init__(self) -> None:
        self._conn: _Conn | None = None
        self.cancelled = False

    def attach(self, conn: _Conn) -> None:
        self._conn = conn
        if self.cancelled:
            conn.abort()

    def cancel(self) -> None:
        self.cancelled = True
        if self._conn is not None:
            self._conn.abort()
