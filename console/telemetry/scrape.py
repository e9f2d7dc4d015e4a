"""HTTP probes of one engine: health/readiness, identity and the raw metrics payload.

Every request has a timeout and a response-size cap, sends the API key only where the engine's
profile says the path is guarded, and turns every failure into a short reason string, never an
exception, so one dead engine cannot disturb the others.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

from console.config import EngineInstance
from console.model import EngineIdentity, Phase
from console.secrets import scrub
from console.telemetry.bodies import ACCEPT_ENCODING, BodyError, BoundedBody

MAX_METRICS_BYTES = 16 * 1024 * 1024
MAX_JSON_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Fetched:
    """One HTTP exchange. ``status`` is None when no HTTP response arrived; ``error`` says why no usable
    body came (no response, or a body refused: over the size cap, undecodable)."""

    status: int | None
    body: bytes = b""
    error: str = ""
    content_type: str = ""
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300 and not self.error

    def reason(self) -> str:
        if self.error:
            return self.error
        detail = _error_message(self.body)
        return f"HTTP {self.status}" + (f" {detail}" if detail else "")


@dataclass(frozen=True, slots=True)
class Health:
    phase: Phase
    detail: str
    reachable: bool


def _error_message(body: bytes) -> str:
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


def _root_causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


def _describe(exc: Exception, timeout: float) -> str:
    if isinstance(exc, httpx.ConnectError):
        chain = _root_causes(exc)
        text = " ".join(str(e) for e in chain).lower()
        if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in text:
            return "connection refused"
        if "name or service" in text or "nodename" in text or "resolve" in text:
            return "host not found"
        return "cannot connect"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        # docker-proxy accepts on the published port, then closes while the container is not listening
        return "connection closed mid-response"
    return type(exc).__name__


class EngineProbe:
    """Talks HTTP to one engine instance through a shared ``httpx.AsyncClient``."""

    def __init__(self, instance: EngineInstance, client: httpx.AsyncClient, *, timeout: float = 2.0) -> None:
        self.instance = instance
        self.profile = instance.profile
        self.client = client
        self.timeout = timeout
        self.ever_ready = False

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
        url = self.instance.url + path
        headers = {"Accept-Encoding": ACCEPT_ENCODING, **self._headers(path)}
        start = time.perf_counter()
        try:
            async with self.client.stream("GET", url, headers=headers, timeout=t) as resp:
                try:
                    body = BoundedBody(resp.headers.get("content-encoding", ""), max_bytes)
                    async for chunk in resp.aiter_raw():
                        body.feed(chunk)
                    data = body.result()
                except BodyError as exc:
                    return Fetched(resp.status_code, error=str(exc), elapsed=time.perf_counter() - start)
                return Fetched(
                    resp.status_code,
                    data,
                    content_type=resp.headers.get("content-type", ""),
                    elapsed=time.perf_counter() - start,
                )
        except (httpx.HTTPError, OSError) as exc:
            return Fetched(None, error=_describe(exc, t), elapsed=time.perf_counter() - start)

    async def metrics(self) -> Fetched:
        return await self.fetch(self.profile.metrics.path, max_bytes=MAX_METRICS_BYTES)

    async def health(self) -> Health:
        """Map the engine's health/readiness answers to a phase, per its profile's semantics."""
        h = self.profile.health
        resp = await self.fetch(h.path)
        if resp.status is None:
            if resp.error == "connection refused" and "refused" in h.loading and not self.ever_ready:
                # Engines that bind late refuse while loading; without lifecycle knowledge we cannot
                # tell loading from down, so say both.
                return Health(Phase.UNREACHABLE, "connection refused (down, or still loading)", False)
            return Health(Phase.UNREACHABLE, resp.error, False)
        if resp.status == 503:
            msg = _error_message(resp.body)
            if "503" in h.loading and not self.ever_ready:
                return Health(Phase.LOADING, f"503 {msg}".strip(), True)
            return Health(Phase.UNHEALTHY, f"503 {msg}".strip(), True)
        if not resp.ok:
            return Health(Phase.UNHEALTHY, resp.reason(), True)
        ready = await self.fetch(h.ready_path)
        if ready.ok and _model_ids(ready.body):
            self.ever_ready = True
            return Health(Phase.READY, "", True)
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
            models = _model_ids(ready.body)
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


def _model_ids(body: bytes) -> tuple[str, ...]:
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
