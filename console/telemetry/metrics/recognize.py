"""What a metrics payload is when it is not what the profile expects.

- trtllm-serve's JSON ``/metrics`` answers ``[]`` once its iteration stats were read (by its own
  Prometheus collector, or another reader): the normal "already drained" state, not an error.
- A payload with samples but none of the profile's metrics, and no family in the profile's name
  space, comes from another engine: a one-line hint names the families it has and, where the
  prefix is known, which engine (and profile) it looks like.
"""

from __future__ import annotations

import orjson

from console.profiles import EngineProfile
from console.telemetry.metrics.promtext import parse
from console.telemetry.metrics.readings import Reading

__all__ = ["DRAINED", "foreign_hint", "is_drained"]

DRAINED = (
    "trtllm-serve answered [] : no iteration stats since the last read (already drained: the endpoint "
    "is a destructive read, and its Prometheus collector drains it when return_perf_metrics is on); not an error"
)

# Family-name prefix -> what it looks like (and the profile to use, where there is one).
_KNOWN: tuple[tuple[str, str], ...] = (
    ("vllm:", "vLLM (--engine vllm)"),
    ("sglang:", "SGLang (--engine sglang)"),
    ("trtllm_", "trtllm-serve (--engine trtllm)"),
    ("tgi_", "TGI (--engine tgi)"),
    ("llamacpp:", "llama.cpp (--engine llamacpp)"),
    ("nv_inference_", "Triton Inference Server, which no profile reads"),
    ("nv_trt_llm_", "Triton Inference Server, which no profile reads"),  # its TensorRT-LLM backend
)
_SHOWN = 3


def is_drained(payload: bytes | str) -> bool:
    """A JSON payload that is an empty list (trtllm-serve's drained iteration stats)."""
    if len(payload) > 64:
        return False
    try:
        return bool(orjson.loads(payload) == [])
    except orjson.JSONDecodeError:
        return False


def _namespaces(profile: EngineProfile) -> tuple[str, ...]:
    """The profile's own name prefixes: ``vllm:``, ``tgi_`` ... (from its mapped names)."""
    out: set[str] = set()
    for m in profile.metrics.map.values():
        for name in m.names:
            colon = name.find(":")
            under = name.find("_")
            cut = colon if colon != -1 else under
            if cut > 0:
                out.add(name[: cut + 1])
    return tuple(sorted(out))


def foreign_hint(profile: EngineProfile, reading: Reading, payload: bytes | str) -> str | None:
    """One line when ``payload`` holds samples but nothing of ``profile``'s; None otherwise."""
    if reading.resolved or reading.format != "prometheus":
        return None
    # A reading parsed with full=False holds only the profile's families: look at all of them.
    parsed = reading.parsed if reading.unmapped else parse(payload)
    names = [name for name, fam in parsed.families.items() if fam.samples]
    if not names:
        return None  # no samples at all: not a metrics payload (said elsewhere)
    own = _namespaces(profile)
    # Any family of the engine's own, even one only declared (HELP/TYPE) or with malformed samples.
    if any(n.startswith(own) or n.replace("_", ":", 1).startswith(own) for n in parsed.families):
        return None  # the engine's own families, none of them mapped yet (idle)
    looks = list(dict.fromkeys(what for prefix, what in _KNOWN if any(n.startswith(prefix) for n in names)))
    shown = ", ".join(names[:_SHOWN]) + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")
    guess = f"; it looks like {' / '.join(looks)}" if looks else ""
    return f"no {profile.display_name} metrics in this payload ({len(names)} families: {shown}){guess}"
