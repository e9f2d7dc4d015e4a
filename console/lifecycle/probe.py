"""Readiness probe: one GET of the profile's ready path, classified for the phase machine.

Only phases are decided here; metrics scraping belongs to the telemetry hub.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from console.lifecycle.phases import ProbeResult

if TYPE_CHECKING:
    from console.profiles import EngineProfile


def ready_key(profile: EngineProfile, key: str | None) -> str | None:
    """The key for the readiness probe only where the profile says the engine checks it there."""
    return key if key and profile.path_needs_key(profile.health.ready_path) else None


def count_models(payload: object) -> int:
    """Models listed by an OpenAI-style /v1/models answer ({"data": [...]}, or {"models": [...]})."""
    if isinstance(payload, dict):
        for key in ("data", "models"):
            items = payload.get(key)
            if isinstance(items, list):
                return len(items)
    return 0


def _error_message(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip().splitlines()[0][:120] if resp.text.strip() else ""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("message", ""))[:120]
        if isinstance(err, str):
            return err[:120]
        if "message" in body:
            return str(body["message"])[:120]
    return ""


def probe_ready(client: httpx.Client, base_url: str, ready_path: str, api_key: str | None = None) -> ProbeResult:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        resp = client.get(base_url.rstrip("/") + ready_path, headers=headers)
    except httpx.ConnectError as exc:
        text = str(exc).lower()
        if "refused" in text or "errno 111" in text:
            return ProbeResult("refused")
        return ProbeResult("error", detail=str(exc)[:120])
    except httpx.TimeoutException:
        return ProbeResult("timeout", detail="no answer within the probe timeout")
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        # Docker's userland proxy accepts the connection and drops it while nothing listens in the
        # container: the same situation as "connection refused" on a bare port.
        text = str(exc).lower()
        if "without sending a response" in text or "reset by peer" in text or "errno 104" in text:
            return ProbeResult("refused", detail="connection dropped (nothing listening behind the published port)")
        return ProbeResult("error", detail=f"{type(exc).__name__}: {exc}"[:120])
    except httpx.HTTPError as exc:
        # A server that accepts and drops the connection while starting up.
        return ProbeResult("error", detail=f"{type(exc).__name__}: {exc}"[:120])
    if resp.status_code == 200:
        try:
            models = count_models(resp.json())
        except ValueError:
            models = 0
        return ProbeResult("http", 200, models)
    return ProbeResult("http", resp.status_code, detail=_error_message(resp))
