"""Readiness probe: one GET of the profile's ready path, classified for the phase machine.

Only phases are decided here; metrics scraping belongs to the telemetry hub. The request goes
through the same client and the same body reading as the scraper's (``console.telemetry.engine.scrape``:
the error body's message, the model list), and "refused" is read from the failure's kind, not its text.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from console.lifecycle.phases import ProbeResult
from console.telemetry.engine.scrape import (
    MAX_JSON_BYTES,
    Failure,
    Fetched,
    error_message,
    fetch,
    model_ids,
    not_an_engine,
)
from console.transport.http import HTTPClient

if TYPE_CHECKING:
    from console.profiles import EngineProfile

# docker's userland proxy accepts the connection and drops it while nothing listens in the container:
# the same situation as "connection refused" on a bare port.
_DROPPED = "connection dropped (nothing listening behind the published port)"


def ready_key(profile: EngineProfile, key: str | None) -> str | None:
    """The key for the readiness probe only where the profile says the engine checks it there."""
    return key if key and profile.path_needs_key(profile.health.ready_path) else None


def classify(got: Fetched, path: str = "the ready path") -> ProbeResult:
    """One exchange of the ready ``path`` as the phase machine reads it."""
    if got.status is None:
        if got.failure is Failure.REFUSED:
            return ProbeResult("refused")
        if got.failure is Failure.CLOSED_EARLY:
            return ProbeResult("refused", detail=_DROPPED)
        if got.failure is Failure.NO_ANSWER:
            return ProbeResult("timeout", detail="no answer within the probe timeout")
        return ProbeResult("error", detail=got.error[:120])
    models = len(model_ids(got.body)) if got.ok else 0
    stranger = "" if models else not_an_engine(path, got, model_list=True)
    if stranger:  # a login page, a redirect, an empty 204: something else answers, not a loading engine
        return ProbeResult("http", got.status, detail=stranger, not_engine=True)
    if got.status == 200:
        return ProbeResult("http", 200, models, detail=got.error[:120])
    return ProbeResult("http", got.status, detail=got.error[:120] or error_message(got.body))


class ReadyProbe:
    """Probes one engine's ready path from a blocking caller (a watcher's thread, a command), over one
    kept-alive connection, on an event loop of its own. Close it when done."""

    def __init__(self, base_url: str, ready_path: str, api_key: str | None = None, *, timeout: float) -> None:
        self.ready_path = ready_path
        self.timeout = timeout
        self._auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._bad_url = ""
        self._client: HTTPClient | None = None
        try:
            self._client = HTTPClient(base_url, connect_timeout=timeout)
        except ValueError as exc:  # a URL the client cannot use (a port out of range)
            self._bad_url = str(exc)[:120]
        self._loop = asyncio.new_event_loop()

    def probe(self) -> ProbeResult:
        if self._client is None:
            return ProbeResult("error", detail=self._bad_url)
        got = self._loop.run_until_complete(
            fetch(self._client, self.ready_path, self._auth, max_bytes=MAX_JSON_BYTES, timeout=self.timeout))
        return classify(got, self.ready_path)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._loop.run_until_complete(asyncio.sleep(0))  # let the aborted transports finish closing
        self._loop.close()

    def __enter__(self) -> ReadyProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def probe_ready(base_url: str, ready_path: str, api_key: str | None = None, *, timeout: float) -> ProbeResult:
    """One probe on a connection of its own."""
    with ReadyProbe(base_url, ready_path, api_key, timeout=timeout) as probe:
        return probe.probe()
