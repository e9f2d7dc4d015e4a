"""What each engine says about itself right now: its raw metrics payload, its version endpoint and
its models endpoint, probed in parallel with the engine's own timeouts, size caps and API-key rules
(``console.telemetry.engine.scrape``). A dead engine gives its reason, never an exception."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from console.config import EngineInstance
from console.telemetry.engine.scrape import EngineProbe, Fetched

PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    path: str
    fetched: Fetched


@dataclass(frozen=True, slots=True)
class EngineAnswers:
    """The three answers of one engine (``version`` is None when its profile has no such path)."""

    metrics: Endpoint
    models: Endpoint
    version: Endpoint | None


async def _one(inst: EngineInstance, timeout: float) -> EngineAnswers:
    probe = EngineProbe(inst, timeout=timeout)
    health = inst.profile.health
    version_path = health.version_path
    jobs = [probe.metrics(), probe.fetch(health.ready_path)]
    if version_path:
        jobs.append(probe.fetch(version_path))
    try:
        got = await asyncio.gather(*jobs)
    finally:
        probe.close()
    return EngineAnswers(
        metrics=Endpoint(inst.profile.metrics.path, got[0]),
        models=Endpoint(health.ready_path, got[1]),
        version=Endpoint(version_path, got[2]) if version_path else None,
    )


async def probe_all(instances: Sequence[EngineInstance], timeout: float = PROBE_TIMEOUT_S) -> dict[str, EngineAnswers]:
    answers = await asyncio.gather(*(_one(inst, timeout) for inst in instances))
    return {inst.name: a for inst, a in zip(instances, answers, strict=True)}


def probe_engines(instances: Sequence[EngineInstance], timeout: float = PROBE_TIMEOUT_S) -> dict[str, EngineAnswers]:
    """Blocking (its own event loop): call it from a worker thread, never from a UI loop."""
    if not instances:
        return {}
    return asyncio.run(probe_all(instances, timeout))
